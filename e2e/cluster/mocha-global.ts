/**
 * Mocha global fixture of the Kubernetes tier: one real cluster for the whole run
 * (`mocha --require dist/e2e/cluster/mocha-global.js`). Without its prerequisites (Go to
 * build the components) the tier skips loudly on a laptop and fails under CI=true.
 */
import { TestCluster } from "./cluster.js";

let cluster: TestCluster | undefined;
let unavailable: string | undefined;

export async function mochaGlobalSetup(): Promise<void> {
  try {
    cluster = await TestCluster.start();
  } catch (error) {
    unavailable = error instanceof Error ? error.message : String(error);
    if (process.env["CI"] === "true") throw error;
    console.warn(`\n  !!! SKIPPING the Kubernetes tier: no test cluster (${unavailable})\n`);
  }
}

export async function mochaGlobalTeardown(): Promise<void> {
  await cluster?.stop();
}

/** The shared cluster; skips the calling suite when it could not start. */
export function testCluster(context: Mocha.Context): TestCluster {
  if (cluster === undefined) context.skip();
  return cluster!;
}

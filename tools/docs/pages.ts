import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { dynamoKserveProgram } from "../../cli/program.js";
import { activatorMetrics } from "../../activator/src/metrics.js";
import { ACTIVATOR_OPTIONS } from "../../lib/contract/activator.js";
import { OperatorMetrics } from "../../operator/src/kube/metrics.js";
import { DATAPLANE_OPTIONS } from "../../lib/contract/dataplane.js";
import { code } from "./markdown.js";
import { crdsPage } from "./crds.js";
import { metricsPage } from "./metrics.js";
import { optionsPage } from "./options.js";
import { protocolsPage } from "./protocols.js";
import { startServedDataPlane } from "./served.js";

/** The repository's root (this file runs from dist/tools/docs/). */
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** crds/*.yaml, by name. */
function crdFiles(): Map<string, string> {
  const names = readdirSync(join(ROOT, "crds"))
    .filter((name) => name.endsWith(".yaml"))
    .sort();
  return new Map(names.map((name) => [`crds/${name}`, readFileSync(join(ROOT, "crds", name), "utf8")]));
}

const flagOf = (flags: string): string => code(flags.split(" ")[0]!);

/** Every generated reference page, by its path under docs/reference/. */
export async function referencePages(): Promise<Map<string, string>> {
  const served = await startServedDataPlane();
  try {
    const metrics = metricsPage([
      {
        title: "Data plane",
        served: `On the metrics port (${flagOf(DATAPLANE_OPTIONS.metricsPort.flags)}, default ${String(DATAPLANE_OPTIONS.metricsPort.default)}), at ${code("/metrics")}; with ${flagOf(DATAPLANE_OPTIONS.grpcWorkers.flags)}, summed over the workers.`,
        registry: served.metrics,
      },
      {
        title: "Operator",
        served: `On the operator's HTTP port (${code("--http-port")}), at ${code("/metrics")}.`,
        registry: new OperatorMetrics().registry,
      },
      {
        title: "Activator",
        served: `On the activator's metrics port (${flagOf(ACTIVATOR_OPTIONS.metricsPort.flags)}, default ${String(ACTIVATOR_OPTIONS.metricsPort.default)}), at ${code("/metrics")}: one activator per model scaled to zero.`,
        registry: activatorMetrics().registry,
      },
    ]);
    return new Map([
      ["options.md", optionsPage(dynamoKserveProgram())],
      ["crds.md", crdsPage(crdFiles())],
      ["metrics.md", metrics],
      ["protocols.md", await protocolsPage(served)],
    ]);
  } finally {
    await served.stop();
  }
}

import { Command } from "commander";
import { pino } from "pino";
import { DATAPLANE_OPTIONS, type DataPlaneArguments } from "../lib/contract/dataplane.js";
import { withOptions } from "../lib/contract/options.js";
import { stopOnSignals } from "./options.js";

/** `dynamo-kserve dataplane`: its options are the data plane's contract (lib/contract/dataplane.ts). */
export function dataplaneCommand(): Command {
  const command = new Command("dataplane").description(
    "Serve models over Triton's gRPC protocol (KServe v2), KServe v2 REST and OpenAI-compatible HTTP",
  );
  return withOptions(command, DATAPLANE_OPTIONS).action(async (args: DataPlaneArguments) => {
    const logger = pino({ level: args.logLevel, base: { component: "dataplane", pid: process.pid } });
    // Loaded on use: the operator, migrate and infer commands never load the data plane's runtime.
    const { serveDataPlane } = await import("../dataplane/src/main.js");
    const serving = serveDataPlane(args, logger);
    stopOnSignals(serving, logger);
    await serving;
  });
}

/**
 * What the data plane's command line makes of `args` (flags, then environment variables, then
 * defaults), its action replaced so nothing starts: the docs generator and the tests read the
 * typed arguments a real command line gives.
 */
export async function parsedDataPlaneArguments(args: readonly string[]): Promise<DataPlaneArguments> {
  const command = dataplaneCommand().exitOverride();
  let received: DataPlaneArguments | undefined;
  command.action((options: DataPlaneArguments) => {
    received = options;
  });
  await command.parseAsync(["node", "dataplane", ...args]);
  return received!;
}

import { Command } from "commander";
import { pino } from "pino";
import { ACTIVATOR_OPTIONS, type ActivatorArguments } from "../lib/contract/activator.js";
import { withOptions } from "../lib/contract/options.js";
import { stopOnSignals } from "./options.js";

/** `dynamo-kserve activator`: its options are its contract with the operator (lib/contract/activator.ts). */
export function activatorCommand(): Command {
  const command = new Command("activator").description(
    "Stand in for a model scaled to zero: hold its gRPC and HTTP requests until a data-plane pod is Ready, then relay them (KEDA's external-push scaler on the side)",
  );
  return withOptions(command, ACTIVATOR_OPTIONS).action(async (args: ActivatorArguments) => {
    const logger = pino({ level: args.logLevel, base: { component: "activator", pid: process.pid } });
    // Loaded on use: the other commands never load the activator or the Kubernetes client for it.
    const { serveActivator } = await import("../activator/src/main.js");
    const serving = serveActivator(args, logger);
    stopOnSignals(serving, logger);
    await serving;
  });
}

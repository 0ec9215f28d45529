import { Command } from "commander";
import { pino } from "pino";
import { integer, list, option, seconds, logLevelOption, stopOnSignals } from "./options.js";

interface OperatorFlags {
  kubeconfig?: string;
  namespace?: string[];
  dataplaneImage: string;
  workers: number;
  host: string;
  httpPort: number;
  resyncSecs: number;
  logLevel: string;
}

export function operatorCommand(): Command {
  return new Command("operator")
    .description("Run the Kubernetes operator that turns DynamoKserveModel objects into running data planes")
    .addOption(
      option(
        "--kubeconfig <file>",
        "kubeconfig to use (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)",
        "KUBECONFIG",
      ),
    )
    .addOption(
      option(
        "--namespace <name>",
        "a namespace to manage (repeatable or comma-separated; default: all)",
        "DYNAMO_OPERATOR_NAMESPACES",
      ).argParser(list),
    )
    .addOption(
      option(
        "--dataplane-image <image>",
        "data-plane image for models that do not set spec.image",
        "DYNAMO_DATAPLANE_IMAGE",
      ).default("dynamo-kserve:latest"),
    )
    .addOption(
      option("--workers <n>", "models reconciled in parallel", "DYNAMO_OPERATOR_WORKERS")
        .argParser(integer(1, 256))
        .default(4),
    )
    .addOption(option("--host <address>", "address of the HTTP endpoint", "DYNAMO_OPERATOR_HOST").default("0.0.0.0"))
    .addOption(
      option(
        "--http-port <port>",
        "HTTP port for /healthz, /readyz and /metrics (0 picks a free one)",
        "DYNAMO_OPERATOR_HTTP_PORT",
      )
        .argParser(integer(0, 65535))
        .default(8080),
    )
    .addOption(
      option(
        "--resync-secs <seconds>",
        "reconcile every model this often even without changes",
        "DYNAMO_OPERATOR_RESYNC_SECS",
      )
        .argParser(seconds)
        .default(300),
    )
    .addOption(logLevelOption())
    .action(async (flags: OperatorFlags) => {
      const logger = pino({ level: flags.logLevel, base: { component: "operator", pid: process.pid } });
      // Loaded on use: the Kubernetes client costs about a second of start-up that the
      // dataplane and infer commands should not pay.
      const { startOperator } = await import("../operator/src/operator.js");
      const operator = await startOperator({
        kubeconfig: flags.kubeconfig,
        namespaces: flags.namespace ?? [],
        dataplaneImage: flags.dataplaneImage,
        workers: flags.workers,
        httpHost: flags.host,
        httpPort: flags.httpPort,
        resyncSeconds: flags.resyncSecs,
        logger,
      });
      stopOnSignals(operator, logger);
    });
}

import { Command, InvalidArgumentError } from "commander";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
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
  repositoryStatusSecs: number;
  leaderElect?: boolean;
  leaderElectionNamespace?: string;
  leaderElectionId: string;
  leaderElectionLeaseDurationSecs: number;
  leaderElectionRenewDeadlineSecs: number;
  leaderElectionRetryPeriodSecs: number;
  selfSignedValiditySecs: number;
  selfSignedRenewBeforeSecs: number;
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
    .addOption(
      option(
        "--repository-status-secs <seconds>",
        "ask a DynamoKserveRepository's data plane for its models' states this often",
        "DYNAMO_OPERATOR_REPOSITORY_STATUS_SECS",
      )
        .argParser(seconds)
        .default(15),
    )
    .addOption(
      option(
        "--leader-elect",
        "run several replicas: only the holder of a coordination.k8s.io Lease reconciles",
        "DYNAMO_OPERATOR_LEADER_ELECT",
      ),
    )
    .addOption(
      option(
        "--leader-election-namespace <name>",
        "namespace of the Lease (default: the pod's own namespace, else default)",
        "DYNAMO_OPERATOR_LEADER_ELECTION_NAMESPACE",
      ),
    )
    .addOption(
      option("--leader-election-id <name>", "name of the Lease", "DYNAMO_OPERATOR_LEADER_ELECTION_ID").default(
        "dynamo-kserve-operator",
      ),
    )
    .addOption(
      option(
        "--leader-election-lease-duration-secs <seconds>",
        "how long a Lease not renewed keeps other candidates waiting (the failover time)",
        "DYNAMO_OPERATOR_LEADER_ELECTION_LEASE_DURATION_SECS",
      )
        .argParser(seconds)
        .default(15),
    )
    .addOption(
      option(
        "--leader-election-renew-deadline-secs <seconds>",
        "how long the leader may fail to renew before it stops leading",
        "DYNAMO_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE_SECS",
      )
        .argParser(seconds)
        .default(10),
    )
    .addOption(
      option(
        "--leader-election-retry-period-secs <seconds>",
        "how often candidates try and the leader renews",
        "DYNAMO_OPERATOR_LEADER_ELECTION_RETRY_PERIOD_SECS",
      )
        .argParser(seconds)
        .default(2),
    )
    .addOption(
      option(
        "--self-signed-validity-secs <seconds>",
        "how long tls.mode SelfSigned serving certificates are valid (default 90 days)",
        "DYNAMO_OPERATOR_SELF_SIGNED_VALIDITY_SECS",
      )
        .argParser(seconds)
        .default(90 * 86_400),
    )
    .addOption(
      option(
        "--self-signed-renew-before-secs <seconds>",
        "re-issue a SelfSigned serving certificate when less than this is left (default 30 days)",
        "DYNAMO_OPERATOR_SELF_SIGNED_RENEW_BEFORE_SECS",
      )
        .argParser(seconds)
        .default(30 * 86_400),
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
        repositoryStatusSeconds: flags.repositoryStatusSecs,
        leaderElection: flags.leaderElect === true ? leaderElectionOptions(flags) : undefined,
        onLostLeadership: () => process.exit(1),
        certificates: certificateSettings(flags),
        logger,
      });
      stopOnSignals(operator, logger);
    });
}

/** Where a pod finds its own namespace (the service account mount). */
const POD_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

function leaderElectionOptions(flags: OperatorFlags) {
  const leaseDurationMs = flags.leaderElectionLeaseDurationSecs * 1000;
  const renewDeadlineMs = flags.leaderElectionRenewDeadlineSecs * 1000;
  const retryPeriodMs = flags.leaderElectionRetryPeriodSecs * 1000;
  if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
    throw new InvalidArgumentError(
      "leader election needs retry period < renew deadline < lease duration (so a stale leader stops before another starts)",
    );
  }
  const podNamespace = existsSync(POD_NAMESPACE_FILE) ? readFileSync(POD_NAMESPACE_FILE, "utf8").trim() : undefined;
  return {
    namespace: flags.leaderElectionNamespace ?? podNamespace ?? "default",
    name: flags.leaderElectionId,
    identity: `${hostname()}_${randomUUID()}`,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
  };
}

function certificateSettings(flags: OperatorFlags) {
  if (flags.selfSignedRenewBeforeSecs >= flags.selfSignedValiditySecs) {
    throw new InvalidArgumentError("--self-signed-renew-before-secs must be less than --self-signed-validity-secs");
  }
  return { validityMs: flags.selfSignedValiditySecs * 1000, renewBeforeMs: flags.selfSignedRenewBeforeSecs * 1000 };
}

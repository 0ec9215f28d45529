import { Command, InvalidArgumentError } from "commander";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { pino } from "pino";
import {
  duration,
  flag,
  logLevel,
  repeatable,
  text,
  wholeNumber,
  type ValuesOf,
  withOptions,
} from "../lib/contract/options.js";
import { stopOnSignals } from "./options.js";
// Pure builders and constants: no Kubernetes client loaded with them.
import { ENDPOINT_PICKER_IMAGE } from "../operator/src/resources/endpoint-picker.js";

/** `dynamo-kserve operator`'s options, declared once each (lib/contract/options.ts). */
const OPERATOR_OPTIONS = {
  kubeconfig: text("--kubeconfig <file>", {
    env: "KUBECONFIG",
    help: "kubeconfig to use (default: ~/.kube/config, then the pod's service account)",
  }),
  clusterWaitSecs: duration(
    "--cluster-wait-secs <seconds>",
    {
      env: "DYNAMO_OPERATOR_CLUSTER_WAIT_SECS",
      help: "at start, how long to wait for the Kubernetes API server to answer before exiting with an error",
    },
    30,
  ),
  namespace: repeatable("--namespace <name>", {
    env: "DYNAMO_OPERATOR_NAMESPACES",
    help: "a namespace to manage (repeatable or comma-separated; default: all)",
  }),
  dataplaneImage: text(
    "--dataplane-image <image>",
    { env: "DYNAMO_DATAPLANE_IMAGE", help: "data-plane image for models that do not set spec.image" },
    "dynamo-kserve:latest",
  ),
  endpointPickerImage: text(
    "--endpoint-picker-image <image>",
    {
      env: "DYNAMO_ENDPOINT_PICKER_IMAGE",
      help: "the endpoint picker's image for pools with spec.inferencePool.endpointPicker that do not set its image (GAIE's epp)",
    },
    ENDPOINT_PICKER_IMAGE,
  ),
  kedaPrometheusAddress: text("--keda-prometheus-address <url>", {
    env: "DYNAMO_KEDA_PROMETHEUS_ADDRESS",
    help: "the Prometheus KEDA's triggers query for autoscaling.class KEDA, e.g. http://prometheus-operated.monitoring:9090 (a model's autoscaling.keda.prometheusAddress wins)",
  }),
  workers: wholeNumber(
    "--workers <n>",
    { env: "DYNAMO_OPERATOR_WORKERS", help: "models reconciled in parallel" },
    { min: 1, max: 256 },
    16,
  ),
  host: text("--host <address>", { env: "DYNAMO_OPERATOR_HOST", help: "address of the HTTP endpoint" }, "0.0.0.0"),
  httpPort: wholeNumber(
    "--http-port <port>",
    {
      env: "DYNAMO_OPERATOR_HTTP_PORT",
      help: "HTTP port for /healthz, /readyz and /metrics (0 picks a free one)",
    },
    { min: 0, max: 65535 },
    8080,
  ),
  resyncSecs: duration(
    "--resync-secs <seconds>",
    { env: "DYNAMO_OPERATOR_RESYNC_SECS", help: "reconcile every model this often even without changes" },
    300,
  ),
  repositoryStatusSecs: duration(
    "--repository-status-secs <seconds>",
    {
      env: "DYNAMO_OPERATOR_REPOSITORY_STATUS_SECS",
      help: "ask a DynamoKserveRepository's data plane for its models' states this often",
    },
    15,
  ),
  storageCheckSecs: duration(
    "--storage-check-secs <seconds>",
    {
      env: "DYNAMO_OPERATOR_STORAGE_CHECK_SECS",
      help: "how long the operator's listing of a storageUri (ModelFilesReady) stands before it lists again; at once when the CR, its Secret or CA bundle changes, within 30 s after a failure",
    },
    300,
  ),
  leaderElect: flag("--leader-elect", {
    env: "DYNAMO_OPERATOR_LEADER_ELECT",
    help: "run several replicas: only the holder of a coordination.k8s.io Lease reconciles",
  }),
  leaderElectionNamespace: text("--leader-election-namespace <name>", {
    env: "DYNAMO_OPERATOR_LEADER_ELECTION_NAMESPACE",
    help: "namespace of the Lease (default: the pod's own namespace, else default)",
  }),
  leaderElectionId: text(
    "--leader-election-id <name>",
    { env: "DYNAMO_OPERATOR_LEADER_ELECTION_ID", help: "name of the Lease" },
    "dynamo-kserve-operator",
  ),
  leaderElectionLeaseDurationSecs: duration(
    "--leader-election-lease-duration-secs <seconds>",
    {
      env: "DYNAMO_OPERATOR_LEADER_ELECTION_LEASE_DURATION_SECS",
      help: "how long a Lease not renewed keeps other candidates waiting (the failover time)",
    },
    15,
  ),
  leaderElectionRenewDeadlineSecs: duration(
    "--leader-election-renew-deadline-secs <seconds>",
    {
      env: "DYNAMO_OPERATOR_LEADER_ELECTION_RENEW_DEADLINE_SECS",
      help: "how long the leader may fail to renew before it stops leading",
    },
    10,
  ),
  leaderElectionRetryPeriodSecs: duration(
    "--leader-election-retry-period-secs <seconds>",
    {
      env: "DYNAMO_OPERATOR_LEADER_ELECTION_RETRY_PERIOD_SECS",
      help: "how often candidates try and the leader renews",
    },
    2,
  ),
  selfSignedValiditySecs: duration(
    "--self-signed-validity-secs <seconds>",
    {
      env: "DYNAMO_OPERATOR_SELF_SIGNED_VALIDITY_SECS",
      help: "how long tls.mode SelfSigned serving certificates are valid (default 90 days)",
    },
    90 * 86_400,
  ),
  selfSignedRenewBeforeSecs: duration(
    "--self-signed-renew-before-secs <seconds>",
    {
      env: "DYNAMO_OPERATOR_SELF_SIGNED_RENEW_BEFORE_SECS",
      help: "re-issue a SelfSigned serving certificate when less than this is left (default 30 days)",
    },
    30 * 86_400,
  ),
  logLevel,
} as const;

type OperatorFlags = ValuesOf<typeof OPERATOR_OPTIONS>;

export function operatorCommand(): Command {
  const command = new Command("operator").description(
    "Run the Kubernetes operator that turns DynamoKserveModel objects into running data planes",
  );
  return withOptions(command, OPERATOR_OPTIONS).action(async (flags: OperatorFlags) => {
    const logger = pino({ level: flags.logLevel, base: { component: "operator", pid: process.pid } });
    // Loaded on use: the Kubernetes client costs about a second of start-up that the
    // dataplane and infer commands should not pay.
    const { startOperator } = await import("../operator/src/operator.js");
    const running = startOperator({
      kubeconfig: flags.kubeconfig,
      clusterWaitSeconds: flags.clusterWaitSecs,
      namespaces: flags.namespace ?? [],
      dataplaneImage: flags.dataplaneImage,
      endpointPickerImage: flags.endpointPickerImage,
      ...(flags.kedaPrometheusAddress !== undefined ? { kedaPrometheusAddress: flags.kedaPrometheusAddress } : {}),
      workers: flags.workers,
      httpHost: flags.host,
      httpPort: flags.httpPort,
      resyncSeconds: flags.resyncSecs,
      repositoryStatusSeconds: flags.repositoryStatusSecs,
      storageCheckSeconds: flags.storageCheckSecs,
      leaderElection: flags.leaderElect === true ? leaderElectionOptions(flags) : undefined,
      onLostLeadership: () => process.exit(1),
      certificates: certificateSettings(flags),
      logger,
    });
    stopOnSignals(running, logger);
    await running;
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

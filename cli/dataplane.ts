import { Command, InvalidArgumentError } from "commander";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import cluster from "node:cluster";
import { availableParallelism } from "node:os";
import { startDataPlane, type DataPlaneOptions } from "../dataplane/src/dataplane.js";
import { runDataPlaneWorker, startDataPlaneWorkers } from "../dataplane/src/workers.js";
import type { ModelControlMode } from "../dataplane/src/models/registry.js";
import { DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_STREAM_MAX_PENDING } from "../dataplane/src/limits.js";
import type { GrpcTuning } from "../dataplane/src/server/grpc.js";
import type { SecurityOptions } from "../dataplane/src/server/security.js";
import { integer, list, option, ratio, seconds, logLevelOption, stopOnSignals } from "./options.js";

/** The example repository shipped with the project, served when no model source is given. */
export const EXAMPLE_REPOSITORY = fileURLToPath(new URL("../../examples/model_repository", import.meta.url));

interface DataPlaneFlags {
  modelRepository?: string[];
  modelConfig?: string[];
  modelFilesRoot?: string;
  forwardUnsupported?: string;
  modelControlMode: ModelControlMode;
  loadModel?: string[];
  repositoryPollSecs: number;
  disableAutoCompleteConfig?: boolean;
  host: string;
  grpcPort: number;
  metricsPort: number;
  maxMessageSize: number;
  streamMaxPending: number;
  shutdownGraceSecs: number;
  useTls?: boolean;
  certFile?: string;
  keyFile?: string;
  clientCaFile?: string;
  authTokenFile?: string;
  credentialsReloadSecs: number;
  grpcKeepaliveTimeSecs?: number;
  grpcKeepaliveTimeoutSecs?: number;
  grpcMaxConnectionAgeSecs?: number;
  grpcMaxConnectionAgeGraceSecs?: number;
  grpcMaxConnectionIdleSecs?: number;
  grpcMaxConcurrentStreams?: number;
  grpcInitialConnectionWindowSize?: number;
  grpcInitialStreamWindowSize?: number;
  drainDelaySecs: number;
  grpcWorkers: number;
  otlpTracesEndpoint?: string;
  otelServiceName: string;
  traceSampleRatio: number;
  logLevel: string;
}

export function dataplaneCommand(): Command {
  return new Command("dataplane")
    .description("Serve models over the KServe v2 / Triton gRPC protocol")
    .addOption(
      option(
        "--model-repository <dir>",
        "Triton-layout model repository (repeatable); default: the bundled examples/model_repository",
        "DYNAMO_MODEL_REPOSITORY",
      ).argParser(list),
    )
    .addOption(
      option(
        "--model-config <file>",
        "a single model configuration file, config.pbtxt text or binary ModelConfig (repeatable)",
        "DYNAMO_MODEL_CONFIG",
      ).argParser(list),
    )
    .addOption(
      option(
        "--model-files-root <dir>",
        "version folders of models configured by a single file: <dir>/<model>/<version>/model.onnx (a volume beside a ConfigMap of configs)",
        "DYNAMO_MODEL_FILES_ROOT",
      ),
    )
    .addOption(
      option(
        "--forward-unsupported <host:port>",
        "forward models this data plane cannot run (python, pytorch, tensorflow, tensorrt, ensembles, ...) to this Triton gRPC endpoint, as migrate does",
        "DYNAMO_FORWARD_UNSUPPORTED",
      ),
    )
    .addOption(
      option(
        "--model-control-mode <mode>",
        "none | poll (follow changes on disk) | explicit (load/unload RPCs)",
        "DYNAMO_MODEL_CONTROL_MODE",
      )
        .choices(["none", "poll", "explicit"])
        .default("poll"),
    )
    .addOption(
      option(
        "--load-model <name>",
        "with explicit control: a model to load at start, '*' for all (repeatable)",
        "DYNAMO_LOAD_MODEL",
      ).argParser(list),
    )
    .addOption(
      option(
        "--repository-poll-secs <seconds>",
        "how often poll mode rereads the repository",
        "DYNAMO_REPOSITORY_POLL_SECS",
      )
        .argParser(seconds)
        .default(5),
    )
    .addOption(
      option(
        "--disable-auto-complete-config",
        "do not fill in what config.pbtxt leaves out from the model file (ONNX inputs, outputs, batching), as Triton's flag",
        "DYNAMO_DISABLE_AUTO_COMPLETE_CONFIG",
      ),
    )
    .addOption(option("--host <address>", "address to listen on", "DYNAMO_HOST").default("0.0.0.0"))
    .addOption(
      option("--grpc-port <port>", "gRPC port (0 picks a free one)", "DYNAMO_GRPC_PORT")
        .argParser(integer(0, 65535))
        .default(8001),
    )
    .addOption(
      option(
        "--metrics-port <port>",
        "HTTP port for /metrics and the /v2/health/* probes, no token needed (0 picks a free one)",
        "DYNAMO_METRICS_PORT",
      )
        .argParser(integer(0, 65535))
        .default(8002),
    )
    .addOption(
      option(
        "--max-message-size <bytes>",
        "largest gRPC message accepted or sent, compressed requests by their decompressed size (up to 2 GiB - 1)",
        "DYNAMO_MAX_MESSAGE_SIZE",
      )
        .argParser(integer(1024, 2 ** 31 - 1))
        .default(DEFAULT_MAX_MESSAGE_SIZE, "64 MiB"),
    )
    .addOption(
      option(
        "--stream-max-pending <n>",
        "ModelStreamInfer requests of one stream running at once; at the cap the stream is not read until one finishes (HTTP/2 back-pressure)",
        "DYNAMO_STREAM_MAX_PENDING",
      )
        .argParser(integer(1))
        .default(DEFAULT_STREAM_MAX_PENDING),
    )
    .addOption(
      option(
        "--shutdown-grace-secs <seconds>",
        "on SIGTERM, how long in-flight requests may finish",
        "DYNAMO_SHUTDOWN_GRACE_SECS",
      )
        .argParser(integer(0))
        .default(30),
    )
    .addOption(
      option(
        "--grpc-workers <n>",
        "serve gRPC from n processes on the same port (one Node process uses one core); 0: one per core",
        "DYNAMO_GRPC_WORKERS",
      )
        .argParser(integer(0, 256))
        .default(1),
    )
    .addOption(
      option(
        "--drain-delay-secs <seconds>",
        "on SIGTERM, keep serving this long with readiness NOT_SERVING before new calls stop (endpoint propagation)",
        "DYNAMO_DRAIN_DELAY_SECS",
      )
        .argParser(seconds)
        .default(0),
    )
    .addOption(
      option(
        "--grpc-keepalive-time-secs <seconds>",
        "ping an idle client after this long (grpc-js default: 2 h)",
        "DYNAMO_GRPC_KEEPALIVE_TIME_SECS",
      ).argParser(seconds),
    )
    .addOption(
      option(
        "--grpc-keepalive-timeout-secs <seconds>",
        "close a connection whose ping is not answered this fast (default 20)",
        "DYNAMO_GRPC_KEEPALIVE_TIMEOUT_SECS",
      ).argParser(seconds),
    )
    .addOption(
      option(
        "--grpc-max-connection-age-secs <seconds>",
        "close connections this old (with GOAWAY) so L4 load balancers rebalance",
        "DYNAMO_GRPC_MAX_CONNECTION_AGE_SECS",
      ).argParser(seconds),
    )
    .addOption(
      option(
        "--grpc-max-connection-age-grace-secs <seconds>",
        "then give their calls this long to finish",
        "DYNAMO_GRPC_MAX_CONNECTION_AGE_GRACE_SECS",
      ).argParser(seconds),
    )
    .addOption(
      option(
        "--grpc-max-connection-idle-secs <seconds>",
        "close connections idle this long",
        "DYNAMO_GRPC_MAX_CONNECTION_IDLE_SECS",
      ).argParser(seconds),
    )
    .addOption(
      option(
        "--grpc-max-concurrent-streams <n>",
        "HTTP/2 streams (calls) per connection at once",
        "DYNAMO_GRPC_MAX_CONCURRENT_STREAMS",
      ).argParser(integer(1)),
    )
    .addOption(
      option(
        "--grpc-initial-connection-window-size <bytes>",
        "HTTP/2 connection flow-control window of upstream (kserve-grpc) channels; the reference frontend's variable",
        "DYN_GRPC_INITIAL_CONNECTION_WINDOW_SIZE",
      ).argParser(integer(65535, 2 ** 31 - 1)),
    )
    .addOption(
      option(
        "--grpc-initial-stream-window-size <bytes>",
        "HTTP/2 stream flow-control window of upstream (kserve-grpc) channels; the reference frontend's variable",
        "DYN_GRPC_INITIAL_STREAM_WINDOW_SIZE",
      ).argParser(integer(65535, 2 ** 31 - 1)),
    )
    .addOption(option("--use-tls", "serve gRPC over TLS (needs --cert-file and --key-file)", "DYNAMO_USE_TLS"))
    .addOption(
      option("--cert-file <pem>", "the server certificate (chain), PEM; reloaded when it changes", "DYNAMO_TLS_CERT"),
    )
    .addOption(option("--key-file <pem>", "the server certificate's private key, PEM", "DYNAMO_TLS_KEY"))
    .addOption(
      option(
        "--client-ca-file <pem>",
        "mTLS: only clients with a certificate signed by this CA may connect",
        "DYNAMO_TLS_CLIENT_CA",
      ),
    )
    .addOption(
      option(
        "--auth-token-file <file>",
        "accept only calls with 'authorization: Bearer <token>' for a token in this file (one per line; health checks need none)",
        "DYNAMO_AUTH_TOKEN_FILE",
      ),
    )
    .addOption(
      option(
        "--credentials-reload-secs <seconds>",
        "how often certificate and token files are reread (Secret rotation)",
        "DYNAMO_CREDENTIALS_RELOAD_SECS",
      )
        .argParser(seconds)
        .default(10),
    )
    .addOption(
      option(
        "--otlp-traces-endpoint <url>",
        "trace each request with OpenTelemetry, exported over OTLP/HTTP (e.g. http://otel-collector:4318/v1/traces); off when unset",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
      ),
    )
    .addOption(
      option("--otel-service-name <name>", "service.name of the traces", "OTEL_SERVICE_NAME").default(
        "dynamo-kserve-dataplane",
      ),
    )
    .addOption(
      option(
        "--trace-sample-ratio <ratio>",
        "share of new traces recorded, 0 to 1 (a caller's traceparent decision is followed)",
        "DYNAMO_TRACE_SAMPLE_RATIO",
      )
        .argParser(ratio)
        .default(1),
    )
    .addOption(logLevelOption())
    .action(async (flags: DataPlaneFlags) => {
      const logger = pino({ level: flags.logLevel, base: { component: "dataplane", pid: process.pid } });
      const security = securityOptions(flags);
      const repositories = flags.modelRepository ?? (flags.modelConfig === undefined ? [EXAMPLE_REPOSITORY] : []);
      const options: DataPlaneOptions = {
        modelRepositories: repositories,
        modelConfigFiles: flags.modelConfig ?? [],
        ...(flags.modelFilesRoot !== undefined ? { modelFilesRoot: flags.modelFilesRoot } : {}),
        ...(flags.forwardUnsupported !== undefined ? { forwardUnsupportedTo: flags.forwardUnsupported } : {}),
        modelControlMode: flags.modelControlMode,
        loadModels: flags.loadModel ?? [],
        repositoryPollSeconds: flags.repositoryPollSecs,
        autoCompleteConfig: flags.disableAutoCompleteConfig !== true,
        host: flags.host,
        grpcPort: flags.grpcPort,
        httpPort: flags.metricsPort,
        maxMessageSize: flags.maxMessageSize,
        streamMaxPending: flags.streamMaxPending,
        shutdownGraceSeconds: flags.shutdownGraceSecs,
        security,
        tuning: tuningOptions(flags),
        // grpc-js has one window for a channel's connection and its streams: the larger wins.
        upstreamFlowControlWindow: largest(flags.grpcInitialConnectionWindowSize, flags.grpcInitialStreamWindowSize),
        drainDelaySeconds: flags.drainDelaySecs,
        tracing:
          flags.otlpTracesEndpoint === undefined
            ? undefined
            : {
                endpoint: flags.otlpTracesEndpoint,
                serviceName: flags.otelServiceName,
                sampleRatio: flags.traceSampleRatio,
              },
        logger,
      };
      const workers = flags.grpcWorkers === 0 ? availableParallelism() : flags.grpcWorkers;
      if (cluster.isWorker) stopOnSignals(await runDataPlaneWorker(options, logger), logger);
      else if (workers > 1) stopOnSignals(await startDataPlaneWorkers(options, workers), logger);
      else stopOnSignals(await startDataPlane(options), logger);
    });
}

function securityOptions(flags: DataPlaneFlags): SecurityOptions {
  const { useTls, certFile, keyFile, clientCaFile } = flags;
  if (useTls !== true && (certFile !== undefined || keyFile !== undefined || clientCaFile !== undefined)) {
    throw new InvalidArgumentError("--cert-file, --key-file and --client-ca-file need --use-tls");
  }
  if (useTls === true && (certFile === undefined || keyFile === undefined)) {
    throw new InvalidArgumentError(
      "--use-tls needs --cert-file and --key-file (or DYNAMO_TLS_CERT and DYNAMO_TLS_KEY)",
    );
  }
  const reloadIntervalMs = flags.credentialsReloadSecs * 1000;
  return {
    tls: useTls === true ? { certFile: certFile!, keyFile: keyFile!, clientCaFile, reloadIntervalMs } : undefined,
    authTokenFile: flags.authTokenFile,
    reloadIntervalMs,
  };
}

function tuningOptions(flags: DataPlaneFlags): GrpcTuning {
  const ms = (secs: number | undefined): number | undefined =>
    secs === undefined ? undefined : Math.round(secs * 1000);
  return {
    keepaliveTimeMs: ms(flags.grpcKeepaliveTimeSecs),
    keepaliveTimeoutMs: ms(flags.grpcKeepaliveTimeoutSecs),
    maxConnectionAgeMs: ms(flags.grpcMaxConnectionAgeSecs),
    maxConnectionAgeGraceMs: ms(flags.grpcMaxConnectionAgeGraceSecs),
    maxConnectionIdleMs: ms(flags.grpcMaxConnectionIdleSecs),
    maxConcurrentStreams: flags.grpcMaxConcurrentStreams,
  };
}

const largest = (...values: (number | undefined)[]): number | undefined => {
  const given = values.filter((value): value is number => value !== undefined);
  return given.length === 0 ? undefined : Math.max(...given);
};

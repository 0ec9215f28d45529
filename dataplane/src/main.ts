import cluster from "node:cluster";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import { pythonEngineArguments, type DataPlaneArguments } from "../../lib/contract/dataplane.js";
import { countExternalMemoryInHeapLimit } from "../../lib/external-memory.js";
import { parseModelFilesArgument, type ModelFilesLocation } from "../../lib/contract/layout.js";
import { usableCores } from "./cpu-budget.js";
import { startDataPlane, type DataPlaneOptions, type ModelStorageSettings } from "./dataplane.js";
import type { GrpcTuning } from "./server/grpc.js";
import type { SecurityOptions } from "./server/security.js";
import { runDataPlaneWorker, startDataPlaneWorkers, WORKER_SLOT_ENV } from "./workers.js";

/** The example repository shipped with the project, served when no model source is given. */
export const EXAMPLE_REPOSITORY = fileURLToPath(new URL("../../../examples/model_repository", import.meta.url));

/**
 * Serves a data plane started with `args` (the command line, checked): one process, a
 * --grpc-workers primary, or one of its workers (a worker re-runs the same command line).
 */
export async function serveDataPlane(args: DataPlaneArguments, logger: Logger): Promise<{ stop(): Promise<void> }> {
  countExternalMemoryInHeapLimit();
  const options = dataPlaneOptions(args, logger);
  const workers = args.grpcWorkers === 0 ? usableCores() : args.grpcWorkers;
  if (cluster.isWorker) return runDataPlaneWorker(options, logger);
  if (workers > 1) return startDataPlaneWorkers(options, workers);
  return startDataPlane(options);
}

/** What the data plane's rooms are configured with, from the command line. */
export function dataPlaneOptions(args: DataPlaneArguments, logger: Logger): DataPlaneOptions {
  const repositories = args.modelRepository ?? (args.modelConfig === undefined ? [EXAMPLE_REPOSITORY] : []);
  return {
    modelRepositories: repositories,
    modelStorage: modelStorageSettings(args),
    modelConfigFiles: args.modelConfig ?? [],
    ...(args.modelFilesRoot !== undefined ? { modelFilesRoot: args.modelFilesRoot } : {}),
    ...(args.forwardUnsupported !== undefined ? { forwardUnsupportedTo: args.forwardUnsupported } : {}),
    forwardPython: args.forwardPython === true,
    grpcWorkers: args.grpcWorkers === 0 ? usableCores() : args.grpcWorkers,
    pythonEngine: pythonEngineArguments(args),
    modelControlMode: args.modelControlMode,
    loadModels: args.loadModel ?? [],
    repositoryPollSeconds: args.repositoryPollSecs,
    modelLoadTimeoutSeconds: args.modelLoadTimeoutSecs,
    autoCompleteConfig: args.disableAutoCompleteConfig !== true,
    serverName: args.serverName,
    ...(args.variant !== undefined ? { variant: args.variant } : {}),
    host: args.host,
    grpcPort: args.grpcPort,
    httpPort: args.httpPort,
    metricsPort: args.metricsPort,
    maxMessageSize: args.maxMessageSize,
    sharedMemory: {
      allowClientShm: args.allowClientShm === true,
      grpcWorkers: args.grpcWorkers === 0 ? usableCores() : args.grpcWorkers,
    },
    streamMaxPending: args.streamMaxPending,
    shutdownGraceSeconds: args.shutdownGraceSecs,
    security: securityOptions(args),
    tuning: tuningOptions(args),
    upstreamFlowControlWindow: args.upstreamFlowControlWindow,
    drainDelaySeconds: args.drainDelaySecs,
    tracing:
      args.otlpTracesEndpoint === undefined
        ? undefined
        : { endpoint: args.otlpTracesEndpoint, serviceName: args.otelServiceName, sampleRatio: args.traceSampleRatio },
    logger,
  };
}

/** Which of the --grpc-workers workers this process is: its slot (kept by a replacement) and how many there are. */
export interface WorkerSlot {
  readonly slot: number;
  readonly workers: number;
}

/** A worker's share of the cache's bound; 0 (no bound) stays 0, and a bound never becomes 0 by sharing. */
function workerShare(maxBytes: number, workers: number): number {
  return maxBytes === 0 ? 0 : Math.max(1, Math.floor(maxBytes / workers));
}

/** This process's slot when it is a --grpc-workers worker (the primary says which in its environment). */
function currentWorkerSlot(args: DataPlaneArguments): WorkerSlot | undefined {
  if (!cluster.isWorker) return undefined;
  const slot = Number(process.env[WORKER_SLOT_ENV] ?? cluster.worker?.id ?? 0);
  return { slot, workers: Math.max(1, args.grpcWorkers === 0 ? usableCores() : args.grpcWorkers) };
}

/**
 * The model cache and the stores' options. A --grpc-workers worker keeps a cache folder of
 * its own: each worker loads the repository itself, and one worker's clean-up must never
 * delete a snapshot another's engines read. The folder is its slot's, so a worker started in
 * place of a dead one cleans up what that one left (rather than leaving it on the disk for
 * good), and the bound is shared between the workers: in a pod, together they must stay
 * within the emptyDir whose sizeLimit is the bound.
 */
export function modelStorageSettings(
  args: DataPlaneArguments,
  worker: WorkerSlot | undefined = currentWorkerSlot(args),
): ModelStorageSettings {
  const root = args.modelCacheDir ?? join(tmpdir(), "dynamo-kserve-model-cache");
  return {
    cacheDir: worker === undefined ? root : join(root, `worker-${worker.slot}`),
    cacheMaxBytes:
      worker === undefined ? args.modelCacheMaxBytes : workerShare(args.modelCacheMaxBytes, worker.workers),
    loadPaths: args.modelLoadPath ?? [],
    modelFiles: (args.modelFiles ?? []).map(modelFilesLocation),
    stores: {
      ...(args.storageSecretDir !== undefined ? { secretDir: args.storageSecretDir } : {}),
      ...(args.storageCaFile !== undefined ? { caFile: args.storageCaFile } : {}),
      ...(args.s3Endpoint !== undefined ? { s3Endpoint: args.s3Endpoint } : {}),
      ...(args.s3Region !== undefined ? { s3Region: args.s3Region } : {}),
      ...(args.s3PathStyle === true ? { s3PathStyle: true } : {}),
      ...(args.gcsEndpoint !== undefined ? { gcsEndpoint: args.gcsEndpoint } : {}),
      ...(args.azureEndpoint !== undefined ? { azureEndpoint: args.azureEndpoint } : {}),
    },
  };
}

/** One --model-files value, or an error naming the flag and the form it takes. */
function modelFilesLocation(text: string): ModelFilesLocation {
  const parsed = parseModelFilesArgument(text);
  if (parsed === undefined) {
    throw new Error(
      `--model-files (DYNAMO_MODEL_FILE_LOCATIONS) '${text}' is not <model>=<location>, e.g. resnet=s3://bucket/models/resnet`,
    );
  }
  return parsed;
}

function securityOptions(args: DataPlaneArguments): SecurityOptions {
  const { certFile, keyFile, clientCaFile } = args;
  // As the reference frontend: a certificate and its key turn TLS on by themselves;
  // --use-tls only insists that they are there.
  if (certFile !== undefined && keyFile === undefined) {
    throw new Error("--cert-file (DYNAMO_TLS_CERT) needs --key-file (DYNAMO_TLS_KEY)");
  }
  if (keyFile !== undefined && certFile === undefined) {
    throw new Error("--key-file (DYNAMO_TLS_KEY) needs --cert-file (DYNAMO_TLS_CERT)");
  }
  if (args.useTls === true && certFile === undefined) {
    throw new Error("--use-tls needs --cert-file and --key-file (or DYNAMO_TLS_CERT and DYNAMO_TLS_KEY)");
  }
  if (clientCaFile !== undefined && certFile === undefined) {
    throw new Error("--client-ca-file (DYNAMO_TLS_CLIENT_CA) needs --cert-file and --key-file: mTLS is TLS first");
  }
  const reloadIntervalMs = args.credentialsReloadSecs * 1000;
  return {
    tls:
      certFile !== undefined && keyFile !== undefined
        ? { certFile, keyFile, clientCaFile, reloadIntervalMs }
        : undefined,
    authTokenFile: args.authTokenFile,
    modelControlTokenFile: args.modelControlTokenFile,
    reloadIntervalMs,
  };
}

function tuningOptions(args: DataPlaneArguments): GrpcTuning {
  const ms = (secs: number | undefined): number | undefined =>
    secs === undefined ? undefined : Math.round(secs * 1000);
  const shapesKeepalive = args.grpcHttp2MaxPingsWithoutData > 0 || args.grpcHttp2MinTimeBetweenPingsSecs > 0;
  if (shapesKeepalive && args.grpcKeepaliveTimeSecs === undefined) {
    throw new Error(
      "--grpc-http2-max-pings-without-data and --grpc-http2-min-time-between-pings-secs shape the server's keepalive pings: set --grpc-keepalive-time-secs",
    );
  }
  return {
    maxConnectionAgeMs: ms(args.grpcMaxConnectionAgeSecs),
    maxConnectionAgeGraceMs: ms(args.grpcMaxConnectionAgeGraceSecs),
    maxConnectionIdleMs: ms(args.grpcMaxConnectionIdleSecs),
    maxConcurrentStreams: args.grpcMaxConcurrentStreams,
    streamWindowBytes: args.grpcInitialStreamWindowSize,
    connectionWindowBytes: args.grpcInitialConnectionWindowSize,
    pings: {
      ...(args.grpcKeepaliveTimeSecs !== undefined
        ? {
            keepalive: {
              timeMs: args.grpcKeepaliveTimeSecs * 1000,
              timeoutMs: args.grpcKeepaliveTimeoutSecs * 1000,
              maxPingsWithoutData: args.grpcHttp2MaxPingsWithoutData,
              minTimeBetweenPingsMs: args.grpcHttp2MinTimeBetweenPingsSecs * 1000,
            },
          }
        : {}),
      ...(args.grpcHttp2MaxPingStrikes > 0
        ? {
            clientPings: {
              permitWithoutCalls: args.grpcKeepalivePermitWithoutCalls === true,
              minIntervalWithoutDataMs: args.grpcHttp2MinPingIntervalWithoutDataSecs * 1000,
              maxStrikes: args.grpcHttp2MaxPingStrikes,
            },
          }
        : {}),
    },
  };
}

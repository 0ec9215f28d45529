import { setTimeout as sleep } from "node:timers/promises";
import type { Server as HttpServer } from "node:http";
import type { Server as GrpcServer } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { ModelFilesLocation } from "../../lib/contract/layout.js";
import type { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { autoCompleteConfig, ENGINES, engineOf, forwardedConfig, localSupport } from "../../lib/engines/catalog.js";
import type { ModelFiles } from "../../lib/model-repository/sources.js";
import type { PythonEngineArguments } from "../../lib/contract/dataplane.js";
import { createEngine } from "./engines/runtimes.js";
import { completePythonConfig } from "./engines/python/auto-complete.js";
import type { Engine, ModelInference } from "./engines/engine.js";
import { modelCalls } from "./inference/model-calls.js";
import { errorMessage } from "../../lib/errors.js";
import { createMetrics, type DataPlaneMetrics } from "./metrics/index.js";
import { NO_TRACING, startTracing, type TracingOptions } from "./tracing/tracing.js";
import { ModelRegistry, type ModelControlMode } from "./models/registry.js";
import { callInterceptor } from "./server/call-interceptor.js";
import {
  startGrpcServer,
  stopGrpcServer,
  type GrpcTuning,
  type InferenceServiceImplementation,
  type InferRequestDecoders,
} from "./server/grpc.js";
import { serverSecurity, type SecurityOptions } from "./server/security.js";
import { inferRequestDecoder } from "./server/request-decoding.js";
import { closeHttpServer } from "../../lib/http/side-port.js";
import { startMetricsPort } from "./server/metrics-port.js";
import { InFlight } from "./models/in-flight.js";
import { sharedMemoryAndTraceOperations } from "./services/shared-memory-and-trace.js";
import { GrpcHealth } from "./services/grpc-health.js";
import { logSettingsOperation } from "./services/log-settings.js";
import { modelInferStreamHandlers } from "./services/model-infer-stream.js";
import { healthOperations } from "./services/health.js";
import { modelInferHandler } from "./services/model-infer.js";
import { metadataOperations } from "./services/metadata.js";
import { repositoryOperations } from "./services/repository.js";
import { unaryHandlers, type InferenceServiceOperations, type UnaryRpcs } from "./services/unary.js";
import { startFrontDoor, type RunningFrontDoor } from "./http/server.js";
import { modelStreamInferHandler } from "./services/model-stream-infer.js";
import { ModelStorage } from "./storage/model-storage.js";
import type { ObjectStoreOptions } from "../../lib/storage/store.js";
import { SystemSharedMemoryRegistry, type SharedMemoryOptions } from "./shared-memory/regions.js";

/** Where models from object storage are cached and how the stores are reached (MODEL_STORAGE_OPTIONS). */
export interface ModelStorageSettings {
  readonly cacheDir: string;
  /** 0: no bound but the disk. */
  readonly cacheMaxBytes: number;
  /** --model-load-path: where else RepositoryModelLoad's model_path may point. */
  readonly loadPaths: readonly string[];
  /** --model-files: single-file-configured models' version folders, each a folder or an object-storage prefix. */
  readonly modelFiles?: readonly ModelFilesLocation[];
  readonly stores: ObjectStoreOptions;
}

export interface DataPlaneOptions {
  /** Folders and object-storage locations (s3://, gs://, as://), in order. */
  readonly modelRepositories: readonly string[];
  readonly modelStorage: ModelStorageSettings;
  readonly modelConfigFiles: readonly string[];
  /** A Triton (host:port) that serves the models this data plane cannot run (undefined: they fail). */
  readonly forwardUnsupportedTo?: string;
  /** With forwardUnsupportedTo: Python-backend models are forwarded too (--forward-python). */
  readonly forwardPython: boolean;
  /** --grpc-workers, resolved (1: one process): a local sequence model needs 1. */
  readonly grpcWorkers?: number;
  /** How Python-backend models are hosted: the python engine's options (lib/contract/dataplane.ts). */
  readonly pythonEngine: PythonEngineArguments;
  /** Version folders of single-file configs: `<root>/<model>/<version>/` (undefined: none). */
  readonly modelFilesRoot?: string;
  readonly modelControlMode: ModelControlMode;
  readonly loadModels: readonly string[];
  readonly repositoryPollSeconds: number;
  /** How long a model's load (a Python model's initialize) may take; 0: no bound. */
  readonly modelLoadTimeoutSeconds: number;
  /** Triton's auto-complete of configs from model files (on unless --disable-auto-complete-config). */
  readonly autoCompleteConfig: boolean;
  /** What ServerMetadata and GET /v2 report as the server's name (--server-name). */
  readonly serverName: string;
  /** --variant: named in every reply's initial metadata and HTTP headers (a canary's clients tell). */
  readonly variant?: string;
  readonly host: string;
  readonly grpcPort: number;
  /** The HTTP front door's port (KServe v2 REST, generate, OpenAI). */
  readonly httpPort: number;
  /** The HTTP port for probes and /metrics; undefined in a --grpc-workers worker (the primary serves it). */
  readonly metricsPort: number | undefined;
  readonly maxMessageSize: number;
  /** Clients' system shared-memory regions: --allow-client-shm, and the --grpc-workers that refuse them. */
  readonly sharedMemory: SharedMemoryOptions;
  /** ModelStreamInfer requests of one stream running at once (the stream is not read past it). */
  readonly streamMaxPending: number;
  readonly security: SecurityOptions;
  readonly tuning: GrpcTuning;
  /** HTTP/2 flow-control window of the kserve-grpc engine's upstream channels. */
  readonly upstreamFlowControlWindow: number | undefined;
  /** On stop: how long to keep serving while NOT_SERVING spreads to load balancers. */
  readonly drainDelaySeconds: number;
  /** OpenTelemetry tracing of requests; undefined: off. */
  readonly tracing: TracingOptions | undefined;
  readonly shutdownGraceSeconds: number;
  readonly logger: Logger;
  /** Told when LogSettings changes the level (workers pass it on to their siblings). */
  readonly onLogLevelChange?: (level: string) => void;
}

export interface RunningDataPlane {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly metricsPort: number | undefined;
  readonly registry: ModelRegistry;
  readonly metrics: DataPlaneMetrics;
  readonly health: GrpcHealth;
  /** Stops taking new work, drains in-flight calls (up to the grace period), closes engines. */
  stop(): Promise<void>;
}

/** Serves gRPC, the HTTP front door and the metrics port, loads the models, and serves until stopped. */
export async function startDataPlane(options: DataPlaneOptions): Promise<RunningDataPlane> {
  const { logger } = options;
  // Set once the pipeline exists: models that call other models (BLS) reach them through it.
  const modelCallsTo: { inference?: ModelInference } = {};
  // Python models complete their own configs (auto_complete_config) unless they are forwarded.
  const pythonRunsHere = !(options.forwardPython && options.forwardUnsupportedTo !== undefined);
  const completeConfig = async (config: ModelConfig, files: ModelFiles): Promise<ModelConfig> => {
    const completed = await autoCompleteConfig(config, files);
    if (!pythonRunsHere) return completed;
    return completePythonConfig(completed, files, { ...options.pythonEngine, logger });
  };
  const storage = await ModelStorage.open({
    repositories: options.modelRepositories,
    loadPaths: options.modelStorage.loadPaths,
    ...(options.modelStorage.modelFiles !== undefined ? { modelFiles: options.modelStorage.modelFiles } : {}),
    cacheDir: options.modelStorage.cacheDir,
    cacheMaxBytes: options.modelStorage.cacheMaxBytes,
    stores: options.modelStorage.stores,
    logger,
  });
  const registry: ModelRegistry = new ModelRegistry({
    repositories: storage.folders,
    storage,
    configFiles: options.modelConfigFiles,
    ...(options.modelFilesRoot !== undefined ? { modelFilesRoot: options.modelFilesRoot } : {}),
    controlMode: options.modelControlMode,
    startupModels: options.loadModels,
    createEngine: (spec, source, files): Engine =>
      createEngine(spec, source, files, {
        maxMessageSize: options.maxMessageSize,
        upstreamFlowControlWindow: options.upstreamFlowControlWindow,
        pythonEngine: options.pythonEngine,
        logger,
        inference: () => modelCallsTo.inference,
        models: registry,
      }),
    // Asked once its engine is built, so the config names one of the catalog's engines.
    schedules: (spec, source) => ENGINES[engineOf(spec, source)].scheduled,
    grpcWorkers: options.grpcWorkers ?? 1,
    completeConfig: options.autoCompleteConfig ? completeConfig : undefined,
    ...(options.forwardUnsupportedTo !== undefined
      ? {
          forwardUnsupported: {
            runsHere: (config: ModelConfig, source: string) =>
              localSupport(config, source, {
                forwardPython: options.forwardPython,
                grpcWorkers: options.grpcWorkers ?? 1,
              }),
            forward: (config: ModelConfig) => forwardedConfig(config, options.forwardUnsupportedTo!),
          },
        }
      : {}),
    retireGraceMs: options.shutdownGraceSeconds * 1000,
    loadTimeoutMs: options.modelLoadTimeoutSeconds * 1000,
    logger,
  });
  storage.setInUse(() => registry.foldersInUse());
  let stopping = false;
  const startUp = new StartUp();
  startUp.opened(() => storage.close());
  const health = new GrpcHealth(registry, () => stopping);
  startUp.opened(() => health.stop());
  const security = await serverSecurity(options.security, logger);
  startUp.opened(() => security.stop());
  const metrics = createMetrics(registry, options.serverName);
  const active = new InFlight();
  const tracing = options.tracing === undefined ? NO_TRACING : startTracing(options.tracing);
  startUp.opened(() => tracing.shutdown());
  const sharedMemory = new SystemSharedMemoryRegistry(options.sharedMemory);
  startUp.opened(() => sharedMemory.close());
  const inference = {
    registry,
    metrics: metrics.frontend,
    logger,
    active,
    tracing,
    maxMessageSize: options.maxMessageSize,
    sharedMemory,
  };
  modelCallsTo.inference = modelCalls(inference);
  // One implementation of every unary RPC, for the gRPC server and the HTTP front door.
  const operations: InferenceServiceOperations = {
    ...healthOperations(registry, () => stopping),
    ...metadataOperations(registry, options.serverName),
    ...repositoryOperations(registry),
    ...sharedMemoryAndTraceOperations(sharedMemory),
    logSettings: logSettingsOperation(logger, options.onLogLevelChange),
  };
  const implementation: InferenceServiceImplementation = {
    ...unaryHandlers<UnaryRpcs>(operations),
    modelInfer: modelInferHandler(inference),
    modelStreamInfer: modelStreamInferHandler(inference, options.streamMaxPending),
  };
  const grpc = await startUp.step(
    startGrpcServer(implementation, modelInferStreamHandlers(inference), health.implementation, {
      host: options.host,
      port: options.grpcPort,
      maxMessageSize: options.maxMessageSize,
      credentials: security.credentials,
      interceptors: [callInterceptor(metrics.grpc, security.access, options.variant)],
      tuning: options.tuning,
      requestDecoders: passThroughDecoders(registry),
    }),
  );
  startUp.opened(() => grpc.server.forceShutdown());
  const frontDoor = await startUp.step(
    startFrontDoor(
      { inference, operations, live: () => true, ready: () => health.ready(), draining: () => stopping },
      {
        host: options.host,
        port: options.httpPort,
        bodyLimit: options.maxMessageSize,
        tls: security.tls,
        access: security.access,
        metrics: metrics.http,
        logger,
        ...(options.variant !== undefined ? { variant: options.variant } : {}),
      },
    ),
  );
  startUp.opened(() => closeFrontDoor(frontDoor, 0));
  const metricsPort =
    options.metricsPort === undefined
      ? undefined
      : await startUp.step(
          startMetricsPort(options.host, options.metricsPort, {
            live: () => true,
            ready: () => health.ready(),
            metrics: metrics.register,
          }),
        );
  if (metricsPort !== undefined) startUp.opened(() => closeHttpServer(metricsPort.server));
  startUp.opened(() => registry.close());
  // The ports open before the start-up loads: a model whose initialize takes minutes (or hangs
  // until --model-load-timeout-secs) leaves the process live for Kubernetes' liveness probe,
  // and not ready until the loads are done (ModelRegistry.serving). "listening" is logged then.
  await startUp.step(registry.start());
  const poller = schedulePolling(registry, options, logger);
  logger.info(
    {
      grpcPort: grpc.port,
      httpPort: frontDoor.port,
      metricsPort: metricsPort?.port,
      models: registry.readyCount(),
      controlMode: options.modelControlMode,
      tls: options.security.tls === undefined ? "off" : options.security.tls.clientCaFile ? "mutual" : "on",
      auth: options.security.authTokenFile === undefined ? "off" : "bearer",
      modelControlAuth: options.security.modelControlTokenFile === undefined ? "as auth" : "bearer (own tokens)",
      tracing: options.tracing?.endpoint ?? "off",
    },
    options.metricsPort === undefined ? "worker listening" : "data plane listening",
  );
  return {
    grpcPort: grpc.port,
    httpPort: frontDoor.port,
    metricsPort: metricsPort?.port,
    registry,
    metrics,
    health,
    // One drain, however often it is asked for (repeated and group signals).
    stop: startOnce(async () => {
      stopping = true;
      // Readiness goes first; requests keep being served while load balancers and
      // Kubernetes endpoints catch up, then new calls stop and in-flight ones finish.
      health.update();
      if (poller !== undefined) clearInterval(poller);
      logger.info({ drainDelaySeconds: options.drainDelaySeconds }, "draining: readiness is NOT_SERVING");
      await sleep(options.drainDelaySeconds * 1000);
      await shutdown(
        grpc.server,
        frontDoor,
        metricsPort?.server,
        registry,
        storage,
        active,
        options.shutdownGraceSeconds * 1000,
      );
      // After the requests: a region's file closes when its last lease ends.
      sharedMemory.close();
      security.stop();
      await tracing.shutdown();
      health.stop();
      logger.info("data plane stopped");
    }),
  };
}

/**
 * What start-up has opened so far, so that a step that fails (a port in use, an unreadable
 * repository) closes the rest again, last first, before its error goes on. The command line
 * exits on that error anyway; a process that carries on (a --grpc-workers worker, an embedding,
 * a test) must not be left holding ports, engines or timers.
 */
class StartUp {
  private readonly closers: (() => unknown)[] = [];

  /** `close` runs if a later step fails. */
  opened(close: () => unknown): void {
    this.closers.push(close);
  }

  /** Awaits one step; if it fails, closes what the earlier steps opened and rethrows. */
  async step<T>(work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (error) {
      await this.closeAll();
      throw error;
    }
  }

  private async closeAll(): Promise<void> {
    for (const close of this.closers.reverse()) {
      try {
        await close();
      } catch {
        // One that fails to close keeps none of the others open; the start-up error is the news.
      }
    }
  }
}

/**
 * Request deserializers that leave a request encoded when its model passes through on the
 * method (ModelRegistry.passThroughNames): one Set lookup per request.
 */
function passThroughDecoders(registry: ModelRegistry): InferRequestDecoders {
  return {
    unary: inferRequestDecoder(registry.passThroughNames("unary")),
    stream: inferRequestDecoder(registry.passThroughNames("stream")),
  };
}

/** `run`, started by the first call; every call gets the same promise. */
export function startOnce(run: () => Promise<void>): () => Promise<void> {
  let started: Promise<void> | undefined;
  return () => (started ??= run());
}

function schedulePolling(
  registry: ModelRegistry,
  options: DataPlaneOptions,
  logger: Logger,
): NodeJS.Timeout | undefined {
  if (options.modelControlMode !== "poll" || options.repositoryPollSeconds <= 0) return undefined;
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    registry
      .poll()
      .catch((error: unknown) => logger.error({ err: errorMessage(error) }, "model repository poll failed"))
      .finally(() => {
        running = false;
      });
  }, options.repositoryPollSeconds * 1000);
  timer.unref();
  return timer;
}

async function shutdown(
  grpc: GrpcServer,
  frontDoor: RunningFrontDoor,
  metricsServer: HttpServer | undefined,
  registry: ModelRegistry,
  storage: ModelStorage,
  active: InFlight,
  graceMs: number,
): Promise<void> {
  // Both front ends stop taking requests and let theirs finish, within one grace period.
  await Promise.all([stopGrpcServer(grpc, active.idle(), graceMs), closeFrontDoor(frontDoor, graceMs)]);
  // Probes keep getting answers (ready: 503) until the drain is over.
  if (metricsServer !== undefined) await closeHttpServer(metricsServer);
  await registry.close();
  await storage.close();
}

/** Closes the front door: no new requests; those in progress (streams too) get up to the grace period. */
async function closeFrontDoor(frontDoor: RunningFrontDoor, graceMs: number): Promise<void> {
  const timer = setTimeout(() => frontDoor.server.closeAllConnections(), graceMs);
  try {
    await frontDoor.close();
  } finally {
    clearTimeout(timer);
  }
}

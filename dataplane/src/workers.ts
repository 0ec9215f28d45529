import cluster, { type Worker } from "node:cluster";
import type { Logger } from "pino";
import { AggregatorRegistry } from "prom-client";
import { startDataPlane, startOnce, type DataPlaneOptions, type RunningDataPlane } from "./dataplane.js";
import { errorMessage } from "../../lib/errors.js";
import { closeHttpServer } from "../../lib/http/side-port.js";
import { startMetricsPort } from "./server/metrics-port.js";

/**
 * --grpc-workers N: one Node process uses one core, so N worker processes serve gRPC on
 * the same port (the cluster primary hands out connections), the HTTP front door likewise,
 * and the primary serves the metrics port: probes (ready while every worker is) and /metrics summed over the workers.
 * Each worker loads the repository itself; LogSettings reaches them all. Explicit model
 * control is refused: a load or unload RPC would reach one worker only.
 */

/** The environment variable that tells a worker its slot (0..N-1): a replacement gets the dead worker's. */
export const WORKER_SLOT_ENV = "DYNAMO_KSERVE_WORKER_SLOT";

type WorkerMessage =
  | { type: "listening"; grpcPort: number; httpPort: number }
  | { type: "ready"; ready: boolean }
  | { type: "log-level"; level: string };

/** Starts N workers running `startDataPlane` and serves the HTTP port; resolves once all listen. */
export async function startDataPlaneWorkers(
  options: DataPlaneOptions,
  workers: number,
): Promise<{ stop(): Promise<void> }> {
  const { logger } = options;
  if (options.modelControlMode === "explicit") {
    throw new Error(
      "--grpc-workers above 1 needs --model-control-mode none or poll: a load/unload RPC would reach one worker",
    );
  }
  if (options.metricsPort === undefined) throw new Error("the primary needs the metrics port");
  const aggregator = new AggregatorRegistry();
  const ready = new Map<Worker, boolean>();
  let stopping = false;
  let grpcPort = 0;
  let httpPort = 0;

  const fork = (slot: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const worker = cluster.fork({ [WORKER_SLOT_ENV]: String(slot) });
      ready.set(worker, false);
      worker.on("message", (message: WorkerMessage) => {
        if (message.type === "listening") {
          grpcPort = message.grpcPort;
          httpPort = message.httpPort;
          resolve();
        } else if (message.type === "ready") {
          ready.set(worker, message.ready);
        } else if (message.type === "log-level") {
          logger.level = message.level;
          for (const sibling of ready.keys()) if (sibling !== worker) sibling.send(message);
        }
      });
      worker.once("exit", (code, signal) => {
        ready.delete(worker);
        reject(new Error(`worker ${worker.process.pid} exited during start-up (${signal ?? code})`));
        if (stopping) return;
        logger.error({ pid: worker.process.pid, code, signal }, "worker died; starting another");
        fork(slot).catch((error: unknown) =>
          logger.error({ err: errorMessage(error) }, "worker could not be replaced"),
        );
      });
    });

  await Promise.all(Array.from({ length: workers }, (_, slot) => fork(slot)));
  const metricsPort = await startMetricsPort(options.host, options.metricsPort, {
    live: () => true,
    ready: () => !stopping && ready.size === workers && [...ready.values()].every(Boolean),
    metrics: { metrics: () => aggregator.clusterMetrics(), contentType: aggregator.contentType },
  });
  logger.info({ grpcPort, httpPort, metricsPort: metricsPort.port, workers }, "data plane listening");
  return {
    // One drain, however often it is asked for: a signal to the process group reaches
    // the workers too, and they drain on it themselves.
    stop: startOnce(async () => {
      stopping = true;
      const workersNow = [...ready.keys()];
      const exits = workersNow.map(
        (worker) =>
          new Promise<string | undefined>((resolve) => {
            const outcome = (code: number | null, signal: string | null): string | undefined =>
              code === 0 ? undefined : `worker ${worker.process.pid} exited with ${signal ?? code}`;
            if (worker.isDead()) resolve(outcome(worker.process.exitCode, worker.process.signalCode));
            else worker.once("exit", (code, signal) => resolve(outcome(code, signal)));
          }),
      );
      for (const worker of workersNow) worker.process.kill("SIGTERM");
      const failures = (await Promise.all(exits)).filter((failure) => failure !== undefined);
      // Probes are answered (ready: 503) until every worker has drained.
      await closeHttpServer(metricsPort.server);
      if (failures.length > 0) {
        logger.error({ failures }, "data plane stopped, but not every worker drained cleanly");
        throw new Error(failures.join("; "));
      }
      logger.info("data plane stopped");
    }),
  };
}

/** In a worker: serves gRPC (no HTTP port) and keeps the primary informed. */
export async function runDataPlaneWorker(options: DataPlaneOptions, logger: Logger): Promise<RunningDataPlane> {
  const send = (message: WorkerMessage): void => {
    if (process.connected) process.send?.(message);
  };
  process.on("message", (message: WorkerMessage) => {
    if (message.type === "log-level") logger.level = message.level;
  });
  const dataPlane = await startDataPlane({
    ...options,
    metricsPort: undefined,
    onLogLevelChange: (level) => send({ type: "log-level", level }),
  });
  // Constructing one is what makes prom-client answer the primary's metric requests here.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([dataPlane.metrics.register]);
  dataPlane.health.onReadyChange((isReady) => send({ type: "ready", ready: isReady }));
  send({ type: "ready", ready: dataPlane.health.ready() });
  send({ type: "listening", grpcPort: dataPlane.grpcPort, httpPort: dataPlane.httpPort });
  return dataPlane;
}

import type { Server as GrpcServer } from "@grpc/grpc-js";
import type { AddressInfo, Server as NetServer } from "node:net";
import type { Logger } from "pino";
import { BearerTokens } from "../../lib/auth/bearer-tokens.js";
import { closeHttpServer, startSidePort } from "../../lib/http/side-port.js";
import { WatchedFiles } from "../../lib/watched-files.js";
import { GrpcRelay } from "./grpc-relay.js";
import { Holding } from "./holding.js";
import { HttpRelay } from "./http-relay.js";
import { activatorMetrics } from "./metrics.js";
import type { PodWatch } from "./pods.js";
import { serveScaler } from "./scaler.js";
import { followIdentity, followUpstreamCa, type Followed, type Identity, type UpstreamTls } from "./tls.js";

/** The default bound on a gRPC client connection with no stream open (Node's bound on HTTP/1.1 headers). */
const IDLE_SESSION_MS = 60_000;

/** After the shutdown grace, how long the answers to what was still held get to be sent. */
const LAST_REPLIES_MS = 1_000;

/**
 * The default bound on connecting to a pod: a Ready pod whose node died black-holes connections
 * (no refusal ever comes), and the request should go to another pod long before the OS gives up.
 */
const UPSTREAM_CONNECT_TIMEOUT_MS = 5_000;

/** What one activator serves: the model's ports, its bounds, its tokens and its pods. */
export interface ActivatorOptions {
  readonly host: string;
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly metricsPort: number;
  readonly scalerPort: number;
  /** The pods' ports (default: the same numbers as served; tests on one machine give others). */
  readonly upstreamGrpcPort?: number;
  readonly upstreamHttpPort?: number;
  readonly holdTimeoutMs: number;
  readonly maxHeldRequests: number;
  readonly maxConcurrentStreams: number;
  readonly maxHeaderBytes: number;
  readonly authTokenFile?: string;
  /** The serving certificate and key: both ports serve TLS. */
  readonly tlsCertFile?: string;
  readonly tlsKeyFile?: string;
  /** The pods are reached over TLS, trusting this CA, their certificate naming `upstreamServerName` (default: their IP). */
  readonly upstreamCaFile?: string;
  readonly upstreamServerName?: string;
  readonly credentialsReloadMs: number;
  readonly shutdownGraceMs: number;
  /** How long a connection to a pod may take before the pod counts as refusing (default 5 s). */
  readonly upstreamConnectTimeoutMs?: number;
  /** How long a gRPC client connection may have no stream open before it is closed (default 60 s, as Node bounds HTTP/1.1 headers). */
  readonly idleSessionMs?: number;
  readonly pods: PodWatch;
  readonly logger: Logger;
}

export interface Activator {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly metricsPort: number;
  readonly scalerPort: number;
  readonly holding: Holding;
  /**
   * Stops accepting, keeps what is held until relayed or out of time and what is relayed
   * until it ends (at most the shutdown grace), then closes everything.
   */
  stop(): Promise<void>;
}

/**
 * The activator of one model: while no data-plane pod of the model is ready it is the model's
 * Service's endpoint (its /readyz says so), holds requests until a pod is ready and relays them
 * there; KEDA hears at once that something waits (the external-push scaler). Once a pod is
 * ready and nothing is held, its client connections are closed gracefully, so clients reconnect
 * through the Service to the pods.
 */
export async function startActivator(options: ActivatorOptions): Promise<Activator> {
  const { logger, pods } = options;
  const metrics = activatorMetrics();
  const holding = new Holding(pods, options.maxHeldRequests, metrics.events);
  const tokens = await watchTokens(options);
  const { identity, upstreamCa } = await followTls(options);
  // What both relays share; each adds its pods' port.
  const relay = {
    ...(identity === undefined ? {} : { identity: identity.current }),
    upstreamTls: () => upstreamCa?.current,
    holding,
    holdTimeoutMs: options.holdTimeoutMs,
    upstreamConnectTimeoutMs: options.upstreamConnectTimeoutMs ?? UPSTREAM_CONNECT_TIMEOUT_MS,
    maxHeaderBytes: options.maxHeaderBytes,
    tokens: () => tokens.current,
    logger,
  };
  const grpc = new GrpcRelay({
    ...relay,
    upstreamPort: options.upstreamGrpcPort ?? options.grpcPort,
    maxConcurrentStreams: options.maxConcurrentStreams,
    idleSessionMs: options.idleSessionMs ?? IDLE_SESSION_MS,
  });
  const http = new HttpRelay({ ...relay, upstreamPort: options.upstreamHttpPort ?? options.httpPort });
  identity?.onChange((next) => {
    grpc.setIdentity(next);
    http.setIdentity(next);
  });
  upstreamCa?.onChange(() => {
    grpc.reconnectUpstream();
    http.reconnectUpstream();
  });
  let stopping = false;
  const grpcPort = await listen(grpc.server, options.host, options.grpcPort);
  const httpPort = await listen(http.server, options.host, options.httpPort);
  const scaler = await serveScaler(holding, options.host, options.scalerPort);
  const side = await startSidePort(options.host, options.metricsPort, {
    probes: {
      "/readyz": () => !stopping && pods.synced && pods.readyPods().length === 0,
      "/healthz": () => true,
    },
    metrics: metrics.registry,
  });

  const handOverWhenServed = (): void => {
    if (!holding.handedOver) return http.takeBack();
    grpc.handOver();
    http.handOver();
  };
  pods.onChange(handOverWhenServed);
  holding.onSettled(handOverWhenServed);
  pods.onChange(() => logger.info({ readyPods: pods.readyPods().map((pod) => pod.name) }, "ready pods changed"));

  logger.info({ grpcPort, httpPort, metricsPort: side.port, scalerPort: scaler.port }, "activator listening");
  return {
    grpcPort,
    httpPort,
    metricsPort: side.port,
    scalerPort: scaler.port,
    holding,
    async stop() {
      stopping = true;
      holding.stop();
      grpc.stop();
      http.stop();
      const drained = await holding.drained(options.shutdownGraceMs);
      if (!drained) {
        logger.warn({ busy: holding.busy, held: holding.held }, "shutdown grace over; ending what is left");
        // What is still held is answered (UNAVAILABLE / 503, "shutting down") before its connection goes.
        holding.refuseHeld();
        await holding.drained(LAST_REPLIES_MS);
      }
      grpc.destroy();
      http.destroy();
      tokens.stop();
      identity?.stop();
      upstreamCa?.stop();
      await Promise.all([
        shutdownGrpc(scaler.server),
        closeHttpServer(side.server),
        closed(grpc.server),
        closed(http.server),
        pods.stop(),
      ]);
    },
  };
}

/** The serving certificate and the pods' CA, each followed as its files change (undefined: not configured). */
async function followTls(
  options: ActivatorOptions,
): Promise<{ identity: Followed<Identity> | undefined; upstreamCa: Followed<UpstreamTls> | undefined }> {
  const { tlsCertFile: certFile, tlsKeyFile: keyFile, upstreamCaFile } = options;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new Error("--tls-cert-file and --tls-key-file go together: give both or neither");
  }
  if (options.upstreamServerName !== undefined && upstreamCaFile === undefined) {
    throw new Error("--upstream-server-name needs --upstream-ca-file (the pods are reached in plaintext without it)");
  }
  const follow = { intervalMs: options.credentialsReloadMs, logger: options.logger };
  return {
    identity:
      certFile === undefined || keyFile === undefined ? undefined : await followIdentity({ certFile, keyFile }, follow),
    upstreamCa:
      upstreamCaFile === undefined
        ? undefined
        : await followUpstreamCa(upstreamCaFile, options.upstreamServerName, follow),
  };
}

/** The accepted tokens, followed as the file changes (none without --auth-token-file). */
async function watchTokens(
  options: ActivatorOptions,
): Promise<{ readonly current: BearerTokens | undefined; stop(): void }> {
  const file = options.authTokenFile;
  if (file === undefined) return { current: undefined, stop: () => undefined };
  const tokens = new BearerTokens();
  const watched = await WatchedFiles.watch(
    [file],
    { intervalMs: options.credentialsReloadMs, logger: options.logger, what: "auth tokens" },
    ([content]) => tokens.load(content!.toString("utf8"), file),
  );
  return { current: tokens, stop: () => watched.stop() };
}

function listen(server: NetServer, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function closed(server: NetServer): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
  });
}

/** KEDA's open StreamIsActive calls never end by themselves: they are cut (KEDA reconnects). */
async function shutdownGrpc(server: GrpcServer): Promise<void> {
  server.forceShutdown();
}

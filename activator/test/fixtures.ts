import { credentials } from "@grpc/grpc-js";
import { spawn } from "node:child_process";
import type { ClientHttp2Session, ClientHttp2Stream, OutgoingHttpHeaders } from "node:http2";
import { connect } from "node:net";
import { pino } from "pino";
import { GRPCInferenceServiceClient } from "../../proto/gen/ts/grpc_service.js";
import { ExternalScalerClient } from "../../proto/gen/ts/keda/externalscaler.js";
import type { ServerProcess } from "../../dataplane/test/fixtures/server.js";
import { startActivator, type Activator, type ActivatorOptions } from "../src/activator.js";
import { ScriptedPods, type ReadyPod } from "../src/pods.js";

/** An activator on loopback and free ports, its pods scripted by the test, relaying to `upstream`'s ports. */
export interface TestActivator {
  readonly activator: Activator;
  readonly pods: ScriptedPods;
  /** A gRPC client of the model's port on the activator. */
  readonly client: GRPCInferenceServiceClient;
  readonly scaler: ExternalScalerClient;
  stop(): Promise<void>;
}

/** The data plane started by the suite, as the pod the watch reports ready. */
export const POD: ReadyPod = { name: "model-0", ip: "127.0.0.1" };

export async function startTestActivator(
  upstream: ServerProcess | undefined,
  overrides: Partial<ActivatorOptions> = {},
): Promise<TestActivator> {
  const pods = new ScriptedPods();
  pods.set([]);
  const activator = await startActivator({
    host: "127.0.0.1",
    grpcPort: 0,
    httpPort: 0,
    metricsPort: 0,
    scalerPort: 0,
    upstreamGrpcPort: upstream?.grpcPort ?? 1,
    upstreamHttpPort: upstream?.httpPort ?? 1,
    holdTimeoutMs: 60_000,
    maxHeldRequests: 100,
    maxConcurrentStreams: 1000,
    maxHeaderBytes: 64 * 1024,
    credentialsReloadMs: 100,
    shutdownGraceMs: 30_000,
    pods,
    logger: pino({ level: "silent" }),
    ...overrides,
  });
  const client = new GRPCInferenceServiceClient(`127.0.0.1:${activator.grpcPort}`, credentials.createInsecure());
  const scaler = new ExternalScalerClient(`127.0.0.1:${activator.scalerPort}`, credentials.createInsecure());
  return {
    activator,
    pods,
    client,
    scaler,
    async stop() {
      client.close();
      scaler.close();
      await activator.stop();
    },
  };
}

/** Resolves once `check` is true (polled); the tests' way to wait for "the request is held". */
export async function until(check: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Mocha hooks for a suite of activators, one per test: `start` one (it is stopped after the test
 * unless the test stopped it and said so with `stopped`).
 */
export function useActivators(): {
  start(upstream: ServerProcess | undefined, overrides?: Partial<ActivatorOptions>): Promise<TestActivator>;
  stopped(): void;
} {
  let current: TestActivator | undefined;
  afterEach(async () => {
    await current?.stop();
    current = undefined;
  });
  return {
    async start(upstream, overrides = {}) {
      await current?.stop();
      current = await startTestActivator(upstream, overrides);
      return current;
    },
    stopped() {
      current = undefined;
    },
  };
}

/**
 * A pod address that black-holes connections, as one on a dead node does: a listener at
 * `ip`:`port` that never accepts, its one-connection backlog filled, so the next SYN gets no
 * answer at all. Resolves with what removes it.
 */
export async function blackHole(ip: string, port: number): Promise<() => void> {
  const listener = spawn("python3", [
    "-c",
    `import socket, time\ns = socket.socket()\ns.bind(("${ip}", ${port}))\ns.listen(0)\nprint("listening", flush=True)\ntime.sleep(300)`,
  ]);
  await new Promise((resolve, reject) => {
    listener.stdout.once("data", resolve);
    listener.once("error", reject);
    listener.once("exit", (code) => reject(new Error(`the black hole's listener (python3) exited ${code}`)));
  });
  const filler = connect(port, ip);
  filler.on("error", () => undefined);
  await new Promise((resolve) => filler.once("connect", resolve));
  return () => {
    filler.destroy();
    listener.kill();
  };
}

/** Opens a gRPC call of `path` on a raw HTTP/2 `session` (what a hostile or hand-made client sends), `extra` headers added. */
export function rawGrpcCall(
  session: ClientHttp2Session,
  path: string,
  extra: OutgoingHttpHeaders = {},
  options: { endStream?: boolean } = {},
): ClientHttp2Stream {
  const stream = session.request(
    { ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...extra },
    options,
  );
  stream.on("error", () => undefined);
  return stream;
}

import { credentials } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { GRPCInferenceServiceClient, type ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { promptRequest } from "../fixtures/requests.js";
import { mockerConfig, TestRepository } from "../fixtures/repository.js";
import { eventually, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * One drain, whatever the signals: a repeated signal, a different one after the first,
 * SIGHUP, and a signal to the whole process group (Ctrl-C, systemd's default KillMode)
 * with --grpc-workers all let a long stream in flight finish, and the exit code is 0.
 */

/** A streamed simulated LLM of 20 ms per token: 60 tokens take about 1.2 s. */
const LONG_STREAM = mockerConfig("long_stream", { ttftMs: 20, itlMs: 20, decoupled: true });
const TOKENS = 60;

/** Opens a stream of TOKENS tokens on a connection of its own; resolves with the tokens received, or rejects. */
function longStream(grpcPort: number): { tokens: Promise<number>; started: Promise<void> } {
  const client = new GRPCInferenceServiceClient(`127.0.0.1:${grpcPort}`, credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  });
  const stream = client.modelStreamInfer();
  let count = 0;
  let firstToken: () => void = () => undefined;
  const started = new Promise<void>((resolve) => (firstToken = resolve));
  const tokens = new Promise<number>((resolve, reject) => {
    stream.on("data", (reply: ModelStreamInferResponse) => {
      if (reply.errorMessage !== "") reject(new Error(reply.errorMessage));
      if (reply.inferResponse?.outputs.length) count++;
      firstToken();
    });
    stream.on("end", () => resolve(count));
    stream.on("error", (error) => reject(new Error(`after ${count} tokens: ${String(error)}`)));
  }).finally(() => client.close());
  stream.write(promptRequest({ model: "long_stream", maxTokens: TOKENS }));
  stream.end();
  return { tokens, started };
}

/** Whatever of a process group is left after a failed test. */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // the group is gone
  }
}

const pauseMs = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe("signals during a drain (real processes)", function () {
  this.timeout(30_000);
  const repository = new TestRepository({ long_stream: LONG_STREAM });
  after(() => repository.remove());

  /**
   * Starts a data plane, opens a long stream, sends `signals` (to the process, or with
   * `group` to its process group) 200 ms apart, and returns the stream's tokens and the exit code.
   */
  async function drainWith(
    signals: NodeJS.Signals[],
    { args = [], group = false }: { args?: string[]; group?: boolean } = {},
  ): Promise<{ tokens: number; exitCode: number | null; server: ServerProcess }> {
    const server = await startServer(["--model-repository", repository.dir, ...args], {}, { detached: group });
    try {
      const stream = longStream(server.grpcPort);
      await stream.started;
      const exited = new Promise<number | null>((resolve) => server.process.once("exit", (code) => resolve(code)));
      for (const signal of signals) {
        if (group) process.kill(-server.process.pid!, signal);
        else server.process.kill(signal);
        await pauseMs(200);
      }
      const [tokens, exitCode] = await Promise.all([stream.tokens, exited]);
      return { tokens, exitCode, server };
    } finally {
      if (group) killGroup(server.process.pid!);
      await server.stop("SIGKILL");
    }
  }

  it("a second SIGTERM does not cut the drain", async () => {
    const { tokens, exitCode } = await drainWith(["SIGTERM", "SIGTERM"]);
    assert.equal(tokens, TOKENS);
    assert.equal(exitCode, 0);
  });

  it("SIGINT after SIGTERM does not cut the drain", async () => {
    const { tokens, exitCode, server } = await drainWith(["SIGTERM", "SIGINT"]);
    assert.equal(tokens, TOKENS);
    assert.equal(exitCode, 0);
    assert.ok(server.logs.some((entry) => entry["msg"] === "already stopping" && entry["signal"] === "SIGINT"));
  });

  it("SIGHUP drains like SIGTERM", async () => {
    const { tokens, exitCode } = await drainWith(["SIGHUP"]);
    assert.equal(tokens, TOKENS);
    assert.equal(exitCode, 0);
  });

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`${signal} to the process group with --grpc-workers 2: every worker drains, exit 0`, async () => {
      const { tokens, exitCode } = await drainWith([signal], { args: ["--grpc-workers", "2"], group: true });
      assert.equal(tokens, TOKENS);
      assert.equal(exitCode, 0);
    });
  }

  // The handlers used to be installed after the ready line: a SIGTERM sent on it could kill
  // the primary, or a worker before its own handlers, about one start in three on 2 loaded cores.
  it("a SIGTERM sent as soon as it says it is listening drains (--grpc-workers 2, three starts)", async () => {
    for (let start = 0; start < 3; start++) {
      const server = await startServer(["--model-repository", repository.dir, "--grpc-workers", "2"]);
      const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
        server.process.once("exit", (code, signal) => resolve([code, signal])),
      );
      await server.stop("SIGTERM");
      assert.deepEqual(await exited, [0, null], `start ${start}: ${server.stderr}`);
    }
  });

  it("with --drain-delay-secs 0 the health port answers through the drain: ready 503, live 200", async () => {
    const server = await startServer(["--model-repository", repository.dir, "--drain-delay-secs", "0"]);
    try {
      const stream = longStream(server.grpcPort);
      await stream.started;
      server.process.kill("SIGTERM");
      const base = `http://127.0.0.1:${server.metricsPort}`;
      await eventually(async () => assert.equal((await fetch(`${base}/v2/health/ready`)).status, 503), 2000, 20);
      await pauseMs(300);
      assert.equal((await fetch(`${base}/v2/health/ready`)).status, 503);
      assert.equal((await fetch(`${base}/v2/health/live`)).status, 200);
      assert.equal(await stream.tokens, TOKENS);
    } finally {
      await server.stop("SIGKILL");
    }
  });
});

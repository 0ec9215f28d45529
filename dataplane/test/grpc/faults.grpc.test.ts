import { credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import {
  GRPCInferenceServiceClient,
  type InferParameter,
  type ModelInferRequest,
  type ModelStreamInferResponse,
} from "../../../proto/gen/ts/grpc_service.js";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { HealthTestClient } from "../fixtures/health.js";
import { probeLatency, worst } from "../fixtures/latency.js";
import { identityRequest, promptRequest } from "../fixtures/requests.js";
import { mockerConfig, TestRepository } from "../fixtures/repository.js";
import { callError, eventually, inferRequest, startServer, streamAll, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";
import { UNREAD_STREAM } from "../fixtures/paths.js";

/**
 * Defects found by an adversarial run (issue 15), each reproduced here: a request that
 * leaks its accounting, a request that freezes the server, error details too large for a
 * client's trailer limit, uncounted cancellations, and a stream whose pending requests
 * stall everyone else.
 */

/** A unary simulated LLM with no pauses: its whole cost is CPU, per token. */
const CPU_LLM = mockerConfig("cpu_llm", { ttftMs: 0, itlMs: 0 });

/** A unary simulated LLM that answers after two seconds: a call surely in flight. */
const SLOW_UNARY = mockerConfig("slow_unary", { ttftMs: 2000, maxTokens: 1 });

const int32 = (...values: number[]): Uint8Array => new Uint8Array(Int32Array.from(values).buffer);
const uint32 = (...values: number[]): Uint8Array => new Uint8Array(Uint32Array.from(values).buffer);
const int64Parameter = (value: number): InferParameter => ({
  parameterChoice: { $case: "int64Param", value: BigInt(value) },
});

/** repeat_int32 with one value, DELAY before its response and WAIT after it (ms). */
function repeatRequest(delay: number, wait = 0): ModelInferRequest {
  return inferRequest({
    modelName: "repeat_int32",
    inputs: [
      { name: "IN", datatype: "INT32", shape: [1n], parameters: {}, contents: undefined },
      { name: "DELAY", datatype: "UINT32", shape: [1n], parameters: {}, contents: undefined },
      { name: "WAIT", datatype: "UINT32", shape: [1n], parameters: {}, contents: undefined },
    ],
    rawInputContents: [int32(7), uint32(delay), uint32(wait)],
  });
}

/** ModelInfer with call options (deadline) and a handle to cancel it. */
function inferWith(
  client: GRPCInferenceServiceClient,
  request: ModelInferRequest,
  options: { metadata?: Record<string, string> } = {},
): { done: Promise<ServiceError | undefined>; cancel(): void } {
  let cancel = (): void => undefined;
  const metadata = new Metadata();
  for (const [key, value] of Object.entries(options.metadata ?? {})) metadata.set(key, value);
  const done = new Promise<ServiceError | undefined>((resolve) => {
    const call = client.modelInfer(request, metadata, (error) => resolve(error ?? undefined));
    cancel = () => call.cancel();
  });
  return { done, cancel: () => cancel() };
}

const pauseMs = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const metricsOf = (server: ServerProcess) => scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
const utf8Bytes = (text: string): number => Buffer.byteLength(text, "utf8");

describe("defects found under attack (real server over loopback)", function () {
  this.timeout(60_000);

  describe("ModelInfer on a decoupled model", () => {
    it("is UNIMPLEMENTED, counted as an error, leaves nothing in flight, and SIGTERM does not wait the grace", async () => {
      const server = await startServer(["--shutdown-grace-secs", "20"]);
      const health = new HealthTestClient(`127.0.0.1:${server.grpcPort}`);
      const watched = health.watch("");
      try {
        for (let i = 0; i < 3; i++) {
          const error = await callError(server.client, "modelInfer", repeatRequest(0));
          assert.equal(error.code, status.UNIMPLEMENTED);
          assert.match(error.details, /repeat_int32.*decoupled.*ModelStreamInfer/);
        }
        const samples = await metricsOf(server);
        assert.equal(valueOf(samples, "dynamo_frontend_inflight_requests", { model: "repeat_int32" }), 0);
        assert.equal(
          valueOf(samples, "dynamo_frontend_requests_total", {
            model: "repeat_int32",
            endpoint: "ModelInfer",
            status: "error",
          }),
          3,
        );
        await eventually(() => assert.deepEqual(watched.statuses, ["SERVING"]));
        const stopping = Date.now();
        assert.equal(await server.stop("SIGTERM"), 0);
        const took = Date.now() - stopping;
        assert.ok(took < 1000, `SIGTERM with an idle Watch open took ${took} ms (the grace is 20 s)`);
      } finally {
        watched.stream.cancel();
        health.close();
        await server.stop();
      }
    });
  });

  describe("requests that would freeze the server", () => {
    const serving = useServer({ cpu_llm: CPU_LLM });
    let server: ServerProcess;
    before(() => ({ server } = serving));

    it("bounds max_tokens: INVALID_ARGUMENT naming the parameter and the limit", async () => {
      const request = { ...promptRequest({ model: "cpu_llm" }), parameters: { max_tokens: int64Parameter(2_000_000) } };
      const error = await callError(server.client, "modelInfer", request);
      assert.equal(error.code, status.INVALID_ARGUMENT);
      assert.match(error.details, /max_tokens.*1048576/);
    });

    it("keeps serving other clients while a request at the max_tokens bound runs, and stops it on cancel", async () => {
      const probe = probeLatency(server.client);
      await pauseMs(200);
      const big = inferWith(server.client, {
        ...promptRequest({ model: "cpu_llm" }),
        parameters: { max_tokens: int64Parameter(1_048_576) },
      });
      await pauseMs(400);
      big.cancel();
      assert.equal((await big.done)?.code, status.CANCELLED);
      await pauseMs(400);
      const { latencies, failures } = await probe.stop();
      console.log(`      another client's worst latency: ${worst(latencies)} ms over ${latencies.length} calls`);
      assert.deepEqual(failures, []);
      assert.ok(worst(latencies) < 250, `another client waited up to ${worst(latencies)} ms`);
    });

    it("waits DELAY values past 2^31 ms as long as asked (no timer overflow): the deadline comes first", async () => {
      const stream = server.client.modelStreamInfer(new Metadata(), { deadline: Date.now() + 600 });
      const replies: ModelStreamInferResponse[] = [];
      stream.on("data", (reply: ModelStreamInferResponse) => replies.push(reply));
      const ended = new Promise<ServiceError | undefined>((resolve) => {
        stream.on("error", (error: ServiceError) => resolve(error));
        stream.on("end", () => resolve(undefined));
      });
      stream.write(repeatRequest(2 ** 31 + 5));
      stream.write(repeatRequest(0, 2 ** 32 - 1));
      stream.end();
      const error = await ended;
      assert.equal(error?.code, status.DEADLINE_EXCEEDED);
      // The second request's one response comes at once; its WAIT, like the first's DELAY, outlasts the deadline.
      assert.equal(replies.length, 1);
    });
  });

  describe("error details echo client strings", () => {
    const serving = useServer();
    let server: ServerProcess;
    before(() => ({ server } = serving));
    const LIMIT = 2048;

    it("a 20,000-character model name: NOT_FOUND with the detail cut to a bounded size, marked", async () => {
      const error = await callError(server.client, "modelInfer", identityRequest({ model: "m".repeat(20_000) }));
      assert.equal(error.code, status.NOT_FOUND);
      assert.ok(utf8Bytes(error.details) <= LIMIT, `${utf8Bytes(error.details)} bytes`);
      assert.match(error.details, /^Request for unknown model: 'mmm.*…\[\d+ bytes cut\]….*mmm' is not found$/);
    });

    it("a 3,000-character non-ASCII model name stays within the bound in UTF-8 bytes", async () => {
      const error = await callError(server.client, "modelMetadata", { name: "é".repeat(3000), version: "" });
      assert.equal(error.code, status.NOT_FOUND);
      assert.ok(utf8Bytes(error.details) <= LIMIT, `${utf8Bytes(error.details)} bytes`);
    });

    it("a 10,000-dimension shape and a 20,000-character tensor name: INVALID_ARGUMENT, bounded", async () => {
      const request = identityRequest();
      const manyDims = {
        ...request,
        inputs: [{ ...request.inputs[0]!, shape: Array.from({ length: 10_000 }, () => 1n) }],
      };
      const longName = { ...request, inputs: [{ ...request.inputs[0]!, name: "t".repeat(20_000) }] };
      for (const bad of [manyDims, longName]) {
        const error = await callError(server.client, "modelInfer", bad);
        assert.equal(error.code, status.INVALID_ARGUMENT);
        assert.ok(utf8Bytes(error.details) <= LIMIT, `${utf8Bytes(error.details)} bytes`);
      }
    });

    it("a stream's error_message is bounded the same way", async () => {
      const [reply] = await streamAll(server.client, [identityRequest({ model: "x".repeat(20_000) })]);
      assert.match(reply!.errorMessage, /is not found$/);
      assert.ok(utf8Bytes(reply!.errorMessage) <= LIMIT);
    });
  });

  describe("the default message size", () => {
    const serving = useServer();
    let server: ServerProcess;
    before(() => ({ server } = serving));

    it("a gzip request that inflates past 64 MiB is RESOURCE_EXHAUSTED (grpc-js stops inflating at the limit)", async () => {
      const gzip = new GRPCInferenceServiceClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure(), {
        "grpc.default_compression_algorithm": 2,
      });
      try {
        const width = (80 * 1024 * 1024) / 4;
        const error = await callError(gzip, "modelInfer", identityRequest({ width }));
        assert.equal(error.code, status.RESOURCE_EXHAUSTED);
        assert.match(error.details, /decompresses to a size larger than 67108864/);
      } finally {
        gzip.close();
      }
    });
  });

  describe("cancelled and deadline-exceeded calls in grpc_server_handled_total", () => {
    const serving = useServer({ slow_unary: SLOW_UNARY });
    let server: ServerProcess;
    before(() => ({ server } = serving));

    it("counts every started call as handled, with CANCELLED or DEADLINE_EXCEEDED", async () => {
      const cancelled = inferWith(server.client, promptRequest({ model: "slow_unary" }));
      // The deadline travels only as the grpc-timeout header, so the server enforces it. A
      // client that enforces its own deadline cancels the stream when it passes, and that
      // cancel races the server's timer (the server's deadline is later by the header's trip):
      // counted as whichever comes first, which a test cannot pin.
      const expired = inferWith(server.client, promptRequest({ model: "slow_unary" }), {
        metadata: { "grpc-timeout": "200m" },
      });
      const stream = server.client.modelStreamInfer();
      stream.on("data", () => undefined);
      stream.on("error", () => undefined);
      stream.write(promptRequest({ model: "slow_unary" }));
      await pauseMs(100);
      cancelled.cancel();
      stream.cancel();
      assert.equal((await cancelled.done)?.code, status.CANCELLED);
      assert.equal((await expired.done)?.code, status.DEADLINE_EXCEEDED);
      const labels = (method: string, code: string) => ({
        grpc_service: "inference.GRPCInferenceService",
        grpc_method: method,
        grpc_code: code,
      });
      await eventually(async () => {
        const samples = await metricsOf(server);
        assert.equal(valueOf(samples, "grpc_server_handled_total", labels("ModelInfer", "CANCELLED")), 1);
        assert.equal(valueOf(samples, "grpc_server_handled_total", labels("ModelInfer", "DEADLINE_EXCEEDED")), 1);
        assert.equal(valueOf(samples, "grpc_server_handled_total", labels("ModelStreamInfer", "CANCELLED")), 1);
        for (const method of ["ModelInfer", "ModelStreamInfer"]) {
          const handled = samples
            .filter((sample) => sample.name === "grpc_server_handled_total" && sample.labels["grpc_method"] === method)
            .reduce((sum, sample) => sum + sample.value, 0);
          const started = valueOf(samples, "grpc_server_started_total", { grpc_method: method });
          assert.equal(handled, started, `${method}: started ${started}, handled ${handled}`);
        }
      }, 5000);
    });
  });

  describe("a stream with many pending requests and a client that does not read", () => {
    let server: ServerProcess;
    let repository: TestRepository;
    before(async () => {
      repository = new TestRepository();
      server = await startServer(["--model-repository", repository.dir, "--stream-max-pending", "64"]);
    });
    after(async () => {
      await server?.stop();
      repository?.remove();
    });

    it("stops reading at the cap (back-pressure), and other clients are not stalled, before or after its cancel", async () => {
      // The client that does not read runs in a process (and on a connection) of its own: its
      // 20,000 writes keep that process's event loop busy, which must not count as the
      // server stalling this test's probe.
      const writer = spawn(process.execPath, [UNREAD_STREAM, `127.0.0.1:${server.grpcPort}`, "20000"], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      await new Promise<void>((resolve, reject) => {
        writer.stdout!.once("data", () => resolve());
        writer.once("exit", (code) => reject(new Error(`the unread-stream client exited ${code}`)));
      });
      const probe = probeLatency(server.client);
      await pauseMs(1500);
      const samples = await metricsOf(server);
      const inflight = valueOf(samples, "dynamo_frontend_inflight_requests", { model: "identity_fp32" });
      assert.ok(inflight <= 64 + 1, `${inflight} requests in flight (cap 64, plus the probe's)`);
      // Its connection closes: the server sees the stream cancelled.
      writer.kill("SIGKILL");
      await pauseMs(1000);
      await eventually(async () =>
        assert.equal(
          valueOf(await metricsOf(server), "dynamo_frontend_inflight_requests", { model: "identity_fp32" }),
          0,
        ),
      );
      const { latencies, failures } = await probe.stop();
      console.log(`      another client's worst latency: ${worst(latencies)} ms over ${latencies.length} calls`);
      assert.deepEqual(failures, []);
      assert.ok(worst(latencies) < 300, `another client waited up to ${worst(latencies)} ms`);
    });
  });
});

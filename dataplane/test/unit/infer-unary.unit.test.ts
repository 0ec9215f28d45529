import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { pino } from "pino";
import { GRPCInferenceServiceClient, type ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { credentials } from "@grpc/grpc-js";
import { parsedDataPlaneArguments } from "../../../cli/dataplane.js";
import { abortedError } from "../../../lib/errors.js";
import type { EngineRequest, EngineResponse, InferOptions } from "../../src/engines/engine.js";
import { KserveGrpcEngine } from "../../src/engines/kserve-grpc/kserve-grpc.js";
import { startDataPlane, type RunningDataPlane } from "../../src/dataplane.js";
import { dataPlaneOptions } from "../../src/main.js";
import { TestRepository } from "../fixtures/repository.js";
import { eventually, inferRequest } from "../fixtures/server.js";

/**
 * ModelInfer's one-reply path (pipeline.ts inferUnary) against a double of an engine's
 * `infer`: a model that makes no response or two fails INTERNAL naming it, a scheduled model
 * takes the generator's path, a cancel and a deadline mid-inference end the engine's work,
 * and the statistics of a load through inferUnary equal those of the same load through the
 * generator's path (KServe REST's infer route).
 */

const TENSORS = `
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
`;
const checked = (name: string, extra = ""): string => `
name: "${name}"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "127.0.0.1:9" } }
${TENSORS}
${extra}
`;

/** The engine's signal of each request that reached the double, by id. */
const signals = new Map<string, AbortSignal>();

/** Answers by the request's id: "none" (no response), "two" (two), "hang" (until aborted), "fail", else one. */
async function* doubleInfer(request: EngineRequest, options: InferOptions): AsyncIterable<EngineResponse> {
  signals.set(request.id, options.signal);
  const out: EngineResponse = {
    outputs: [{ name: "OUT", datatype: "INT32", shape: request.inputs[0]!.shape, data: request.inputs[0]!.data }],
  };
  if (request.id === "none") return;
  if (request.id === "hang") {
    await new Promise((_resolve, reject) =>
      options.signal.addEventListener("abort", () => reject(abortedError(options.signal)), { once: true }),
    );
  }
  if (request.id === "fail") throw new Error("the engine broke");
  yield out;
  if (request.id === "two") yield out;
}

const request = (modelName: string, id: string): ModelInferRequest =>
  inferRequest({
    modelName,
    id,
    // The scheduled model batches: its first dimension is the batch.
    inputs: [
      {
        name: "IN",
        datatype: "INT32",
        shape: modelName === "scheduled" ? [1n, 1n] : [1n],
        parameters: {},
        contents: undefined,
      },
    ],
    rawInputContents: [new Uint8Array(Int32Array.of(7).buffer)],
  });

describe("ModelInfer's one-reply path (inferUnary) against a double of the engine's infer", function () {
  this.timeout(30_000);
  const replaced = ["infer", "ready"] as const;
  const originals = replaced.map((name) => Object.getOwnPropertyDescriptor(KserveGrpcEngine.prototype, name));
  let repository: TestRepository;
  let dataPlane: RunningDataPlane;
  let client: GRPCInferenceServiceClient;
  before(async () => {
    Object.defineProperty(KserveGrpcEngine.prototype, "infer", { value: doubleInfer, configurable: true });
    Object.defineProperty(KserveGrpcEngine.prototype, "ready", { value: () => true, configurable: true });
    repository = new TestRepository({
      plain: checked("plain"),
      // Served only by the statistics test: the same load on each, over gRPC and over REST.
      counted: checked("counted"),
      over_rest: checked("over_rest"),
      scheduled: checked("scheduled", "max_batch_size: 4\ndynamic_batching { }"),
    });
    const ports = ["--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"];
    const parsed = await parsedDataPlaneArguments([...ports, "--model-repository", repository.dir]);
    dataPlane = await startDataPlane({ ...dataPlaneOptions(parsed, pino({ level: "silent" })), drainDelaySeconds: 0 });
    client = new GRPCInferenceServiceClient(`127.0.0.1:${dataPlane.grpcPort}`, credentials.createInsecure());
  });
  after(async () => {
    client?.close();
    await dataPlane?.stop();
    repository?.remove();
    replaced.forEach((name, index) => Object.defineProperty(KserveGrpcEngine.prototype, name, originals[index]!));
  });

  const infer = (
    sent: ModelInferRequest,
    options: { deadline?: number; cancelAfterMs?: number } = {},
  ): Promise<{ error: ServiceError | null; outputs: number }> =>
    new Promise((resolve) => {
      const call = client.modelInfer(
        sent,
        new Metadata(),
        options.deadline === undefined ? {} : options,
        (error, reply) => resolve({ error, outputs: reply?.outputs.length ?? 0 }),
      );
      if (options.cancelAfterMs !== undefined) setTimeout(() => call.cancel(), options.cancelAfterMs);
    });

  const counts = (model: string) => {
    const proto = dataPlane.registry.statistics(model, "1")[0]!.statistics.toProto("", "");
    const stats = proto.inferenceStats!;
    return {
      success: Number(stats.success!.count),
      fail: Number(stats.fail!.count),
      queue: Number(stats.queue!.count),
      computeInfer: Number(stats.computeInfer!.count),
      inferenceCount: Number(proto.inferenceCount),
      executionCount: Number(proto.executionCount),
      durations: [
        stats.success!.ns,
        stats.fail!.ns,
        stats.queue!.ns,
        stats.computeInput!.ns,
        stats.computeInfer!.ns,
        stats.computeOutput!.ns,
      ].map(Number),
    };
  };

  it("a model that makes no response, or two, fails INTERNAL naming it", async () => {
    for (const model of ["plain", "scheduled"]) {
      const none = await infer(request(model, "none"));
      assert.equal(none.error?.code, status.INTERNAL, model);
      assert.equal(none.error?.details, `model '${model}' produced no response`);
      const two = await infer(request(model, "two"));
      assert.equal(two.error?.code, status.INTERNAL, model);
      assert.equal(two.error?.details, `model '${model}' produced more than one response for a unary request`);
    }
  });

  it("answers one response, on the plain path and on a scheduled model's (the generator's)", async () => {
    for (const model of ["plain", "scheduled"])
      assert.deepEqual(await infer(request(model, "one")), { error: null, outputs: 1 });
  });

  it("a cancel or a deadline mid-inference aborts the engine's signal and counts a failure", async () => {
    for (const model of ["plain", "scheduled"]) {
      signals.clear();
      const before = counts(model);
      const cancelled = await infer(request(model, "hang"), { cancelAfterMs: 100 });
      assert.equal(cancelled.error?.code, status.CANCELLED, model);
      await eventually(() => assert.equal(signals.get("hang")?.aborted, true, model));
      const late = await infer(request(model, "hang"), { deadline: Date.now() + 200 });
      assert.equal(late.error?.code, status.DEADLINE_EXCEEDED, model);
      await eventually(() => assert.equal(counts(model).fail - before.fail, 2, model));
      assert.equal(counts(model).success, before.success, model);
    }
  });

  it("counts the same statistics as the generator's path for the same load, no duration negative", async () => {
    const load = ["one", "one", "one", "fail", "none", "two"];
    for (const id of load) await infer(request("counted", id));
    for (const id of load) {
      await fetch(`http://127.0.0.1:${dataPlane.httpPort}/v2/models/over_rest/infer`, {
        method: "POST",
        body: JSON.stringify({ id, inputs: [{ name: "IN", shape: [1], datatype: "INT32", data: [7] }] }),
      }).then((response) => response.arrayBuffer());
    }
    const unary = counts("counted");
    const generator = counts("over_rest");
    const { durations: unaryDurations, ...unaryCounts } = unary;
    const { durations: generatorDurations, ...generatorCounts } = generator;
    assert.deepEqual(unaryCounts, generatorCounts);
    for (const ns of [...unaryDurations, ...generatorDurations]) assert.ok(ns >= 0, `duration ${ns}`);
    assert.deepEqual(unaryCounts.success, 3);
  });
});

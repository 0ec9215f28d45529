import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import type {
  ModelInferRequest,
  ModelInferResponse,
  ModelStreamInferResponse,
} from "../../../proto/gen/ts/grpc_service.js";
import {
  ENSEMBLE_FAILING,
  ENSEMBLE_PYTHON,
  ensemblePythonOutputs,
  ensembleRepository,
  ensembleStep,
} from "../fixtures/ensembles.js";
import { EXAMPLES } from "../fixtures/paths.js";
import { MODELS_PYTHON, requireTritonPeers } from "../fixtures/peers.js";
import { bytesRequest, oneInput, PYTHON_MODELS } from "../fixtures/python-models.js";
import { addSubRequest } from "../fixtures/requests.js";
import {
  call,
  callError,
  infer,
  inferRequest,
  eventually,
  startServer,
  streamAll,
  type ServerProcess,
} from "../fixtures/server.js";

/**
 * Ensembles run natively: identity, Python and ONNX steps, parallel branches, a failing step,
 * a missing step model, a decoupled step streaming, and the step models' statistics.
 */

/** Passes OUT and IDX (repeat_int32's outputs) through, one element each. */
const PASS_INT = `name: "pass_int"
backend: "identity"
input [ { name: "V" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "I" data_type: TYPE_UINT32 dims: [ 1 ] } ]
output [ { name: "V_OUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "I_OUT" data_type: TYPE_UINT32 dims: [ 1 ] } ]
`;

/** repeat_int32 (decoupled, Python) then pass_int (identity) on each of its responses; not marked decoupled: Triton infers it. */
const ENSEMBLE_STREAM = `name: "ensemble_stream"
platform: "ensemble"
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "VALUE" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "INDEX" data_type: TYPE_UINT32 dims: [ 1 ] } ]
ensemble_scheduling {
  step [
${ensembleStep(
  "repeat_int32",
  [["IN", "IN"]],
  [
    ["OUT", "R_OUT"],
    ["IDX", "R_IDX"],
  ],
)},
${ensembleStep(
  "pass_int",
  [
    ["V", "R_OUT"],
    ["I", "R_IDX"],
  ],
  [
    ["V_OUT", "VALUE"],
    ["I_OUT", "INDEX"],
  ],
)}
  ]
}
`;

/** ENSEMBLE_STREAM with each step one call at a time over all requests (Triton's max_inflight_requests). */
const ENSEMBLE_STREAM_LIMITED = ENSEMBLE_STREAM.replace(
  'name: "ensemble_stream"',
  'name: "ensemble_stream_limited"',
).replace("ensemble_scheduling {", "ensemble_scheduling {\n  max_inflight_requests: 1");

/** slow_cancellable (Python) as a step: it runs SECONDS unless its request is cancelled. */
const ENSEMBLE_SLOW = `name: "ensemble_slow"
platform: "ensemble"
input [ { name: "SECONDS" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "CANCELLED" data_type: TYPE_BOOL dims: [ 1 ] } ]
ensemble_scheduling { step [
${ensembleStep("slow_cancellable", [["SECONDS", "SECONDS"]], [["CANCELLED", "CANCELLED"]])}
] }
`;

const ENSEMBLE_MISSING = ENSEMBLE_FAILING.replace("ensemble_failing", "ensemble_missing").replace(
  'model_name: "raises_error"',
  'model_name: "not_in_any_repository"',
);

/** add_sub takes FP32; this ensemble declares its inputs INT32. */
const ENSEMBLE_MISMATCH = ENSEMBLE_PYTHON.replace('name: "ensemble_python"', 'name: "ensemble_mismatch"').replace(
  '{ name: "B" data_type: TYPE_FP32',
  '{ name: "B" data_type: TYPE_INT32',
);

const floats = (response: ModelInferResponse, name: string): number[] => {
  const index = response.outputs.findIndex((output) => output.name === name);
  assert.notEqual(index, -1, `no output ${name}`);
  const raw = response.rawOutputContents[index]!;
  return [...new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength))];
};

function pythonRequest(a: number[], b: number[], outputs: string[] = []): ModelInferRequest {
  const input = (name: string) => ({ name, datatype: "FP32", shape: [4n], parameters: {}, contents: undefined });
  return inferRequest({
    modelName: "ensemble_python",
    inputs: [input("A"), input("B")],
    outputs: outputs.map((name) => ({ name, parameters: {} })),
    rawInputContents: [new Uint8Array(Float32Array.from(a).buffer), new Uint8Array(Float32Array.from(b).buffer)],
  });
}

async function inferenceCount(server: ServerProcess, model: string): Promise<bigint> {
  const { modelStats } = await call(server.client, "modelStatistics", { name: model, version: "" });
  return modelStats[0]!.inferenceCount;
}

describe("ensembles run natively (platform: ensemble)", function () {
  this.timeout(120_000);
  let server: ServerProcess;
  let repository: string;

  before(async function () {
    requireTritonPeers(this);
    repository = ensembleRepository({
      ensemble_python: ENSEMBLE_PYTHON,
      ensemble_stream: ENSEMBLE_STREAM,
      pass_int: PASS_INT,
      ensemble_failing: ENSEMBLE_FAILING,
      ensemble_missing: ENSEMBLE_MISSING,
      ensemble_mismatch: ENSEMBLE_MISMATCH,
      ensemble_slow: ENSEMBLE_SLOW,
      ensemble_stream_limited: ENSEMBLE_STREAM_LIMITED,
    });
    server = await startServer([
      ...["--model-repository", repository],
      ...["--model-repository", PYTHON_MODELS],
      ...["--model-repository", EXAMPLES],
      ...["--python", MODELS_PYTHON],
    ]);
  });
  after(async () => {
    await server?.stop();
    if (repository !== undefined) rmSync(repository, { recursive: true, force: true });
  });

  it("runs parallel branches of Python steps and answers what the graph computes", async () => {
    const a = [1, 2, 3, 4];
    const b = [10, 20, 30, 40];
    const response = await infer(server.client, pythonRequest(a, b));
    assert.equal(response.modelName, "ensemble_python");
    const expected = ensemblePythonOutputs(a, b);
    for (const name of ["OUT0", "OUT1", "DIFF"]) assert.deepEqual(floats(response, name), expected[name], name);
  });

  it("answers only the outputs asked for", async () => {
    const response = await infer(server.client, pythonRequest([1, 1, 1, 1], [2, 2, 2, 2], ["DIFF"]));
    assert.deepEqual(
      response.outputs.map((output) => output.name),
      ["DIFF"],
    );
    assert.deepEqual(floats(response, "DIFF"), [-1, -1, -1, -1]);
  });

  it("runs the bundled example (two ONNX steps), batched", async () => {
    const response = await infer(server.client, addSubRequest("ensemble_add_sub", [2n, 4n]));
    // INPUT0 = 0..7, INPUT1 = ones: OUTPUT0 = 2 * INPUT0, OUTPUT1 = 2 * INPUT1.
    assert.deepEqual(floats(response, "OUTPUT0"), [0, 2, 4, 6, 8, 10, 12, 14]);
    assert.deepEqual(floats(response, "OUTPUT1"), Array(8).fill(2));
  });

  it("counts each step's call in its model's statistics", async () => {
    const [pythonBefore, onnxBefore] = await Promise.all([
      inferenceCount(server, "add_sub"),
      inferenceCount(server, "add_sub_onnx"),
    ]);
    await Promise.all([1, 2, 3].map(() => infer(server.client, pythonRequest([0, 0, 0, 0], [1, 1, 1, 1]))));
    await infer(server.client, addSubRequest("ensemble_add_sub", [1n, 4n]));
    assert.equal((await inferenceCount(server, "add_sub")) - pythonBefore, 9n, "three add_sub steps per request");
    assert.equal((await inferenceCount(server, "add_sub_onnx")) - onnxBefore, 2n, "two add_sub_onnx steps");
    assert.ok((await inferenceCount(server, "ensemble_python")) >= 3n);
  });

  it("fails a request whose step fails, naming the step and model, with the step's code", async () => {
    const error = await callError(server.client, "modelInfer", bytesRequest("ensemble_failing", "MODE", "unsupported"));
    const direct = await callError(server.client, "modelInfer", bytesRequest("raises_error", "MODE", "unsupported"));
    assert.equal(error.code, direct.code);
    assert.notEqual(error.code, status.OK);
    assert.match(
      error.details,
      /^ensemble 'ensemble_failing' step 0 \(model 'raises_error'\): .*MODE asked for an unsupported error/,
    );
  });

  it("hands the request's deadline to its steps: a step past it is cancelled", async () => {
    const request = oneInput(
      "ensemble_slow",
      "SECONDS",
      "FP32",
      new Uint8Array(new Float32Array([30]).buffer),
      "slow-e",
    );
    const started = Date.now();
    const error = await new Promise<ServiceError>((resolve, reject) =>
      server.client.modelInfer(request, new Metadata(), { deadline: Date.now() + 500 }, (failed) =>
        failed ? resolve(failed) : reject(new Error("the request succeeded")),
      ),
    );
    assert.equal(error.code, status.DEADLINE_EXCEEDED);
    assert.ok(Date.now() - started < 10_000);
    await eventually(() => {
      const seen = server.logs.some((line) => line["msg"] === "slow_cancellable: request 'slow-e' cancelled=True");
      assert.ok(seen, "the step model saw the cancellation");
    }, 10_000);
  });

  it("keeps an ensemble whose step model is missing UNAVAILABLE, saying which", async () => {
    const { models } = await call(server.client, "repositoryIndex", { repositoryName: "", ready: false });
    const entry = models.find((model) => model.name === "ensemble_missing");
    assert.equal(entry?.state, "UNAVAILABLE");
    assert.match(entry.reason, /step 0: model 'not_in_any_repository' is not loaded/);
    const error = await callError(server.client, "modelInfer", bytesRequest("ensemble_missing", "MODE", "x"));
    assert.equal(error.code, status.UNAVAILABLE);
    assert.match(error.details, /step 0: model 'not_in_any_repository' is not loaded/);
  });

  it("keeps an ensemble whose tensor types disagree with its step's UNAVAILABLE, naming step, tensor and types", async () => {
    const { models } = await call(server.client, "repositoryIndex", { repositoryName: "", ready: false });
    const entry = models.find((model) => model.name === "ensemble_mismatch");
    assert.equal(entry?.state, "UNAVAILABLE");
    assert.match(entry.reason, /step 0 \(model 'add_sub'\): input 'INPUT1' is FP32 but ensemble tensor 'B' is INT32/);
  });

  it("streams each response of a decoupled step through the steps after it", async () => {
    const replies = await streamAll(server.client, [streamRequest("ensemble_stream", "s", [7, 8, 9])]);
    assert.deepEqual(streamedPairs(replies).get("s"), [
      [0, 7],
      [1, 8],
      [2, 9],
    ]);
    const config = await call(server.client, "modelConfig", { name: "ensemble_stream", version: "" });
    assert.equal(config.config?.modelTransactionPolicy?.decoupled, true, "marked decoupled, as Triton marks it");
  });

  it("with max_inflight_requests, holds a decoupled step's responses for room downstream and loses none", async () => {
    const replies = await streamAll(server.client, [
      streamRequest("ensemble_stream_limited", "first", [1, 2, 3, 4, 5]),
      streamRequest("ensemble_stream_limited", "second", [11, 12, 13, 14, 15]),
    ]);
    const pairs = streamedPairs(replies);
    assert.deepEqual(
      pairs.get("first"),
      [1, 2, 3, 4, 5].map((value, index) => [index, value]),
    );
    assert.deepEqual(
      pairs.get("second"),
      [11, 12, 13, 14, 15].map((value, index) => [index, value]),
    );
  });
});

function streamRequest(model: string, id: string, values: number[]): ModelInferRequest {
  return inferRequest({
    modelName: model,
    id,
    inputs: [{ name: "IN", datatype: "INT32", shape: [BigInt(values.length)], parameters: {}, contents: undefined }],
    rawInputContents: [new Uint8Array(Int32Array.from(values).buffer)],
  });
}

/** The streamed [INDEX, VALUE] pairs, by request id, in INDEX order (the flows may finish in any order). */
function streamedPairs(replies: readonly ModelStreamInferResponse[]): Map<string, number[][]> {
  const byId = new Map<string, number[][]>();
  for (const { errorMessage, inferResponse } of replies) {
    assert.equal(errorMessage, "");
    const raw = (name: string) => {
      const index = inferResponse!.outputs.findIndex((output) => output.name === name);
      return Buffer.from(inferResponse!.rawOutputContents[index]!);
    };
    const pairs = byId.get(inferResponse!.id) ?? [];
    pairs.push([raw("INDEX").readUInt32LE(0), raw("VALUE").readInt32LE(0)]);
    byId.set(inferResponse!.id, pairs);
  }
  for (const pairs of byId.values()) pairs.sort((x, y) => x[0]! - y[0]!);
  return byId;
}

describe("ensembles under explicit model control", function () {
  this.timeout(120_000);
  let server: ServerProcess;
  let repository: string;

  before(async function () {
    requireTritonPeers(this);
    repository = ensembleRepository({ ensemble_python: ENSEMBLE_PYTHON });
    server = await startServer([
      ...["--model-repository", repository],
      ...["--model-repository", PYTHON_MODELS],
      ...["--python", MODELS_PYTHON],
      ...["--model-control-mode", "explicit"],
    ]);
  });
  after(async () => {
    await server?.stop();
    if (repository !== undefined) rmSync(repository, { recursive: true, force: true });
  });

  it("loads an ensemble's step models with it, as Triton does", async () => {
    const ready = async (name: string) => (await call(server.client, "modelReady", { name, version: "" })).ready;
    assert.equal(await ready("add_sub"), false);
    await call(server.client, "repositoryModelLoad", {
      repositoryName: "",
      modelName: "ensemble_python",
      parameters: {},
    });
    assert.equal(await ready("ensemble_python"), true);
    assert.equal(await ready("add_sub"), true);
    const response = await infer(server.client, pythonRequest([1, 2, 3, 4], [0, 0, 0, 0]));
    assert.deepEqual(floats(response, "OUT0"), [3, 6, 9, 12]);
  });
});

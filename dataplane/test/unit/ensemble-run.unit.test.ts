import assert from "node:assert/strict";
import type { EnsembleSettings, EnsembleStep } from "../../../lib/engines/ensemble.js";
import { DataPlaneError } from "../../../lib/errors.js";
import type { ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { EngineRequest, ModelInference } from "../../src/engines/engine.js";
import { Limiter } from "../../src/engines/ensemble/limiter.js";
import { EnsembleRun } from "../../src/engines/ensemble/run.js";

/** Lets every settled promise's callbacks run. */
const settle = async (): Promise<void> => {
  for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
};

const int32 = (name: string) => ({ name, datatype: "INT32" as const, dims: [1], optional: false });

function step(index: number, modelName: string, input: [string, string], output: [string, string]): EnsembleStep {
  return { index, modelName, modelVersion: "", inputMap: new Map([input]), outputMap: new Map([output]) };
}

/** stream (decoupled: IN -> R, one response after another) then pass (R -> OUT). */
const SETTINGS = {
  name: "streaming",
  maxBatchSize: 0,
  decoupled: true,
  inputs: [int32("IN")],
  outputs: [int32("OUT")],
  steps: [step(0, "stream", ["X", "IN"], ["Y", "R"]), step(1, "pass", ["X", "R"], ["Y", "OUT"])],
  order: [0, 1],
  producer: new Map([
    ["R", 0],
    ["OUT", 1],
  ]),
  maxInflightRequests: 1,
} as unknown as EnsembleSettings;

function response(request: ModelInferRequest, value: number): ModelInferResponse {
  return {
    modelName: request.modelName,
    modelVersion: "1",
    id: request.id,
    parameters: {},
    outputs: [{ name: "Y", datatype: "INT32", shape: [1n], parameters: {}, contents: undefined }],
    rawOutputContents: [new Uint8Array(Int32Array.of(value).buffer)],
  };
}

const REQUEST: EngineRequest = {
  id: "r",
  version: "1",
  parameters: {},
  inputs: [{ name: "IN", datatype: "INT32", shape: [1], data: new Uint8Array(4) }],
  requestedOutputs: new Set(),
};

describe("an ensemble request's run", () => {
  it("ends a decoupled step's call when its caller stops reading, freeing its max_inflight_requests place", async () => {
    let streaming = 0;
    const inference: ModelInference = async function* (request) {
      if (request.modelName === "pass") {
        yield response(request, 0);
        return;
      }
      streaming++;
      try {
        for (let value = 0; ; value++) yield response(request, value);
      } finally {
        streaming--;
      }
    };
    const limiters = [new Limiter(1), new Limiter(1)];
    const plan = {
      settings: SETTINGS,
      decoupled: [true, false],
      downstream: [new Set([1]), new Set<number>()],
      limiters,
    };
    const signal = new AbortController().signal;
    const options = { signal, deadline: Infinity, traceHeaders: {} };
    const responses = new EnsembleRun(plan, inference, REQUEST, options).responses();
    assert.equal((await responses.next()).done, false);
    await settle(); // the step streams on until its responses wait to be taken
    await responses.return(undefined);
    await settle();
    assert.equal(streaming, 0, "the decoupled step's call is over");
    const next = new EnsembleRun(plan, inference, REQUEST, options).responses();
    const first = await Promise.race([next.next(), settle().then(() => "stalled" as const)]);
    assert.notEqual(first, "stalled", "a later request gets the step's place");
    await next.return(undefined);
  });

  it("starts no step of a request whose caller left before its run began", async () => {
    // Behind under load, the data plane reads requests whose clients already gave up: each
    // started every step (200 pipeline calls for a wide fan-out), all doomed.
    let calls = 0;
    const inference: ModelInference = async function* (request) {
      calls++;
      yield response(request, 0);
    };
    const plan = {
      settings: { ...SETTINGS, maxInflightRequests: 0 },
      decoupled: [false, false],
      downstream: [new Set([1]), new Set<number>()],
      limiters: [undefined, undefined],
    };
    const cancel = new AbortController();
    cancel.abort();
    const options = { signal: cancel.signal, deadline: Infinity, traceHeaders: {} };
    const responses = new EnsembleRun(plan, inference, REQUEST, options).responses();
    await assert.rejects(responses.next(), (error: Error) => error instanceof DataPlaneError);
    assert.equal(calls, 0);
  });
});

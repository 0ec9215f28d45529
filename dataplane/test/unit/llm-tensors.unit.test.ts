import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { checkLlmSpec, type LlmLayout } from "../../../lib/engines/llm.js";
import { ConfigError, parseText } from "../../../lib/model-repository/config.js";
import type { Datatype } from "../../../lib/model-repository/datatypes.js";
import { toModelSpec } from "../../../lib/model-repository/spec.js";
import { DataPlaneError, type ErrorKind } from "../../../lib/errors.js";
import type { EngineRequest } from "../../src/engines/engine.js";
import { llmOutputs, readLlmRequest } from "../../src/engines/llm-tensors.js";
import { joinBytesElements, splitBytesElements } from "../../src/tensors/bytes.js";
import type { Tensor } from "../../src/tensors/tensor.js";
import { REPO_ROOT } from "../fixtures/paths.js";

/** The layout of a bundled example model. */
function exampleLayout(model: string): LlmLayout {
  const source = join(REPO_ROOT, "examples", "model_repository", model, "config.pbtxt");
  return checkLlmSpec(toModelSpec(parseText(readFileSync(source, "utf8"), source), source), source, "mocker");
}

const bytes = (name: string, ...values: string[]): Tensor => ({
  name,
  datatype: "BYTES",
  shape: [values.length],
  data: joinBytesElements(values.map((value) => new TextEncoder().encode(value))),
});
const bool = (name: string, value: boolean): Tensor => ({
  name,
  datatype: "BOOL",
  shape: [1, 1],
  data: Uint8Array.of(value ? 1 : 0),
});
const number = (name: string, datatype: Datatype, value: number): Tensor => {
  const array =
    datatype === "INT32"
      ? Int32Array.of(value)
      : datatype === "UINT64"
        ? BigUint64Array.of(BigInt(value))
        : Float32Array.of(value);
  return { name, datatype, shape: [1, 1], data: new Uint8Array(array.buffer) };
};
const request = (inputs: Tensor[], parameters: EngineRequest["parameters"] = {}): EngineRequest => ({
  id: "",
  version: "1",
  parameters,
  inputs: [bytes("text_input", "hello"), ...inputs],
  requestedOutputs: new Set(),
});
const fails = (fn: () => unknown, kind: ErrorKind, pattern: RegExp): void => {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof DataPlaneError);
    assert.equal(error.kind, kind);
    assert.match(error.message, pattern);
    return true;
  });
};

describe("LLM tensor layouts (Triton's vLLM and TensorRT-LLM backends)", () => {
  const vllm = exampleLayout("mock_llm_vllm");
  const trtllm = exampleLayout("mock_llm_trtllm");
  const kserve = exampleLayout("mock_llm");

  it("knows each bundled example's layout from what it declares", () => {
    assert.deepEqual(vllm, { streamOffByDefault: true, echoesPromptByDefault: true, finishReason: "on-request" });
    assert.deepEqual(trtllm, { streamOffByDefault: true, echoesPromptByDefault: true, finishReason: "never" });
    assert.deepEqual(kserve, { streamOffByDefault: false, echoesPromptByDefault: false, finishReason: "always" });
  });

  it("vLLM: sampling values from the sampling_parameters JSON, numbers as strings too; other keys kept for the upstream", () => {
    const llm = readLlmRequest(
      request([
        bytes(
          "sampling_parameters",
          JSON.stringify({ max_tokens: "8", temperature: 0.5, stop: "END", ignore_eos: true }),
        ),
      ]),
      vllm,
      true,
    );
    assert.deepEqual(llm.sampling, { max_tokens: 8, temperature: 0.5, stop: ["END"] });
    assert.deepEqual(llm.extraSampling, { ignore_eos: true });
  });

  it("vLLM: answers whole unless stream is sent, with the prompt unless exclude_input_in_output; finish_reason when asked", () => {
    const whole = readLlmRequest(request([]), vllm, true);
    assert.deepEqual([whole.streaming, whole.echoPrompt, whole.finishReason], [false, true, false]);
    const excluded = readLlmRequest(
      request([bool("exclude_input_in_output", true), bool("return_finish_reason", true)]),
      vllm,
      true,
    );
    assert.deepEqual([excluded.streaming, excluded.echoPrompt, excluded.finishReason], [false, false, true]);
    // A streamed answer never repeats the prompt.
    const streamed = readLlmRequest(request([bool("stream", true)]), vllm, false);
    assert.deepEqual([streamed.streaming, streamed.echoPrompt], [true, false]);
  });

  it("TensorRT-LLM: one batched input per value (INT32 max_tokens, UINT64 random_seed, stop_words)", () => {
    const llm = readLlmRequest(
      request([
        number("max_tokens", "INT32", 12),
        number("random_seed", "UINT64", 7),
        number("temperature", "FP32", 0.25),
        number("min_length", "INT32", 2),
        bytes("stop_words", "stop", ""),
        bytes("bad_words", ""),
        number("beam_width", "INT32", 1),
      ]),
      trtllm,
      true,
    );
    assert.deepEqual(llm.sampling, { max_tokens: 12, seed: 7, temperature: 0.25, min_tokens: 2, stop: ["stop"] });
    assert.equal(llm.finishReason, false);
  });

  it("a later place wins: request parameters, then sampling_parameters, then inputs", () => {
    const parameters = {
      max_tokens: { parameterChoice: { $case: "int64Param", value: 3n } },
      top_p: { parameterChoice: { $case: "doubleParam", value: 0.1 } },
    } as const;
    const llm = readLlmRequest(
      request(
        [bytes("sampling_parameters", '{"max_tokens": 4, "top_k": 5}'), number("max_tokens", "INT32", 6)],
        parameters,
      ),
      trtllm,
      false,
    );
    assert.deepEqual(llm.sampling, { max_tokens: 6, top_p: 0.1, top_k: 5 });
  });

  it("refuses what no engine here does with UNIMPLEMENTED naming the input; false or empty asks for nothing", () => {
    for (const input of [
      bool("return_logprobs", true),
      bool("return_num_output_tokens", true),
      bytes("bad_words", "never"),
      number("beam_width", "INT32", 4),
    ]) {
      fails(() => readLlmRequest(request([input]), vllm, false), "Unimplemented", new RegExp(`'${input.name}'`));
    }
    readLlmRequest(request([bool("return_logprobs", false), bytes("bad_words")]), vllm, false);
  });

  it("refuses bad sampling values with INVALID_ARGUMENT naming them", () => {
    const vllmWith = (json: string) => () => readLlmRequest(request([bytes("sampling_parameters", json)]), vllm, false);
    fails(vllmWith("{max"), "InvalidArgument", /'sampling_parameters' is not JSON/);
    fails(vllmWith("[1]"), "InvalidArgument", /must be a JSON object/);
    fails(vllmWith('{"temperature": "hot"}'), "InvalidArgument", /'temperature' must be a number/);
    fails(vllmWith('{"stop": 3}'), "InvalidArgument", /'stop' must be a string or a list/);
    fails(vllmWith('{"max_tokens": 0}'), "InvalidArgument", /max_tokens must be a whole number/);
    fails(
      () => readLlmRequest(request([number("max_tokens", "INT32", -1)]), trtllm, false),
      "InvalidArgument",
      /max_tokens must be a whole number/,
    );
  });

  it("finish_reason is an output only when the request gets it", () => {
    const names = (outputs: Tensor[]) => outputs.map((tensor) => tensor.name);
    assert.deepEqual(names(llmOutputs(["a"], ["length"], new Set(), { finishReason: true })), [
      "text_output",
      "finish_reason",
    ]);
    assert.deepEqual(names(llmOutputs(["a"], ["length"], new Set(), { finishReason: false })), ["text_output"]);
    const [text] = llmOutputs(["a", "b"], ["", ""], new Set(), { finishReason: false });
    assert.deepEqual(splitBytesElements(text!.data).length, 2);
  });

  it("a model whose layout inputs have the wrong type does not load, and the error names the input", () => {
    const config = `backend: "mocker"
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }, { name: "stream" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]`;
    assert.throws(
      () => checkLlmSpec(toModelSpec(parseText(config, "c.pbtxt"), "c.pbtxt", "m"), "c.pbtxt", "mocker"),
      (error: unknown) =>
        error instanceof ConfigError && /input 'stream' must be TYPE_BOOL, not TYPE_INT32/.test(error.message),
    );
  });
});

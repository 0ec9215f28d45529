import { ConfigError } from "../model-repository/config.js";
import { configTypeName, type Datatype } from "../model-repository/datatypes.js";
import type { ModelSpec } from "../model-repository/spec.js";

/**
 * The tensor conventions of LLM models, shared by the engines that generate text: a BYTES
 * `text_input`, BYTES `text_output` / `finish_reason` outputs, and three places a request
 * may put its sampling values, whichever the model's layout declares:
 *   - request parameters (`max_tokens`, `temperature`, ...: NVIDIA Dynamo's KServe frontend),
 *     with an optional BOOL `streaming` input;
 *   - Triton's vLLM backend: a BYTES `sampling_parameters` input holding a JSON object, BOOL
 *     `stream`, `exclude_input_in_output` and `return_*` inputs;
 *   - Triton's TensorRT-LLM ensemble: one input per value (`max_tokens` INT32,
 *     `temperature` FP32, `stop_words` BYTES, ...), BOOL `stream` and `exclude_input_in_output`.
 */

export const TEXT_INPUT = "text_input";
export const TEXT_OUTPUT = "text_output";
export const FINISH_REASON = "finish_reason";
export const STREAMING_INPUTS: readonly string[] = ["streaming", "stream"];
/** The vLLM backend's JSON object of sampling values. */
export const SAMPLING_PARAMETERS = "sampling_parameters";
/** vLLM and TensorRT-LLM: true leaves the prompt out of a whole (non-streamed) answer. */
export const EXCLUDE_INPUT_IN_OUTPUT = "exclude_input_in_output";
/** vLLM: finish_reason is an answer's output only when the request asks for it. */
export const RETURN_FINISH_REASON = "return_finish_reason";

/** The sampling values an LLM engine understands, by the name an OpenAI request gives them. */
export type SamplingName =
  | "max_tokens"
  | "min_tokens"
  | "temperature"
  | "top_p"
  | "top_k"
  | "seed"
  | "presence_penalty"
  | "frequency_penalty"
  | "repetition_penalty";

/** Every SamplingName, in one list. */
export const SAMPLING_NAMES: readonly SamplingName[] = [
  "max_tokens",
  "min_tokens",
  "temperature",
  "top_p",
  "top_k",
  "seed",
  "presence_penalty",
  "frequency_penalty",
  "repetition_penalty",
];

/** TensorRT-LLM's sampling inputs and the value each sets (its stop_words become `stop`). */
export const SAMPLING_INPUTS: Readonly<Record<string, SamplingName>> = {
  max_tokens: "max_tokens",
  min_length: "min_tokens",
  temperature: "temperature",
  top_p: "top_p",
  top_k: "top_k",
  random_seed: "seed",
  presence_penalty: "presence_penalty",
  frequency_penalty: "frequency_penalty",
  repetition_penalty: "repetition_penalty",
};
export const STOP_WORDS = "stop_words";

/**
 * max_tokens for a request that gives none to a model that requires it as an input
 * (TensorRT-LLM's ensemble): OpenAI's documented default for completions.
 */
export const DEFAULT_MAX_TOKENS = 16;

/** One value for one of a model's per-value sampling inputs. */
export interface SamplingInputValue {
  readonly name: string;
  readonly datatype: Datatype;
  readonly value: number;
}

/**
 * The per-value sampling inputs (TensorRT-LLM's layout) a request to `spec` carries, from
 * `given` (values by their OpenAI names): each declared input whose value is given, and a
 * required max_tokens input with DEFAULT_MAX_TOKENS when none is.
 */
export function samplingInputValues(
  spec: ModelSpec,
  given: Readonly<Partial<Record<SamplingName, number>>>,
): SamplingInputValue[] {
  const values: SamplingInputValue[] = [];
  for (const tensor of spec.inputs) {
    const sampling = SAMPLING_INPUTS[tensor.name];
    if (sampling === undefined) continue;
    const value = given[sampling] ?? (sampling === "max_tokens" && !tensor.optional ? DEFAULT_MAX_TOKENS : undefined);
    if (value !== undefined) values.push({ name: tensor.name, datatype: tensor.datatype, value });
  }
  return values;
}

/**
 * Inputs of the vLLM and TensorRT-LLM layouts that ask for what no engine here does (token
 * log-probabilities, logits, beam search, banned words): declaring them is fine, a request
 * that sets them gets UNIMPLEMENTED naming the input.
 */
export const UNSUPPORTED_LLM_INPUTS: readonly string[] = [
  "return_logprobs",
  "return_cumulative_logprob",
  "return_num_input_tokens",
  "return_num_output_tokens",
  "return_log_probs",
  "return_context_logits",
  "return_generation_logits",
  "bad_words",
  "beam_width",
];

/** What a model's declared inputs say about requests that leave a layout's inputs out. */
export interface LlmLayout {
  /**
   * The model declares `stream` (vLLM, TensorRT-LLM): a request without it is answered
   * whole, as those backends do, even by a decoupled model.
   */
  readonly streamOffByDefault: boolean;
  /** The model declares exclude_input_in_output: a whole answer starts with the prompt unless the request sets it. */
  readonly echoesPromptByDefault: boolean;
  /**
   * When an answer carries finish_reason: always when the model declares that output, only
   * when asked for when it also declares return_finish_reason (vLLM), never when it declares
   * no such output (TensorRT-LLM).
   */
  readonly finishReason: "always" | "on-request" | "never";
}

/** True when a model declares the LLM tensor interface (text_input in, text_output out). */
export function speaksLlm(spec: ModelSpec): boolean {
  return (
    spec.inputs.some((tensor) => tensor.name === TEXT_INPUT && tensor.datatype === "BYTES") &&
    spec.outputs.some((tensor) => tensor.name === TEXT_OUTPUT && tensor.datatype === "BYTES")
  );
}

export function llmLayoutOf(spec: ModelSpec): LlmLayout {
  const declares = (name: string): boolean => spec.inputs.some((tensor) => tensor.name === name);
  return {
    streamOffByDefault: declares("stream"),
    echoesPromptByDefault: declares(EXCLUDE_INPUT_IN_OUTPUT),
    finishReason: !spec.outputs.some((tensor) => tensor.name === FINISH_REASON)
      ? "never"
      : declares(RETURN_FINISH_REASON)
        ? "on-request"
        : "always",
  };
}

/** The datatypes a declared layout input must have. */
const LAYOUT_DATATYPES: Readonly<Record<string, readonly Datatype[]>> = {
  streaming: ["BOOL"],
  stream: ["BOOL"],
  [EXCLUDE_INPUT_IN_OUTPUT]: ["BOOL"],
  [RETURN_FINISH_REASON]: ["BOOL"],
  [SAMPLING_PARAMETERS]: ["BYTES"],
  [STOP_WORDS]: ["BYTES"],
  bad_words: ["BYTES"],
  max_tokens: ["INT32", "INT64", "UINT32", "UINT64"],
  min_length: ["INT32", "INT64", "UINT32", "UINT64"],
  top_k: ["INT32", "INT64", "UINT32", "UINT64"],
  random_seed: ["INT32", "INT64", "UINT32", "UINT64"],
  beam_width: ["INT32", "INT64", "UINT32", "UINT64"],
  temperature: ["FP32", "FP64"],
  top_p: ["FP32", "FP64"],
  presence_penalty: ["FP32", "FP64"],
  frequency_penalty: ["FP32", "FP64"],
  repetition_penalty: ["FP32", "FP64"],
};

/** The largest `max_tokens` a request (or a mocker model) may ask of an LLM engine (2^20). */
export const MAX_TOKENS_LIMIT = 1_048_576;

/** Checks that a model declares the LLM tensors (text_input in, text_output out, layout inputs typed right); gives its layout. */
export function checkLlmSpec(spec: ModelSpec, source: string, backend: string): LlmLayout {
  const input = spec.inputs.find((tensor) => tensor.name === TEXT_INPUT);
  if (input?.datatype !== "BYTES") {
    throw new ConfigError(source, `backend ${backend}: declare input '${TEXT_INPUT}' with data_type TYPE_STRING`);
  }
  for (const tensor of spec.inputs) {
    const datatypes = LAYOUT_DATATYPES[tensor.name];
    if (datatypes !== undefined && !datatypes.includes(tensor.datatype)) {
      throw new ConfigError(
        source,
        `backend ${backend}: input '${tensor.name}' must be ${datatypes.map(configTypeName).join(" or ")}, not ${configTypeName(tensor.datatype)}`,
      );
    }
  }
  const output = spec.outputs.find((tensor) => tensor.name === TEXT_OUTPUT);
  if (output?.datatype !== "BYTES") {
    throw new ConfigError(source, `backend ${backend}: declare output '${TEXT_OUTPUT}' with data_type TYPE_STRING`);
  }
  return llmLayoutOf(spec);
}

/** A model `parameters` value that must be a number >= 0 (`fallback` when absent). */
export function numberParameter(spec: ModelSpec, source: string, name: string, fallback: number): number {
  const text = spec.parameters[name];
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) {
    throw new ConfigError(source, `parameters["${name}"]: expected a number >= 0, got '${text}'`);
  }
  return value;
}

import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import {
  EXCLUDE_INPUT_IN_OUTPUT,
  FINISH_REASON,
  MAX_TOKENS_LIMIT,
  RETURN_FINISH_REASON,
  SAMPLING_INPUTS,
  SAMPLING_NAMES,
  SAMPLING_PARAMETERS,
  STOP_WORDS,
  STREAMING_INPUTS,
  TEXT_INPUT,
  TEXT_OUTPUT,
  UNSUPPORTED_LLM_INPUTS,
  type LlmLayout,
  type SamplingName,
} from "../../../lib/engines/llm.js";
import { DATATYPES } from "../../../lib/model-repository/datatypes.js";
import { invalidArgument, unimplemented } from "../../../lib/errors.js";
import { joinBytesElements, splitBytesElements } from "../tensors/bytes.js";
import type { Tensor } from "../tensors/tensor.js";
import { rawToTyped } from "../tensors/typed.js";
import type { EngineRequest } from "./engine.js";

/**
 * Reading an LLM request (the prompt, streaming, the sampling values from whichever place
 * the model's layout puts them) and writing its outputs, after the conventions in
 * lib/engines/llm.ts. Shared by the engines that generate text (mocker, openai).
 */

export type SamplingParameters = { [name in SamplingName]?: number } & { stop?: string[] };

export interface LlmRequest {
  readonly prompt: string;
  /** Answer token by token: the request's `streaming`/`stream` input, else the engine's default. */
  readonly streaming: boolean;
  /** A whole answer starts with the prompt (vLLM and TensorRT-LLM without exclude_input_in_output). */
  readonly echoPrompt: boolean;
  /** Send finish_reason (see LlmLayout.finishReason). */
  readonly finishReason: boolean;
  readonly sampling: SamplingParameters;
  /**
   * Keys of vLLM's sampling_parameters that no field of `sampling` holds (e.g. ignore_eos),
   * for an upstream that knows them: vLLM's OpenAI server takes its own sampling fields.
   */
  readonly extraSampling: Readonly<Record<string, unknown>>;
}

const isSamplingName = (name: string): name is SamplingName => (SAMPLING_NAMES as readonly string[]).includes(name);

/**
 * Reads a request to an LLM model of `layout`. Sampling values are taken from request
 * parameters, then vLLM's sampling_parameters, then TensorRT-LLM's inputs (a later place
 * wins). `streamingByDefault` is the engine's answer to a request that sends no streaming
 * flag, unless the layout says no (LlmLayout.streamOffByDefault).
 */
export function readLlmRequest(request: EngineRequest, layout: LlmLayout, streamingByDefault: boolean): LlmRequest {
  const input = (name: string): Tensor | undefined => request.inputs.find((tensor) => tensor.name === name);
  const text = input(TEXT_INPUT);
  const elements = text === undefined ? [] : splitBytesElements(text.data);
  if (elements.length !== 1) {
    throw invalidArgument(
      `input '${TEXT_INPUT}' must hold exactly one prompt (shape [1] or [1,1]), got ${elements.length}`,
    );
  }
  refuseUnsupported(request.inputs);
  const streamingTensor = request.inputs.find((tensor) => STREAMING_INPUTS.includes(tensor.name));
  const streaming =
    streamingTensor === undefined ? streamingByDefault && !layout.streamOffByDefault : firstBool(streamingTensor);
  const exclude = input(EXCLUDE_INPUT_IN_OUTPUT);
  const echoPrompt = !streaming && (exclude === undefined ? layout.echoesPromptByDefault : !firstBool(exclude));
  const returnFinishReason = input(RETURN_FINISH_REASON);
  const finishReason =
    layout.finishReason === "always" ||
    (layout.finishReason === "on-request" && returnFinishReason !== undefined && firstBool(returnFinishReason));

  const sampling: SamplingParameters = {};
  const extraSampling: Record<string, unknown> = {};
  samplingFromParameters(request.parameters, sampling);
  const json = input(SAMPLING_PARAMETERS);
  if (json !== undefined) samplingFromJson(json, sampling, extraSampling);
  samplingFromInputs(request.inputs, sampling);
  checkMaxTokens(sampling.max_tokens);
  return {
    prompt: new TextDecoder().decode(elements[0]),
    streaming,
    echoPrompt,
    finishReason,
    sampling,
    extraSampling,
  };
}

function refuseUnsupported(inputs: readonly Tensor[]): void {
  for (const tensor of inputs) {
    if (!UNSUPPORTED_LLM_INPUTS.includes(tensor.name)) continue;
    const asked =
      tensor.datatype === "BOOL"
        ? firstBool(tensor)
        : tensor.datatype === "BYTES"
          ? splitBytesElements(tensor.data).some((element) => element.length > 0)
          : firstNumber(tensor) > 1; // beam_width 1 is plain sampling
    if (asked) throw unimplemented(`input '${tensor.name}': not supported by the data plane's LLM engines`);
  }
}

/** Request parameters: numbers (or numeric strings), and `stop` as a string (a JSON list or one stop word). */
function samplingFromParameters(
  parameters: Readonly<Record<string, InferParameter>>,
  sampling: SamplingParameters,
): void {
  for (const name of SAMPLING_NAMES) {
    const choice = parameters[name]?.parameterChoice;
    if (choice === undefined) continue;
    const value = choice.$case === "boolParam" ? NaN : Number(choice.value);
    if (!Number.isFinite(value)) throw invalidArgument(`parameter '${name}' must be a number`);
    sampling[name] = value;
  }
  const stop = parameters["stop"]?.parameterChoice;
  if (stop !== undefined) {
    if (stop.$case !== "stringParam") {
      throw invalidArgument("parameter 'stop' must be a string (JSON list or one stop word)");
    }
    sampling.stop = parseStop(stop.value);
  }
}

/** vLLM's sampling_parameters: one JSON object; its values may be strings ("8"), as genai-perf sends them. */
function samplingFromJson(tensor: Tensor, sampling: SamplingParameters, extra: Record<string, unknown>): void {
  const elements = splitBytesElements(tensor.data);
  if (elements.length !== 1) {
    throw invalidArgument(`input '${SAMPLING_PARAMETERS}' must hold one JSON object, got ${elements.length} elements`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(elements[0]));
  } catch (error) {
    throw invalidArgument(`input '${SAMPLING_PARAMETERS}' is not JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw invalidArgument(`input '${SAMPLING_PARAMETERS}' must be a JSON object`);
  }
  for (const [key, value] of Object.entries(parsed)) {
    if (isSamplingName(key)) {
      const number = typeof value === "number" ? value : typeof value === "string" ? Number(value) : NaN;
      if (!Number.isFinite(number)) {
        throw invalidArgument(
          `input '${SAMPLING_PARAMETERS}': '${key}' must be a number, got ${JSON.stringify(value)}`,
        );
      }
      sampling[key] = number;
    } else if (key === "stop") {
      if (typeof value === "string") sampling.stop = [value];
      else if (Array.isArray(value) && value.every((item) => typeof item === "string")) sampling.stop = value;
      else throw invalidArgument(`input '${SAMPLING_PARAMETERS}': 'stop' must be a string or a list of strings`);
    } else {
      extra[key] = value;
    }
  }
}

/** TensorRT-LLM's ensemble: one input per value, and stop_words as BYTES elements. */
function samplingFromInputs(inputs: readonly Tensor[], sampling: SamplingParameters): void {
  for (const tensor of inputs) {
    const name = SAMPLING_INPUTS[tensor.name];
    if (name !== undefined) sampling[name] = firstNumber(tensor);
    else if (tensor.name === STOP_WORDS) {
      const words = splitBytesElements(tensor.data)
        .map((element) => new TextDecoder().decode(element))
        .filter((word) => word !== "");
      if (words.length > 0) sampling.stop = words;
    }
  }
}

function checkMaxTokens(maxTokens: number | undefined): void {
  if (maxTokens !== undefined && (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > MAX_TOKENS_LIMIT)) {
    throw invalidArgument(`max_tokens must be a whole number from 1 to ${MAX_TOKENS_LIMIT}, got ${maxTokens}`);
  }
}

function firstBool(tensor: Tensor): boolean {
  if (tensor.datatype !== "BOOL") throw invalidArgument(`input '${tensor.name}' must be BOOL`);
  return tensor.data[0] !== undefined && tensor.data[0] !== 0;
}

/** The first element of a numeric input (the layouts' values are shape [1], or [1,1] batched). */
function firstNumber(tensor: Tensor): number {
  const field = DATATYPES[tensor.datatype].typedField;
  if (tensor.datatype === "BOOL" || tensor.datatype === "BYTES" || field === undefined) {
    throw invalidArgument(`input '${tensor.name}' must be a number, not ${tensor.datatype}`);
  }
  const values = rawToTyped(tensor.datatype, tensor.data)[field] as readonly (number | bigint)[];
  if (values.length !== 1) throw invalidArgument(`input '${tensor.name}' must hold one value, got ${values.length}`);
  return Number(values[0]);
}

function parseStop(value: string): string[] {
  if (value.startsWith("[")) {
    try {
      const parsed: unknown = JSON.parse(value);
      if (Array.isArray(parsed) && parsed.every((item) => typeof item === "string")) return parsed;
    } catch {
      // not JSON: one stop word that starts with "["
    }
  }
  return [value];
}

/**
 * The outputs of one LLM response: one text element and one finish reason per choice
 * (finish_reason only when the request gets it, see LlmRequest.finishReason).
 */
export function llmOutputs(
  texts: readonly string[],
  finishReasons: readonly string[],
  wanted: ReadonlySet<string>,
  llm: Pick<LlmRequest, "finishReason">,
): Tensor[] {
  const encoder = new TextEncoder();
  const tensor = (name: string, values: readonly string[]): Tensor => ({
    name,
    datatype: "BYTES",
    shape: [values.length],
    data: joinBytesElements(values.map((value) => encoder.encode(value))),
  });
  const outputs: Tensor[] = [];
  if (wanted.size === 0 || wanted.has(TEXT_OUTPUT)) outputs.push(tensor(TEXT_OUTPUT, texts));
  if (llm.finishReason && (wanted.size === 0 || wanted.has(FINISH_REASON))) {
    outputs.push(tensor(FINISH_REASON, finishReasons));
  }
  return outputs;
}

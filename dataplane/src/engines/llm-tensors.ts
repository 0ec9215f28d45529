import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import {
  FINISH_REASON,
  MAX_TOKENS_LIMIT,
  STREAMING_INPUTS,
  TEXT_INPUT,
  TEXT_OUTPUT,
} from "../../../lib/engines/llm.js";
import { invalidArgument } from "../../../lib/errors.js";
import { joinBytesElements, splitBytesElements } from "../tensors/bytes.js";
import type { Tensor } from "../tensors/tensor.js";
import { rawToTyped } from "../tensors/typed.js";
import type { EngineRequest } from "./engine.js";

/**
 * Reading an LLM request (the prompt, the streaming flag, the sampling parameters) and
 * writing its outputs, after the tensor conventions in lib/engines/llm.ts. Shared by the
 * engines that generate text (mocker, openai).
 */

export interface SamplingParameters {
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  seed?: number;
  stop?: string[];
  presence_penalty?: number;
  frequency_penalty?: number;
}

export interface LlmRequest {
  readonly prompt: string;
  readonly streaming: boolean;
  readonly sampling: SamplingParameters;
}

const NUMERIC_PARAMETERS = [
  "max_tokens",
  "temperature",
  "top_p",
  "top_k",
  "seed",
  "presence_penalty",
  "frequency_penalty",
] as const;

/** Reads the prompt, the streaming flag and the sampling parameters of a request. */
export function readLlmRequest(request: EngineRequest): LlmRequest {
  const text = request.inputs.find((tensor) => tensor.name === TEXT_INPUT);
  const elements = text === undefined ? [] : splitBytesElements(text.data);
  if (elements.length !== 1) {
    throw invalidArgument(
      `input '${TEXT_INPUT}' must hold exactly one prompt (shape [1] or [1,1]), got ${elements.length}`,
    );
  }
  const streamingTensor = request.inputs.find((tensor) => STREAMING_INPUTS.includes(tensor.name));
  const streaming = streamingTensor !== undefined && rawToTyped("BOOL", streamingTensor.data).boolContents[0] === true;
  return { prompt: new TextDecoder().decode(elements[0]), streaming, sampling: samplingOf(request.parameters) };
}

function samplingOf(parameters: Readonly<Record<string, InferParameter>>): SamplingParameters {
  const sampling: SamplingParameters = {};
  for (const name of NUMERIC_PARAMETERS) {
    const choice = parameters[name]?.parameterChoice;
    if (choice === undefined) continue;
    const value =
      choice.$case === "stringParam" ? Number(choice.value) : choice.$case === "boolParam" ? NaN : Number(choice.value);
    if (!Number.isFinite(value)) throw invalidArgument(`parameter '${name}' must be a number`);
    sampling[name] = value;
  }
  const stop = parameters["stop"]?.parameterChoice;
  if (stop !== undefined) {
    if (stop.$case !== "stringParam")
      throw invalidArgument("parameter 'stop' must be a string (JSON list or one stop word)");
    sampling.stop = parseStop(stop.value);
  }
  const maxTokens = sampling.max_tokens;
  if (maxTokens !== undefined && (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > MAX_TOKENS_LIMIT)) {
    throw invalidArgument(
      `parameter 'max_tokens' must be a whole number from 1 to ${MAX_TOKENS_LIMIT}, got ${maxTokens}`,
    );
  }
  return sampling;
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

/** The outputs of one LLM response: one text element and one finish reason per choice. */
export function llmOutputs(
  texts: readonly string[],
  finishReasons: readonly string[],
  wanted: ReadonlySet<string>,
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
  if (wanted.size === 0 || wanted.has(FINISH_REASON)) outputs.push(tensor(FINISH_REASON, finishReasons));
  return outputs;
}

import { ConfigError } from "../model-repository/config.js";
import type { ModelSpec } from "../model-repository/spec.js";

/**
 * The tensor conventions of LLM models (Triton's vLLM/TensorRT-LLM backends and NVIDIA
 * Dynamo's KServe frontend): a BYTES `text_input`, an optional BOOL `streaming` (or
 * `stream`), and BYTES `text_output` / `finish_reason` outputs. Shared by the engines that
 * generate text.
 */

export const TEXT_INPUT = "text_input";
export const TEXT_OUTPUT = "text_output";
export const FINISH_REASON = "finish_reason";
export const STREAMING_INPUTS: readonly string[] = ["streaming", "stream"];

/** The largest `max_tokens` a request (or a mocker model) may ask of an LLM engine (2^20). */
export const MAX_TOKENS_LIMIT = 1_048_576;

/** Checks that a model declares the LLM tensors (text_input in, text_output out). */
export function checkLlmSpec(spec: ModelSpec, source: string, backend: string): void {
  const input = spec.inputs.find((tensor) => tensor.name === TEXT_INPUT);
  if (input?.datatype !== "BYTES") {
    throw new ConfigError(source, `backend ${backend}: declare input '${TEXT_INPUT}' with data_type TYPE_STRING`);
  }
  const output = spec.outputs.find((tensor) => tensor.name === TEXT_OUTPUT);
  if (output?.datatype !== "BYTES") {
    throw new ConfigError(source, `backend ${backend}: declare output '${TEXT_OUTPUT}' with data_type TYPE_STRING`);
  }
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

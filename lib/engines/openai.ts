import type { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { ConfigError, parseText } from "../model-repository/config.js";
import type { EngineDescription } from "./description.js";
import { checkLlmSpec, type LlmLayout } from "./llm.js";

/**
 * `openai`: an LLM behind an OpenAI-compatible HTTP server (vLLM, SGLang, TGI, llama.cpp).
 * Parameters: `url` (e.g. http://vllm:8000/v1), `upstream_model`, `mode` (completions or
 * chat), `api_key_env` (the environment variable holding the key, read by the data plane
 * when it starts the engine).
 */
export interface OpenAiSettings {
  readonly model: string;
  readonly baseUrl: string;
  readonly upstreamModel: string;
  readonly chat: boolean;
  readonly apiKeyVariable: string | undefined;
  readonly decoupled: boolean;
  readonly layout: LlmLayout;
}

export const openAiEngine: EngineDescription<OpenAiSettings> = {
  name: "openai",
  scheduled: false,
  settings(spec, source) {
    const layout = checkLlmSpec(spec, source, "openai");
    const url = spec.parameters["url"];
    if (url === undefined || !/^https?:\/\/[^\s]+$/.test(url)) {
      throw new ConfigError(
        source,
        `engine openai: set parameters["url"] to the server's base URL, e.g. http://vllm:8000/v1`,
      );
    }
    const mode = spec.parameters["mode"] ?? "completions";
    if (mode !== "completions" && mode !== "chat") {
      throw new ConfigError(source, `engine openai: parameters["mode"] must be completions or chat, not '${mode}'`);
    }
    return {
      model: spec.name,
      baseUrl: url.replace(/\/+$/, ""),
      upstreamModel: spec.parameters["upstream_model"] ?? spec.name,
      chat: mode === "chat",
      apiKeyVariable: spec.parameters["api_key_env"],
      decoupled: spec.decoupled,
      layout,
    };
  },
};

/**
 * The tensors Triton's vLLM backend gives a model whose config.pbtxt declares none (its
 * auto-complete), which clients written for it (tritonclient scripts, genai-perf --backend
 * vllm) send and read.
 */
const VLLM_BACKEND_TENSORS = `
input [
  { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true },
  { name: "sampling_parameters" data_type: TYPE_STRING dims: [ 1 ] optional: true },
  { name: "exclude_input_in_output" data_type: TYPE_BOOL dims: [ 1 ] optional: true },
  { name: "return_finish_reason" data_type: TYPE_BOOL dims: [ 1 ] optional: true },
  { name: "return_cumulative_logprob" data_type: TYPE_BOOL dims: [ 1 ] optional: true },
  { name: "return_logprobs" data_type: TYPE_BOOL dims: [ 1 ] optional: true },
  { name: "return_num_input_tokens" data_type: TYPE_BOOL dims: [ 1 ] optional: true },
  { name: "return_num_output_tokens" data_type: TYPE_BOOL dims: [ 1 ] optional: true }
]
output [
  { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] },
  { name: "finish_reason" data_type: TYPE_STRING dims: [ -1 ] },
  { name: "cumulative_logprob" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "logprobs" data_type: TYPE_STRING dims: [ -1 ] },
  { name: "num_input_tokens" data_type: TYPE_UINT32 dims: [ 1 ] },
  { name: "num_output_tokens" data_type: TYPE_UINT32 dims: [ -1 ] }
]
`;

/**
 * A Triton vLLM-backend model served instead by a vLLM OpenAI server at `url` under
 * `upstreamModel`: the openai engine, with the tensors (declared, or the vLLM backend's own)
 * and decoupling kept, so the model's clients do not change.
 */
export function openAiServedConfig(config: ModelConfig, url: string, upstreamModel: string): ModelConfig {
  const backend = parseText(VLLM_BACKEND_TENSORS, "the vLLM backend's tensors");
  return {
    ...config,
    input: config.input.length > 0 ? config.input : backend.input,
    output: config.output.length > 0 ? config.output : backend.output,
    parameters: {
      ...config.parameters,
      engine: { stringValue: openAiEngine.name },
      url: { stringValue: url },
      upstream_model: { stringValue: upstreamModel },
    },
  };
}

import { ConfigError } from "../model-repository/config.js";
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

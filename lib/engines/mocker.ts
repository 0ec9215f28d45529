import { ConfigError } from "../model-repository/config.js";
import type { EngineDescription } from "./description.js";
import { checkLlmSpec, MAX_TOKENS_LIMIT, numberParameter, type LlmLayout } from "./llm.js";

/**
 * `backend: "mocker"`, a simulated LLM for tests and benchmarks: `ttft_ms` before the
 * first token, `itl_ms` between tokens, `max_tokens` (the request's parameter wins).
 */
export interface MockerSettings {
  readonly ttftMs: number;
  readonly itlMs: number;
  readonly maxTokens: number;
  readonly decoupled: boolean;
  readonly layout: LlmLayout;
}

export const mockerEngine: EngineDescription<MockerSettings> = {
  name: "mocker",
  settings(spec, source) {
    const layout = checkLlmSpec(spec, source, "mocker");
    const maxTokens = Math.max(1, Math.floor(numberParameter(spec, source, "max_tokens", 16)));
    if (maxTokens > MAX_TOKENS_LIMIT) {
      throw new ConfigError(source, `parameters["max_tokens"]: at most ${MAX_TOKENS_LIMIT}, got ${maxTokens}`);
    }
    return {
      ttftMs: numberParameter(spec, source, "ttft_ms", 0),
      itlMs: numberParameter(spec, source, "itl_ms", 0),
      maxTokens,
      decoupled: spec.decoupled,
      layout,
    };
  },
};

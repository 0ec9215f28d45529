import { ConfigError } from "../model-repository/config.js";
import type { EngineDescription } from "./description.js";
import { checkLlmSpec, MAX_TOKENS_LIMIT, numberParameter, type LlmLayout } from "./llm.js";

/**
 * `backend: "mocker"`, a simulated LLM for tests and benchmarks: `ttft_ms` before the
 * first token, `itl_ms` between tokens, `max_tokens` (the request's parameter wins);
 * `max_num_seqs` sequences generated at once, the others waiting their turn (0: no limit,
 * vLLM's name), and a KV cache of `kv_cache_tokens` tokens whose usage it reports (0: none).
 */
export interface MockerSettings {
  readonly ttftMs: number;
  readonly itlMs: number;
  readonly maxTokens: number;
  readonly maxNumSeqs: number;
  readonly kvCacheTokens: number;
  readonly decoupled: boolean;
  readonly layout: LlmLayout;
}

export const mockerEngine: EngineDescription<MockerSettings> = {
  name: "mocker",
  scheduled: true,
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
      maxNumSeqs: Math.floor(numberParameter(spec, source, "max_num_seqs", 0)),
      kvCacheTokens: Math.floor(numberParameter(spec, source, "kv_cache_tokens", 0)),
      decoupled: spec.decoupled,
      layout,
    };
  },
};

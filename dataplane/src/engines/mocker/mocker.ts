import { createHash } from "node:crypto";
import { invalidArgument } from "../../../../lib/errors.js";
import { MAX_TOKENS_LIMIT } from "../../limits.js";
import { ConfigError } from "../../../../lib/model-repository/config.js";
import type { ModelSpec } from "../../../../lib/model-repository/spec.js";
import { CpuSlices, pause } from "../pause.js";
import type { Engine, EngineFactory, EngineRequest, EngineResponse, InferOptions } from "../engine.js";
import { checkLlmSpec, FINISH_REASON, llmOutputs, readLlmRequest } from "../llm/llm.js";

/**
 * `backend: "mocker"`, a simulated LLM for tests and benchmarks. It "generates" words
 * chosen deterministically from the prompt, waits `ttft_ms` before the first token and
 * `itl_ms` between tokens, and stops after `max_tokens` (request parameter, else the
 * model's `max_tokens` parameter) with finish_reason "length". A decoupled model streams
 * one response per token; otherwise the whole text comes in one response.
 */
interface MockerSettings {
  readonly ttftMs: number;
  readonly itlMs: number;
  readonly maxTokens: number;
  readonly decoupled: boolean;
}

const VOCABULARY = [
  "the",
  "model",
  "token",
  "stream",
  "kernel",
  "tensor",
  "batch",
  "cluster",
  "gateway",
  "latency",
  "router",
  "cache",
  "prefill",
  "decode",
  "replica",
  "shard",
  "queue",
  "sample",
  "prompt",
  "context",
];

class MockerEngine implements Engine {
  constructor(private readonly settings: MockerSettings) {}

  async *infer(request: EngineRequest, { signal }: InferOptions): AsyncIterable<EngineResponse> {
    const llm = readLlmRequest(request);
    if (llm.streaming && !this.settings.decoupled) {
      throw invalidArgument("streaming=true needs a decoupled model and the ModelStreamInfer RPC");
    }
    const count = llm.sampling.max_tokens ?? this.settings.maxTokens;
    const seed = llm.sampling.seed ?? 0;
    const stream = this.settings.decoupled;
    // Each token is made when its turn comes, in CPU slices: a long answer neither holds up
    // other requests nor goes on once the request is cancelled.
    const slices = new CpuSlices(signal);
    const text: string[] = [];
    for (let index = 0; index < count; index++) {
      const delay = index === 0 ? this.settings.ttftMs : this.settings.itlMs;
      if (delay > 0) await pause(delay, signal);
      else await slices.step();
      const token = wordFor(llm.prompt, seed, index);
      if (stream) {
        const delta = index === 0 ? token : ` ${token}`;
        yield { outputs: llmOutputs([delta], [index === count - 1 ? "length" : ""], request.requestedOutputs) };
      } else {
        text.push(token);
      }
    }
    if (!stream) yield { outputs: llmOutputs([text.join(" ")], ["length"], request.requestedOutputs) };
  }

  async close(): Promise<void> {}
}

function wordFor(prompt: string, seed: number, index: number): string {
  const digest = createHash("sha256").update(`${seed}\u0000${prompt}\u0000${index}`).digest();
  return VOCABULARY[digest.readUInt32LE(0) % VOCABULARY.length]!;
}

function numberParameter(spec: ModelSpec, source: string, name: string, fallback: number): number {
  const text = spec.parameters[name];
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) {
    throw new ConfigError(source, `parameters["${name}"]: expected a number >= 0, got '${text}'`);
  }
  return value;
}

export const mockerEngineFactory: EngineFactory = {
  backend: "mocker",
  create(spec: ModelSpec, source: string): Engine {
    checkLlmSpec(spec, source, "mocker");
    if (!spec.outputs.some((output) => output.name === FINISH_REASON)) {
      throw new ConfigError(source, `backend mocker: declare output '${FINISH_REASON}' with data_type TYPE_STRING`);
    }
    const maxTokens = Math.max(1, Math.floor(numberParameter(spec, source, "max_tokens", 16)));
    if (maxTokens > MAX_TOKENS_LIMIT) {
      throw new ConfigError(source, `parameters["max_tokens"]: at most ${MAX_TOKENS_LIMIT}, got ${maxTokens}`);
    }
    return new MockerEngine({
      ttftMs: numberParameter(spec, source, "ttft_ms", 0),
      itlMs: numberParameter(spec, source, "itl_ms", 0),
      maxTokens,
      decoupled: spec.decoupled,
    });
  },
};

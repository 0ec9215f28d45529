import { createHash } from "node:crypto";
import { invalidArgument } from "../../errors.js";
import { ConfigError } from "../../models/config.js";
import type { ModelSpec } from "../../models/spec.js";
import { pause } from "../pause.js";
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
    const tokens = Array.from({ length: count }, (_, index) => wordFor(llm.prompt, llm.sampling.seed ?? 0, index));
    const stream = this.settings.decoupled;
    for (let index = 0; index < count; index++) {
      await pause(index === 0 ? this.settings.ttftMs : this.settings.itlMs, signal);
      const last = index === count - 1;
      if (stream) {
        const delta = index === 0 ? tokens[0]! : ` ${tokens[index]!}`;
        yield { outputs: llmOutputs([delta], [last ? "length" : ""], request.requestedOutputs) };
      }
    }
    if (!stream) yield { outputs: llmOutputs([tokens.join(" ")], ["length"], request.requestedOutputs) };
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
    return new MockerEngine({
      ttftMs: numberParameter(spec, source, "ttft_ms", 0),
      itlMs: numberParameter(spec, source, "itl_ms", 0),
      maxTokens: Math.max(1, Math.floor(numberParameter(spec, source, "max_tokens", 16))),
      decoupled: spec.decoupled,
    });
  },
};

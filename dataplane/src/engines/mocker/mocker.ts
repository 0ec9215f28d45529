import { createHash } from "node:crypto";
import type { MockerSettings } from "../../../../lib/engines/mocker.js";
import { invalidArgument } from "../../../../lib/errors.js";
import type { Engine, EngineRequest, EngineResponse, InferOptions } from "../engine.js";
import { llmOutputs, readLlmRequest } from "../llm-tensors.js";
import { CpuSlices, pause } from "../pause.js";

/**
 * `backend: "mocker"`, a simulated LLM for tests and benchmarks. It "generates" words
 * chosen deterministically from the prompt, waits `ttft_ms` before the first token and
 * `itl_ms` between tokens, and stops after `max_tokens` (the request's, from whichever
 * place its layout puts it, else the model's `max_tokens` parameter) with finish_reason
 * "length". A decoupled model streams one response per token when the request asks for it
 * (`streaming`/`stream`; without the flag: yes, unless the model declares `stream` as
 * Triton's vLLM and TensorRT-LLM models do); otherwise the whole text comes in one
 * response, after the prompt when the layout echoes it.
 */
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

export class MockerEngine implements Engine {
  constructor(private readonly settings: MockerSettings) {}

  async *infer(request: EngineRequest, { signal }: InferOptions): AsyncIterable<EngineResponse> {
    const { decoupled, layout } = this.settings;
    const llm = readLlmRequest(request, layout, decoupled);
    if (llm.streaming && !decoupled) {
      throw invalidArgument("streaming=true needs a decoupled model and the ModelStreamInfer RPC");
    }
    const count = llm.sampling.max_tokens ?? this.settings.maxTokens;
    const seed = llm.sampling.seed ?? 0;
    const stream = llm.streaming;
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
        yield { outputs: llmOutputs([delta], [index === count - 1 ? "length" : ""], request.requestedOutputs, llm) };
      } else {
        text.push(token);
      }
    }
    if (!stream) {
      const answer = llm.echoPrompt ? [llm.prompt, ...text] : text;
      yield { outputs: llmOutputs([answer.join(" ")], ["length"], request.requestedOutputs, llm) };
    }
  }

  async close(): Promise<void> {}
}

function wordFor(prompt: string, seed: number, index: number): string {
  const digest = createHash("sha256").update(`${seed}\u0000${prompt}\u0000${index}`).digest();
  return VOCABULARY[digest.readUInt32LE(0) % VOCABULARY.length]!;
}

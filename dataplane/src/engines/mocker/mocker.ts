import { createHash } from "node:crypto";
import type { MockerSettings } from "../../../../lib/engines/mocker.js";
import { abortedError, invalidArgument } from "../../../../lib/errors.js";
import type { Engine, EngineLoad, EngineRequest, EngineResponse, InferOptions } from "../engine.js";
import { llmOutputs, readLlmRequest, type LlmRequest } from "../llm-tensors.js";
import { CpuSlices, pause } from "../pause.js";

/**
 * `backend: "mocker"`, a simulated LLM for tests and benchmarks. It "generates" words
 * chosen deterministically from the prompt, waits `ttft_ms` before the first token and
 * `itl_ms` between tokens, and stops after `max_tokens` (the request's, from whichever
 * place its layout puts it, else the model's `max_tokens` parameter) with finish_reason
 * "length", or earlier at a stop sequence (`stop`, `stop_words`), which it leaves out, with
 * finish_reason "stop". A decoupled model streams one response per token when the request asks for it
 * (`streaming`/`stream`; without the flag: yes, unless the model declares `stream` as
 * Triton's vLLM and TensorRT-LLM models do); otherwise the whole text comes in one
 * response, after the prompt when the layout echoes it. As an LLM server it generates at
 * most `max_num_seqs` sequences at once (the rest wait, first come first served) and
 * reports the share of its `kv_cache_tokens` that the running sequences hold (prompt and
 * generated words): the load signals an endpoint picker reads.
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

/** The most stop sequences a request may give the mock (OpenAI takes 4, vLLM any number). */
export const MAX_STOP_SEQUENCES = 16;

export class MockerEngine implements Engine {
  private running = 0;
  /** Sequences waiting for a slot, in arrival order. */
  private readonly waiting: (() => void)[] = [];
  /** Tokens the running sequences hold in the (simulated) KV cache. */
  private cachedTokens = 0;

  constructor(private readonly settings: MockerSettings) {}

  load(): EngineLoad {
    const { kvCacheTokens } = this.settings;
    const load = { waiting: this.waiting.length, running: this.running };
    return kvCacheTokens > 0 ? { ...load, kvCacheUsage: Math.min(1, this.cachedTokens / kvCacheTokens) } : load;
  }

  async *infer(request: EngineRequest, { signal }: InferOptions): AsyncIterable<EngineResponse> {
    const { decoupled, layout } = this.settings;
    const llm = readLlmRequest(request, layout, decoupled);
    if (llm.streaming && !decoupled) {
      throw invalidArgument("streaming=true needs a decoupled model and the ModelStreamInfer RPC");
    }
    await this.slot(signal);
    let held = llm.prompt.split(/\s+/).filter(Boolean).length;
    this.cachedTokens += held;
    try {
      yield* this.generate(request, llm, signal, () => {
        held++;
        this.cachedTokens++;
      });
    } finally {
      this.cachedTokens -= held;
      this.running--;
      this.waiting.shift()?.();
    }
  }

  /** Waits for one of `max_num_seqs` sequence slots (at once when there is no limit). */
  private async slot(signal: AbortSignal): Promise<void> {
    const { maxNumSeqs } = this.settings;
    if (maxNumSeqs === 0 || (this.running < maxNumSeqs && this.waiting.length === 0)) {
      this.running++;
      return;
    }
    if (signal.aborted) throw abortedError(signal);
    await new Promise<void>((resolve, reject) => {
      const turn = (): void => {
        signal.removeEventListener("abort", leave);
        this.running++;
        resolve();
      };
      const leave = (): void => {
        this.waiting.splice(this.waiting.indexOf(turn), 1);
        reject(abortedError(signal));
      };
      this.waiting.push(turn);
      signal.addEventListener("abort", leave, { once: true });
    });
  }

  private async *generate(
    request: EngineRequest,
    llm: LlmRequest,
    signal: AbortSignal,
    tokenMade: () => void,
  ): AsyncIterable<EngineResponse> {
    const count = llm.sampling.max_tokens ?? this.settings.maxTokens;
    const seed = llm.sampling.seed ?? 0;
    const stops = (llm.sampling.stop ?? []).filter((stop) => stop !== "");
    // Each token is searched for every stop sequence: a bounded number of them.
    if (stops.length > MAX_STOP_SEQUENCES) {
      throw invalidArgument(`stop: at most ${MAX_STOP_SEQUENCES} stop sequences, got ${stops.length}`);
    }
    // What might be the start of a stop sequence waits for the next token: the last
    // (longest stop - 1) characters; a stop can only begin in the tail a token extends.
    const holdBack = stops.reduce((longest, stop) => Math.max(longest, stop.length - 1), 0);
    // Each token is made when its turn comes, in CPU slices: a long answer neither holds up
    // other requests nor goes on once the request is cancelled.
    const slices = new CpuSlices(signal);
    // Only the text not yet passed on is kept as one string (the held-back tail and the new
    // token) and searched: re-reading the whole answer per token made a long answer
    // quadratic (200,000 tokens: over 2 minutes). A whole answer is gathered in parts.
    let tail = "";
    const passed: string[] = [];
    for (let index = 0; index < count; index++) {
      const delay = index === 0 ? this.settings.ttftMs : this.settings.itlMs;
      if (delay > 0) await pause(delay, signal);
      else await slices.step();
      const token = wordFor(llm.prompt, seed, index);
      tokenMade();
      tail += index === 0 ? token : ` ${token}`;
      // A stop sequence ends the answer before it, as OpenAI's servers do.
      const stopAt = firstStop(tail, stops);
      if (stopAt !== undefined) tail = tail.slice(0, stopAt);
      const reason = stopAt !== undefined ? "stop" : index === count - 1 ? "length" : "";
      const upTo = reason !== "" ? tail.length : Math.max(0, tail.length - holdBack);
      const part = tail.slice(0, upTo);
      tail = tail.slice(upTo);
      if (llm.streaming) {
        if (part !== "" || reason !== "") {
          yield { outputs: llmOutputs([part], [reason], request.requestedOutputs, llm) };
        }
      } else {
        passed.push(part);
        if (reason !== "") {
          const text = passed.join("");
          const answer = llm.echoPrompt ? `${llm.prompt} ${text}` : text;
          yield { outputs: llmOutputs([answer], [reason], request.requestedOutputs, llm) };
        }
      }
      if (stopAt !== undefined) return;
    }
  }

  async close(): Promise<void> {}
}

/**
 * Where the first stop sequence in `text` starts, if one does. `text` is the held-back tail
 * and the new token: the tail held none (it was searched as each of its tokens came), so a
 * stop found is one the token completes.
 */
function firstStop(text: string, stops: readonly string[]): number | undefined {
  let first: number | undefined;
  for (const stop of stops) {
    const at = text.indexOf(stop);
    if (at >= 0 && (first === undefined || at < first)) first = at;
  }
  return first;
}

function wordFor(prompt: string, seed: number, index: number): string {
  const digest = createHash("sha256").update(`${seed}\u0000${prompt}\u0000${index}`).digest();
  return VOCABULARY[digest.readUInt32LE(0) % VOCABULARY.length]!;
}

import assert from "node:assert/strict";
import type { LlmLayout } from "../../../lib/engines/llm.js";
import type { EngineRequest } from "../../src/engines/engine.js";
import { MockerEngine } from "../../src/engines/mocker/mocker.js";
import { joinBytesElements, splitBytesElements } from "../../src/tensors/bytes.js";

/**
 * The mocker's token loop: what a long answer costs per token. Timings are compared within
 * one run (a ratio between two lengths), never against a fixed bound.
 */

const LAYOUT: LlmLayout = { streamOffByDefault: false, echoesPromptByDefault: false, finishReason: "always" };

const engine = (): MockerEngine =>
  new MockerEngine({
    ttftMs: 0,
    itlMs: 0,
    maxTokens: 16,
    maxNumSeqs: 0,
    kvCacheTokens: 0,
    decoupled: true,
    layout: LAYOUT,
  });

/** A request for `tokens` tokens, with a stop sequence no answer holds (each token is searched for it). */
const request = (tokens: number, streaming: boolean): EngineRequest => ({
  id: "",
  version: "1",
  parameters: {
    max_tokens: { parameterChoice: { $case: "int64Param", value: BigInt(tokens) } },
    stop: { parameterChoice: { $case: "stringParam", value: '["never said here"]' } },
  },
  inputs: [
    { name: "text_input", datatype: "BYTES", shape: [1], data: joinBytesElements([new TextEncoder().encode("hi")]) },
    { name: "stream", datatype: "BOOL", shape: [1], data: Uint8Array.of(streaming ? 1 : 0) },
  ],
  requestedOutputs: new Set(),
});

/** The answer's text (all responses joined) and the time it took, in ms. */
async function answer(tokens: number, streaming: boolean): Promise<{ text: string; ms: number }> {
  const started = performance.now();
  const parts: string[] = [];
  for await (const response of engine().infer(request(tokens, streaming), {
    signal: new AbortController().signal,
    deadline: Infinity,
    traceHeaders: {},
  })) {
    const output = response.outputs.find((tensor) => tensor.name === "text_output");
    assert.ok(output !== undefined);
    parts.push(...splitBytesElements(output.data).map((element) => new TextDecoder().decode(element)));
  }
  return { text: parts.join(""), ms: performance.now() - started };
}

describe("mocker: a long answer", function () {
  this.timeout(120_000);

  for (const streaming of [true, false]) {
    it(`${streaming ? "streams" : "answers"} 200,000 tokens in time about linear in their number (no re-reading of the whole text per token)`, async () => {
      const short = await answer(20_000, streaming);
      const long = await answer(200_000, streaming);
      assert.equal(long.text.split(" ").length, 200_000);
      assert.ok(long.text.startsWith(short.text));
      // Linear: ~10x. Re-reading the text per token (quadratic) made it ~100x.
      const ratio = long.ms / short.ms;
      assert.ok(
        ratio < 30,
        `200,000 tokens took ${Math.round(long.ms)} ms, 20,000 ${Math.round(short.ms)} ms: ${ratio.toFixed(1)}x`,
      );
    });
  }
});

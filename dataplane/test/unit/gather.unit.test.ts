import assert from "node:assert/strict";
import type { ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { DataPlaneError } from "../../../lib/errors.js";
import { ResponseGatherer } from "../../src/inference/gather.js";
import { joinBytesElements, splitBytesElements } from "../../src/tensors/bytes.js";

/** A response with one text output (an LLM's token) and one FP32 output of `floats` values. */
const response = (text: string, floats: number): ModelInferResponse => ({
  modelName: "m",
  modelVersion: "1",
  id: "",
  parameters: {},
  outputs: [
    { name: "text_output", datatype: "BYTES", shape: [1n], parameters: {}, contents: undefined },
    { name: "scores", datatype: "FP32", shape: [BigInt(floats)], parameters: {}, contents: undefined },
  ],
  rawOutputContents: [joinBytesElements([new TextEncoder().encode(text)]), new Uint8Array(floats * 4)],
});

describe("ResponseGatherer: one reply from a decoupled model's responses", () => {
  it("holds the texts appended and the latest other output, within the limit", () => {
    // Each response: 3 bytes of text, 400 bytes of scores (replaced, not added up).
    const gatherer = new ResponseGatherer(1000, "m");
    for (let index = 0; index < 100; index++) gatherer.add(response("ab ", 100));
    const result = gatherer.result()!;
    assert.equal(new TextDecoder().decode(splitBytesElements(result.rawOutputContents[0]!)[0]), "ab ".repeat(100));
    assert.equal(result.rawOutputContents[1]!.length, 400);
  });

  it("fails RESOURCE_EXHAUSTED, naming the model and the limit, once what it holds passes the limit", () => {
    const gatherer = new ResponseGatherer(1000, "llm");
    let added = 0;
    assert.throws(
      () => {
        for (; added < 1000; added++) gatherer.add(response("abcd", 1));
      },
      (error: unknown) =>
        error instanceof DataPlaneError &&
        error.kind === "ResourceExhausted" &&
        /model 'llm'.*exceed the limit of 1000 bytes \(--max-message-size\)/.test(error.message),
    );
    // 4 bytes of text each and the latest 4 bytes of scores: past 1000 at the 250th.
    assert.equal(added, 249);
  });
});

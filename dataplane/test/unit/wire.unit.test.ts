import assert from "node:assert/strict";
import { ModelInferRequest, ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { encodeInferResponse, encodeStreamInferResponse } from "../../src/server/reply-encoding.js";
import { encodeInferRequest, streamReplyParts, withModel, withStreamReplyModel } from "../../src/tensors/wire.js";

const request = (modelName: string, modelVersion: string): ModelInferRequest => ({
  modelName,
  modelVersion,
  id: "r1",
  parameters: { sequence_id: { parameterChoice: { $case: "int64Param", value: 7n } } },
  inputs: [{ name: "INPUT0", datatype: "FP32", shape: [1n, 300n], parameters: {}, contents: undefined }],
  outputs: [{ name: "OUTPUT0", parameters: {} }],
  rawInputContents: [new Uint8Array(1200).fill(3)],
});

const encode = (message: ModelInferRequest): Uint8Array => ModelInferRequest.encode(message).finish();

/** Field 99 (tag 794 as a varint, length-delimited "abc"): unknown to the generated code, which drops it. */
const UNKNOWN_FIELD = Uint8Array.of(0x9a, 0x06, 3, 0x61, 0x62, 0x63);
const withUnknown = (bytes: Uint8Array): Uint8Array => Buffer.concat([bytes, UNKNOWN_FIELD]);

describe("KServe messages forwarded as bytes", () => {
  it("renames the model and version, everything else as it came, unknown fields included", () => {
    const original = withUnknown(encode(request("ours", "3")));
    const renamed = withModel(original, "theirs", "");
    const decoded = ModelInferRequest.decode(renamed);
    assert.deepEqual(decoded, { ...request("theirs", ""), rawInputContents: decoded.rawInputContents });
    assert.ok(Buffer.from(decoded.rawInputContents[0]!).equals(Buffer.alloc(1200, 3)));
    assert.ok(Buffer.from(renamed).subarray(-UNKNOWN_FIELD.byteLength).equals(UNKNOWN_FIELD));
    // Back again: byte for byte what the generated encoder writes, then the unknown field.
    assert.ok(Buffer.from(withModel(renamed, "ours", "3")).equals(original));
  });

  it("encodes a request byte for byte as the generated encoder does, whatever the tensors' sizes", () => {
    for (const sizes of [[], [0], [4], [124, 128], [16_388], [2_097_156]]) {
      const message = {
        ...request("m", "1"),
        rawInputContents: sizes.map((size, i) => new Uint8Array(size).fill(i + 1)),
      };
      assert.ok(encodeInferRequest(message).equals(encode(message)), `raw sizes ${sizes.join(", ")}`);
    }
  });

  it("gives back the very same bytes when the names already match", () => {
    const original = encode(request("same", "1"));
    assert.equal(withModel(original, "same", "1"), original);
    const unversioned = encode(request("same", ""));
    assert.equal(withModel(unversioned, "same", ""), unversioned);
  });

  it("renames a reply too, and takes a name given twice as its last", () => {
    const reply: ModelInferResponse = {
      modelName: "upstream",
      modelVersion: "2",
      id: "x",
      parameters: {},
      outputs: [],
      rawOutputContents: [new Uint8Array(200_000).fill(9)],
    };
    const twice = Buffer.concat([ModelInferResponse.encode(reply).finish(), Uint8Array.of(0x0a, 1, 0x7a)]);
    assert.equal(ModelInferResponse.decode(twice).modelName, "z");
    const renamed = ModelInferResponse.decode(withModel(twice, "ours", "1"));
    assert.deepEqual(
      { ...renamed, rawOutputContents: [] },
      { ...reply, modelName: "ours", modelVersion: "1", rawOutputContents: [] },
    );
    assert.equal(renamed.rawOutputContents[0]?.byteLength, 200_000);
  });

  it("does not take the head's names for the message's when a later field names the model again (the last counts)", () => {
    const original = encode(request("same", "1"));
    const renamedLater = Buffer.concat([original, Uint8Array.of(0x0a, 1, 0x7a)]);
    assert.equal(ModelInferRequest.decode(withModel(renamedLater, "same", "1")).modelName, "same");
    const versionedLater = Buffer.concat([original, Uint8Array.of(0x12, 1, 0x39)]);
    assert.equal(ModelInferRequest.decode(withModel(versionedLater, "same", "1")).modelVersion, "1");
    const fixed64 = Buffer.concat([original, Uint8Array.of((15 << 3) | 1, 1, 2, 3, 4, 5, 6, 7, 8)]);
    assert.equal(withModel(fixed64, "same", "1"), fixed64, "other wire types are stepped over");
  });

  it("keeps the message's own version when none is asked for", () => {
    const original = encode(request("upstream", "7"));
    const renamed = ModelInferRequest.decode(withModel(original, "ours"));
    assert.deepEqual([renamed.modelName, renamed.modelVersion], ["ours", "7"]);
    const named = encode(request("ours", "7"));
    assert.equal(withModel(named, "ours"), named);
  });

  it("renames a stream reply inside its infer_response, and leaves an error reply as it is", () => {
    const inner = ModelInferResponse.fromPartial({ modelName: "upstream", modelVersion: "2", id: "s" });
    const bytes = ModelStreamInferResponse.encode({ errorMessage: "", inferResponse: inner }).finish();
    const renamed = ModelStreamInferResponse.decode(withStreamReplyModel(bytes, "ours", "1"));
    assert.deepEqual(renamed.inferResponse, { ...inner, modelName: "ours", modelVersion: "1" });
    const same = ModelStreamInferResponse.encode({
      errorMessage: "",
      inferResponse: { ...inner, modelName: "ours" },
    }).finish();
    assert.equal(withStreamReplyModel(same, "ours"), same);
    const failed = ModelStreamInferResponse.encode({ errorMessage: "boom", inferResponse: undefined }).finish();
    assert.equal(withStreamReplyModel(failed, "ours", "1"), failed);
  });

  it("reads a stream reply's error message and response without copying the response", () => {
    const inner: ModelInferResponse = {
      modelName: "m",
      modelVersion: "1",
      id: "s",
      parameters: {},
      outputs: [],
      rawOutputContents: [new Uint8Array(64).fill(1)],
    };
    const bytes = ModelStreamInferResponse.encode({ errorMessage: "", inferResponse: inner }).finish();
    const parts = streamReplyParts(bytes);
    assert.equal(parts.errorMessage, "");
    assert.equal(parts.inferResponse?.buffer, bytes.buffer, "a view of the received message");
    assert.deepEqual(ModelInferResponse.decode(parts.inferResponse!), inner);
    const failed = streamReplyParts(
      ModelStreamInferResponse.encode({ errorMessage: "model 'm' failed: é", inferResponse: undefined }).finish(),
    );
    assert.deepEqual(failed, { errorMessage: "model 'm' failed: é", inferResponse: undefined });
  });

  it("skips groups, and refuses a message that runs past its end", () => {
    // Field 5 as a group holding a varint field, then field 1 (the name).
    const grouped = Uint8Array.of((5 << 3) | 3, 0x08, 0x01, (5 << 3) | 4, 0x0a, 1, 0x61);
    assert.equal(ModelInferRequest.decode(withModel(grouped, "b", "")).modelName, "b");
    assert.throws(() => withModel(Uint8Array.of(0x0a, 5, 0x61), "b", ""), /runs past the message's end/);
  });

  it("sends an encoded reply as it is, and wraps it once in a stream reply", () => {
    const encoded = withUnknown(ModelInferResponse.encode({ ...ModelInferResponse.fromPartial({ id: "e" }) }).finish());
    assert.ok(Buffer.concat([encodeInferResponse({ encoded })].flat()).equals(encoded));
    const streamed = Buffer.concat(
      [encodeStreamInferResponse({ errorMessage: "", inferResponse: { encoded } })].flat(),
    );
    assert.ok(Buffer.from(streamReplyParts(streamed).inferResponse!).equals(encoded));
  });
});

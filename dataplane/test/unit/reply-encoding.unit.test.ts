import assert from "node:assert/strict";
import { ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import {
  encodeInferResponse,
  encodeStreamInferResponse,
  type SerializedMessage,
} from "../../src/server/reply-encoding.js";
import { VIEWED_TENSOR_BYTES } from "../../src/tensors/wire.js";

/** The message grpc-js sends: the parts joined. */
const joined = (message: SerializedMessage): Buffer => (Array.isArray(message) ? Buffer.concat(message) : message);

function reply(rawSizes: readonly number[]): ModelInferResponse {
  return {
    modelName: "identity_fp32",
    modelVersion: "1",
    id: "req-7",
    parameters: { sequence_id: { parameterChoice: { $case: "int64Param", value: 42n } } },
    outputs: rawSizes.map((size, i) => ({
      name: `OUTPUT${i}`,
      datatype: "FP32",
      shape: [1n, BigInt(size / 4)],
      parameters: {},
      contents: undefined,
    })),
    rawOutputContents: rawSizes.map((size, i) => new Uint8Array(size).fill(i + 1)),
  };
}

describe("inference replies encoded with large tensors as views, the rest copied once", () => {
  // Sizes around each varint width of the length prefix: 1, 2, 3 and 4 bytes.
  const cases = [
    [],
    [0],
    [4],
    [124, 128],
    [16_380, 16_388],
    [VIEWED_TENSOR_BYTES - 4, VIEWED_TENSOR_BYTES, 8, VIEWED_TENSOR_BYTES + 4],
    [2_097_148, 2_097_156],
    [16 * 1024 * 1024],
  ];

  it("ModelInfer: byte for byte what the generated encoder writes", () => {
    for (const sizes of cases) {
      const response = reply(sizes);
      const expected = Buffer.from(ModelInferResponse.encode(response).finish());
      assert.ok(joined(encodeInferResponse(response)).equals(expected), `raw sizes ${sizes.join(", ")}`);
    }
  });

  it("ModelStreamInfer: a reply, and an error message, as the generated encoder writes them", () => {
    for (const sizes of cases) {
      const streamed = { errorMessage: "", inferResponse: reply(sizes) };
      const expected = Buffer.from(ModelStreamInferResponse.encode(streamed).finish());
      assert.ok(joined(encodeStreamInferResponse(streamed)).equals(expected), `raw sizes ${sizes.join(", ")}`);
    }
    const failed = { errorMessage: "model 'x' is not ready", inferResponse: undefined };
    assert.deepEqual(ModelStreamInferResponse.decode(joined(encodeStreamInferResponse(failed))), failed);
  });

  it("a large tensor is sent as a view of its own bytes, a small one copied into the message", () => {
    for (const encode of [
      (response: ModelInferResponse) => encodeInferResponse(response),
      (response: ModelInferResponse) => encodeStreamInferResponse({ errorMessage: "", inferResponse: response }),
    ]) {
      const response = reply([VIEWED_TENSOR_BYTES, 4, 1024 * 1024]);
      const parts = encode(response);
      assert.ok(Array.isArray(parts));
      const [large, small, mib] = response.rawOutputContents;
      const sharing = (tensor: Uint8Array) => parts.filter((part) => part.buffer === tensor.buffer);
      assert.deepEqual(
        sharing(large!).map((part) => [part.byteOffset, part.byteLength]),
        [[large!.byteOffset, large!.byteLength]],
      );
      assert.deepEqual(sharing(mib!).length, 1);
      assert.deepEqual(sharing(small!).length, 0);
      // Small replies stay one buffer.
      assert.ok(Buffer.isBuffer(encode(reply([4, VIEWED_TENSOR_BYTES - 4]))));
    }
  });
});

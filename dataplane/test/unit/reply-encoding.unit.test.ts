import assert from "node:assert/strict";
import { ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { encodeInferResponse, encodeStreamInferResponse } from "../../src/server/reply-encoding.js";

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

describe("inference replies encoded with one copy of the tensor bytes", () => {
  // Sizes around each varint width of the length prefix: 1, 2, 3 and 4 bytes.
  const cases = [[], [0], [4], [124, 128], [16_380, 16_388], [2_097_148, 2_097_156], [16 * 1024 * 1024]];

  it("ModelInfer: byte for byte what the generated encoder writes", () => {
    for (const sizes of cases) {
      const response = reply(sizes);
      const expected = Buffer.from(ModelInferResponse.encode(response).finish());
      assert.ok(encodeInferResponse(response).equals(expected), `raw sizes ${sizes.join(", ")}`);
    }
  });

  it("ModelStreamInfer: a reply, and an error message, as the generated encoder writes them", () => {
    for (const sizes of cases) {
      const streamed = { errorMessage: "", inferResponse: reply(sizes) };
      const expected = Buffer.from(ModelStreamInferResponse.encode(streamed).finish());
      assert.ok(encodeStreamInferResponse(streamed).equals(expected), `raw sizes ${sizes.join(", ")}`);
    }
    const failed = { errorMessage: "model 'x' is not ready", inferResponse: undefined };
    assert.deepEqual(ModelStreamInferResponse.decode(encodeStreamInferResponse(failed)), failed);
  });
});

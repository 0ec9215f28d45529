import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import type { ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { callError, infer, inferRequest, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

const MISSING_FILE = `
name: "onnx_missing"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`;

const fp32 = (...values: number[]): Uint8Array => new Uint8Array(Float32Array.from(values).buffer);
const valuesOf = (reply: ModelInferResponse, name: string): number[] => {
  const index = reply.outputs.findIndex((output) => output.name === name);
  return [...new Float32Array(new Uint8Array(reply.rawOutputContents[index]!).buffer)];
};

describe("onnx engine (onnxruntime-node, in-process)", function () {
  this.timeout(20_000);
  const serving = useServer({ onnx_missing: MISSING_FILE });
  let server: ServerProcess;
  before(() => ({ server } = serving));

  const request = (batch: number, outputs: string[] = []) =>
    inferRequest({
      modelName: "add_sub_onnx",
      inputs: ["INPUT0", "INPUT1"].map((name) => ({
        name,
        datatype: "FP32",
        shape: [BigInt(batch), 4n],
        parameters: {},
        contents: undefined,
      })),
      outputs: outputs.map((name) => ({ name, parameters: {} })),
      rawInputContents: [
        fp32(...Array.from({ length: 4 * batch }, (_, i) => i)),
        fp32(...Array.from({ length: 4 * batch }, () => 1)),
      ],
    });

  it("runs the bundled add_sub_onnx model, batched", async () => {
    const reply = await infer(server.client, request(2));
    assert.deepEqual(valuesOf(reply, "OUTPUT0"), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(valuesOf(reply, "OUTPUT1"), [-1, 0, 1, 2, 3, 4, 5, 6]);
    assert.deepEqual(reply.outputs[0]?.shape, [2n, 4n]);
  });

  it("computes only the requested outputs", async () => {
    const reply = await infer(server.client, request(1, ["OUTPUT1"]));
    assert.deepEqual(
      reply.outputs.map((output) => output.name),
      ["OUTPUT1"],
    );
    assert.deepEqual(valuesOf(reply, "OUTPUT1"), [-1, 0, 1, 2]);
  });

  it("answers UNAVAILABLE naming the file when the model file is missing", async () => {
    const error = await callError(server.client, "modelInfer", {
      ...request(1),
      modelName: "onnx_missing",
      inputs: request(1).inputs.slice(0, 1),
      rawInputContents: request(1).rawInputContents.slice(0, 1),
    });
    assert.equal(error.code, status.UNAVAILABLE);
    assert.match(error.details, /cannot load ONNX model .*onnx_missing\/1\/model\.onnx/);
  });
});

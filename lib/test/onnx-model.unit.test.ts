import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readOnnxTensors } from "../model-repository/onnx-model.js";

const ADD_SUB = fileURLToPath(new URL("../../../examples/model_repository/add_sub_onnx/1/model.onnx", import.meta.url));

describe("reading a model.onnx's tensors without onnxruntime (lib/model-repository/onnx-model.ts)", () => {
  it("reads names, KServe datatypes and shapes (a symbolic dimension is -1)", async () => {
    const { inputs, outputs } = await readOnnxTensors(ADD_SUB);
    const described = (tensors: typeof inputs) => tensors.map(({ name, datatype, dims }) => ({ name, datatype, dims }));
    assert.deepEqual(described(inputs), [
      { name: "INPUT0", datatype: "FP32", dims: [-1, 4] },
      { name: "INPUT1", datatype: "FP32", dims: [-1, 4] },
    ]);
    assert.deepEqual(
      outputs.map((tensor) => tensor.name),
      ["OUTPUT0", "OUTPUT1"],
    );
  });

  it("says which file it cannot read, and why", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-onnx-"));
    try {
      writeFileSync(join(dir, "model.onnx"), "not an onnx model");
      await assert.rejects(
        readOnnxTensors(join(dir, "model.onnx")),
        /model\.onnx: cannot read the ONNX model to auto-complete its config/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

import assert from "node:assert/strict";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { ONNX_TEST_MODELS } from "../fixtures/onnx-models.js";
import { infer, inferRequest } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

/**
 * sequence_batching on the engines besides python: an ONNX model whose graph takes the
 * control inputs (sequence_controls.onnx answers each row with what it was given) and the
 * identity backend, both Direct with two slots, so that a request alone in slot 1 runs
 * beside a null request in slot 0.
 */

const CONTROLS = `
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]`;

/** A Direct sequence model of two slots on `engine` (its config line) that answers OUTPUT of `outputDims`. */
const sequenceModel = (name: string, engine: string, outputDims: number): string => `
name: "${name}"
${engine}
max_batch_size: 2
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ ${outputDims} ] } ]
sequence_batching { max_sequence_idle_microseconds: 60000000 ${CONTROLS} }
`;

const ONNX_SEQUENCE = sequenceModel("onnx_sequence", 'platform: "onnxruntime_onnx"', 5);

/** The same model with START also declared as an input: the client sends it, the model sees the control's value. */
const ONNX_DECLARED_CONTROL = ONNX_SEQUENCE.replace('"onnx_sequence"', '"onnx_declared_control"').replace(
  'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]',
  'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "START" data_type: TYPE_INT32 dims: [ 1 ] } ]',
);

/** With a warmup sample that feeds the controls, as the graph needs them (Triton takes them as override inputs). */
const ONNX_WARMED = ONNX_SEQUENCE.replace('"onnx_sequence"', '"onnx_warmed"').concat(`
model_warmup [ {
  name: "controls"
  batch_size: 1
  inputs { key: "INPUT" value: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } }
  inputs { key: "START" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } }
  inputs { key: "END" value: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } }
  inputs { key: "READY" value: { data_type: TYPE_BOOL dims: [ 1 ] zero_data: true } }
  inputs { key: "CORRID" value: { data_type: TYPE_UINT64 dims: [ 1 ] zero_data: true } }
} ]
`);

const IDENTITY_SEQUENCE = sequenceModel("identity_sequence", 'backend: "identity"', 1);

const flag = (value: boolean): InferParameter => ({ parameterChoice: { $case: "boolParam", value } });

function sequenceRequest(
  model: string,
  id: number,
  input: number,
  { start = false, end = false, clientStart }: { start?: boolean; end?: boolean; clientStart?: number } = {},
): ModelInferRequest {
  const parameters: Record<string, InferParameter> = {
    sequence_id: { parameterChoice: { $case: "int64Param", value: BigInt(id) } },
  };
  if (start) parameters["sequence_start"] = flag(true);
  if (end) parameters["sequence_end"] = flag(true);
  const inputs: ModelInferRequest["inputs"] = [
    { name: "INPUT", datatype: "FP32", shape: [1n, 1n], parameters: {}, contents: undefined },
  ];
  const raw = [new Uint8Array(new Float32Array([input]).buffer)];
  if (clientStart !== undefined) {
    inputs.push({ name: "START", datatype: "INT32", shape: [1n, 1n], parameters: {}, contents: undefined });
    raw.push(new Uint8Array(new Int32Array([clientStart]).buffer));
  }
  return inferRequest({ modelName: model, parameters, inputs, rawInputContents: raw });
}

const floats = (reply: ModelInferResponse): number[] => {
  const raw = reply.rawOutputContents[0]!;
  return [...new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength))];
};

describe("sequence batching on the onnxruntime and identity engines", function () {
  this.timeout(60_000);
  const serving = useServer(
    {
      onnx_sequence: ONNX_SEQUENCE,
      onnx_declared_control: ONNX_DECLARED_CONTROL,
      onnx_warmed: ONNX_WARMED,
      identity_sequence: IDENTITY_SEQUENCE,
    },
    [],
    (repository) => {
      for (const name of ["onnx_sequence", "onnx_declared_control", "onnx_warmed"]) {
        mkdirSync(repository.path(name, "1"), { recursive: true });
        copyFileSync(join(ONNX_TEST_MODELS, "sequence_controls.onnx"), repository.path(name, "1", "model.onnx"));
      }
    },
  );
  const send = async (
    model: string,
    ...args: Parameters<typeof sequenceRequest> extends [string, ...infer R] ? R : never
  ) => infer(serving.server.client, sequenceRequest(model, ...args));

  it("onnxruntime: the model's graph gets the controls; a request beside a null request gets its own row", async () => {
    // Sequence 11 takes slot 0, sequence 22 slot 1.
    assert.deepEqual(floats(await send("onnx_sequence", 11, 1.5, { start: true })), [1.5, 1, 0, 1, 11]);
    assert.deepEqual(floats(await send("onnx_sequence", 22, 2.5, { start: true })), [2.5, 1, 0, 1, 22]);
    // Alone in slot 1: slot 0 is a null request (READY false) in the same run.
    assert.deepEqual(floats(await send("onnx_sequence", 22, 3.5)), [3.5, 0, 0, 1, 22]);
    assert.deepEqual(floats(await send("onnx_sequence", 22, 4.5, { end: true })), [4.5, 0, 1, 1, 22]);
    const both = await Promise.all([
      send("onnx_sequence", 11, 5.5, { end: true }),
      send("onnx_sequence", 33, 6.5, { start: true, end: true }),
    ]);
    assert.deepEqual(both.map(floats), [
      [5.5, 0, 1, 1, 11],
      [6.5, 1, 1, 1, 33],
    ]);
  });

  it("onnxruntime: a control the config also declares as an input reaches the model once, with the control's value", async () => {
    assert.deepEqual(
      floats(await send("onnx_declared_control", 44, 1, { start: true, clientStart: 7 })),
      [1, 1, 0, 1, 44],
    );
    // Alone in slot 1 beside a null request (the client's START is not the model's either).
    await send("onnx_declared_control", 55, 2, { start: true, clientStart: 7 });
    assert.deepEqual(
      floats(await send("onnx_declared_control", 55, 3, { end: true, clientStart: 7 })),
      [3, 0, 1, 1, 55],
    );
  });

  it("onnxruntime: a model_warmup sample that feeds the control inputs warms the model, which then serves", async () => {
    assert.deepEqual(floats(await send("onnx_warmed", 66, 1, { start: true, end: true })), [1, 1, 1, 1, 66]);
  });

  it("identity: answers each request of a sequence, a null request's answer dropped", async () => {
    assert.deepEqual(floats(await send("identity_sequence", 1, 10, { start: true })), [10]);
    assert.deepEqual(floats(await send("identity_sequence", 2, 20, { start: true })), [20]);
    assert.deepEqual(floats(await send("identity_sequence", 2, 21, { end: true })), [21]);
    assert.deepEqual(floats(await send("identity_sequence", 1, 11, { end: true })), [11]);
  });
});

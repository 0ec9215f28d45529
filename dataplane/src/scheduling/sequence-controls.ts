import { invalidArgument } from "../../../lib/errors.js";
import { DATATYPES } from "../../../lib/model-repository/datatypes.js";
import {
  controlNames,
  type BoolControl,
  type SequenceBatching,
} from "../../../lib/model-repository/sequence-batching.js";
import type { EngineRequest } from "../engines/engine.js";
import { joinBytesElements } from "../tensors/bytes.js";
import type { SequenceId, SequenceRequest } from "../tensors/parameters.js";
import { elementCount, type Tensor } from "../tensors/tensor.js";

/**
 * sequence_batching's control tensors (Triton's SequenceBatch::SetControlTensors): the
 * model is told of a request's place in its sequence by inputs the config names
 * (CONTROL_SEQUENCE_START, _END, _READY, _CORRID), added after the client's in that order;
 * and the null requests the Direct strategy pads a batch with (Triton's CopyAsNull).
 */

/** What the controls say of one request. */
interface ControlValues {
  readonly start: boolean;
  readonly end: boolean;
  readonly ready: boolean;
  /** Undefined for a null request (CORRID 0, or "" for a BYTES one). */
  readonly id: SequenceId | undefined;
}

/**
 * The CORRID control's type against the request's correlation ID (Triton's ValidateCorrelationId):
 * a string ID needs TYPE_STRING, an integer one an integer type. INVALID_ARGUMENT in Triton's words.
 */
export function checkCorrelationIdType(
  batching: SequenceBatching,
  model: string,
  requestId: string,
  id: SequenceId,
): void {
  const corrid = batching.controls.corrid;
  if (corrid === undefined) return;
  const given = id.kind === "string" ? "BYTES" : "UINT64";
  if ((id.kind === "string") === (corrid.datatype === "BYTES")) return;
  throw invalidArgument(
    `[request id: ${requestId || "<id_unknown>"}] sequence batching control '${corrid.name}' data-type is '${given}', but model '${model}' expects '${corrid.datatype}'`,
  );
}

/**
 * A real request of a sequence, its controls added: START/END as its flags, READY true, CORRID
 * its ID. A client input of a control's name (the config declares it in `input` too) is
 * replaced by the control, as Triton's override inputs replace it: the model sees one tensor.
 */
export function withControls(
  request: EngineRequest,
  batching: SequenceBatching,
  batched: boolean,
  sequence: SequenceRequest,
): EngineRequest {
  const controls = controlTensors(batching, batched, { ...sequence, ready: true });
  if (controls.length === 0) return request;
  const names = controlNames(batching);
  return { ...request, inputs: [...request.inputs.filter((input) => !names.has(input.name)), ...controls] };
}

/**
 * A null request shaped as `like` (a request of the batch): its inputs zero-filled (BYTES:
 * empty strings), its controls "not ready" (all false, CORRID 0), no parameters, no ID. It
 * keeps a slot's place in a Direct batch; its responses are dropped.
 */
export function nullRequest(like: EngineRequest, batching: SequenceBatching, batched: boolean): EngineRequest {
  const names = controlNames(batching);
  const inputs = like.inputs.filter((input) => !names.has(input.name)).map(zeroFilled);
  const controls = controlTensors(batching, batched, { start: false, end: false, ready: false, id: undefined });
  return {
    id: "",
    version: like.version,
    parameters: {},
    inputs: [...inputs, ...controls],
    requestedOutputs: new Set(),
  };
}

function zeroFilled(tensor: Tensor): Tensor {
  const { name, datatype, shape } = tensor;
  // A BYTES element is its 4-byte length: zero bytes are that many empty strings.
  const bytes = datatype === "BYTES" ? 4 * elementCount(shape) : tensor.data.byteLength;
  return { name, datatype, shape, data: new Uint8Array(bytes) };
}

function controlTensors(batching: SequenceBatching, batched: boolean, values: ControlValues): Tensor[] {
  const { start, end, ready, corrid } = batching.controls;
  // One element per request: [1], or [1, 1] with the batch dimension.
  const shape = batched ? [1, 1] : [1];
  const tensors: Tensor[] = [];
  if (start !== undefined) tensors.push(boolTensor(start, values.start, shape));
  if (end !== undefined) tensors.push(boolTensor(end, values.end, shape));
  if (ready !== undefined) tensors.push(boolTensor(ready, values.ready, shape));
  if (corrid !== undefined) {
    tensors.push({ name: corrid.name, datatype: corrid.datatype, shape, data: idBytes(corrid.datatype, values.id) });
  }
  return tensors;
}

function boolTensor(control: BoolControl, on: boolean, shape: readonly number[]): Tensor {
  const value = on ? control.trueValue : control.falseValue;
  const data = new Uint8Array(DATATYPES[control.datatype].byteSize);
  const view = new DataView(data.buffer);
  if (control.datatype === "INT32") view.setInt32(0, Number(value), true);
  else if (control.datatype === "FP32") view.setFloat32(0, Number(value), true);
  else data[0] = value === true || (typeof value === "number" && value !== 0) ? 1 : 0;
  return { name: control.name, datatype: control.datatype, shape, data };
}

/** The correlation ID as the CORRID tensor holds it: its low bytes, little-endian, or one BYTES element. */
function idBytes(datatype: string, id: SequenceId | undefined): Uint8Array {
  if (datatype === "BYTES") {
    const text = id?.kind === "string" ? id.value : "";
    return joinBytesElements([new TextEncoder().encode(text)]);
  }
  const value = id?.kind === "uint" ? id.value : 0n;
  const data = new Uint8Array(datatype === "UINT32" || datatype === "INT32" ? 4 : 8);
  const view = new DataView(data.buffer);
  if (data.byteLength === 4) view.setUint32(0, Number(BigInt.asUintN(32, value)), true);
  else view.setBigUint64(0, value, true);
  return data;
}

import type { BatchInputSpec } from "../../../../lib/engines/onnx.js";
import { internal } from "../../../../lib/errors.js";
import { elementCount, type Tensor } from "../../tensors/tensor.js";
import type { EngineRequest } from "../engine.js";

/**
 * The requests of one execution as one model run, the way Triton's onnxruntime backend forms
 * it: every input joined along its first (batch) dimension, a ragged input flattened into
 * one dimension of every request's elements, the config's batch inputs made from the
 * requests; and each output split back by the requests' batch sizes. A batch of one request
 * joins nothing: its tensors are given as they are (a ragged input only takes its flat shape).
 */

/** A joined input: its name, datatype and shape for the model, and its bytes (raw form). */
export type JoinedInput = Tensor;

/** How a batch is laid out: each request's batch size, in order, and their total. */
export interface BatchLayout {
  readonly batchSizes: readonly number[];
  readonly total: number;
}

/** The batch size of a request to a batching model: the first dimension its inputs share (1 with none). */
export function batchSizeOf(request: EngineRequest): number {
  return request.inputs[0]?.shape[0] ?? 1;
}

export function layoutOf(requests: readonly EngineRequest[], batched: boolean): BatchLayout {
  const batchSizes = requests.map((request) => (batched ? batchSizeOf(request) : 1));
  return { batchSizes, total: batchSizes.reduce((sum, size) => sum + size, 0) };
}

/**
 * The model's inputs for the requests: each input joined (requests must give the same
 * inputs, of the same shape past the batch dimension unless ragged: the scheduler forms
 * batches so; a batch that breaks it is the execution's error, never a wrong join).
 */
export function joinInputs(requests: readonly EngineRequest[], ragged: ReadonlySet<string>): JoinedInput[] {
  const [first, ...rest] = requests;
  if (first === undefined) return [];
  const joined: JoinedInput[] = [];
  for (const input of first.inputs) {
    const parts = [input, ...rest.map((request) => inputOf(request, input.name))];
    joined.push(ragged.has(input.name) ? flattened(parts) : stacked(parts));
  }
  for (const request of rest) {
    if (request.inputs.length !== first.inputs.length) {
      const extra = request.inputs.find((input) => !first.inputs.some((given) => given.name === input.name));
      throw internal(`input '${extra?.name ?? "?"}' is given by some requests of the batch and not others`);
    }
  }
  return joined;
}

function inputOf(request: EngineRequest, name: string): Tensor {
  const input = request.inputs.find((candidate) => candidate.name === name);
  if (input === undefined) throw internal(`input '${name}' is given by some requests of the batch and not others`);
  return input;
}

/** A ragged input: every request's elements, one after the other, as one dimension. */
function flattened(parts: readonly Tensor[]): Tensor {
  const elements = parts.reduce((sum, part) => sum + elementCount(part.shape), 0);
  return { name: parts[0]!.name, datatype: parts[0]!.datatype, shape: [elements], data: concatenated(parts) };
}

/** Inputs of equal shapes past the batch dimension, joined along it. */
function stacked(parts: readonly Tensor[]): Tensor {
  const [first] = parts;
  if (parts.length === 1) return first!;
  const item = first!.shape.slice(1);
  let rows = 0;
  for (const part of parts) {
    const partItem = part.shape.slice(1);
    if (partItem.length !== item.length || partItem.some((dim, index) => dim !== item[index])) {
      throw internal(
        `input '${first!.name}': requests of shapes [${first!.shape.join(", ")}] and [${part.shape.join(", ")}] cannot be joined in one batch`,
      );
    }
    rows += part.shape[0] ?? 1;
  }
  return { name: first!.name, datatype: first!.datatype, shape: [rows, ...item], data: concatenated(parts) };
}

/** The parts' bytes in one buffer of its own (aligned, as onnxruntime's typed arrays need); one part is not copied. */
function concatenated(parts: readonly Tensor[]): Uint8Array {
  if (parts.length === 1) return parts[0]!.data;
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.data.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    bytes.set(part.data, offset);
    offset += part.data.byteLength;
  }
  return bytes;
}

/** A batch input's values and shape (Triton's backend input collector's definitions). */
export interface BatchInputValues {
  readonly shape: readonly number[];
  readonly values: readonly number[];
}

/**
 * The values `spec` makes from the requests' source input: per request, the element count of
 * its whole tensor (batch dimension included), accumulated or not; the largest count, as a
 * shape only (the data is zeros: Triton leaves it uninitialized); or each batch item's shape.
 */
export function batchInputValues(spec: BatchInputSpec, requests: readonly EngineRequest[]): BatchInputValues {
  const sources = requests.map((request) => inputOf(request, spec.sourceInput).shape);
  const counts = sources.map((shape) => elementCount(shape));
  switch (spec.kind) {
    case "BATCH_ELEMENT_COUNT":
      return { shape: [counts.length], values: counts };
    case "BATCH_ACCUMULATED_ELEMENT_COUNT":
      return { shape: [counts.length], values: accumulated(counts) };
    case "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO":
      return { shape: [counts.length + 1], values: [0, ...accumulated(counts)] };
    case "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE": {
      const largest = Math.max(0, ...counts);
      return { shape: [largest], values: new Array<number>(largest).fill(0) };
    }
    case "BATCH_ITEM_SHAPE":
    case "BATCH_ITEM_SHAPE_FLATTEN": {
      // One row per batch item: the item's shape without the batch dimension.
      const rows = sources.flatMap((shape) => new Array<readonly number[]>(shape[0] ?? 1).fill(shape.slice(1)));
      const rank = rows[0]?.length ?? 0;
      const values = rows.flat();
      return { shape: spec.kind === "BATCH_ITEM_SHAPE" ? [rows.length, rank] : [values.length], values };
    }
  }
}

function accumulated(counts: readonly number[]): number[] {
  let sum = 0;
  return counts.map((count) => (sum += count));
}

/** One output of the run, as onnxruntime gave it: its shape and its elements' rows to split. */
export interface RunOutput {
  readonly name: string;
  readonly shape: readonly number[];
}

/**
 * The first row of each request in an output of the batch, checked: an output whose first
 * dimension is not the batch's is the execution's error (naming the output), never a wrong slice.
 */
export function rowOffsets(output: RunOutput, layout: BatchLayout): number[] {
  if (output.shape[0] !== layout.total) {
    throw internal(
      `output '${output.name}' has shape [${output.shape.join(", ")}]: its first dimension is not the batch size ${layout.total} (a model that batches answers one row per batch item)`,
    );
  }
  let row = 0;
  return layout.batchSizes.map((size) => {
    const first = row;
    row += size;
    return first;
  });
}

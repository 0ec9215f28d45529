import type {
  InferParameter,
  ModelInferRequest,
  ModelInferRequest_InferInputTensor,
  ModelInferResponse_InferOutputTensor,
} from "../../../proto/gen/ts/grpc_service.js";
import { internal, invalidArgument } from "../../../lib/errors.js";
import { countBytesElements } from "./bytes.js";
import { DATATYPES, isDatatype, type Datatype } from "../../../lib/model-repository/datatypes.js";
import type { TensorSpec } from "../../../lib/model-repository/spec.js";
import { elementCount, type Tensor } from "./tensor.js";
import { emptyContents, isEmptyContents, typedToRaw } from "./typed.js";

/** What the request's tensors must match: the model's declared inputs and batching. */
export interface InputContract {
  readonly modelName: string;
  /** Undefined: the model declares no tensors; any well-formed input passes (its datatype is the request's). */
  readonly inputs: readonly TensorSpec[] | undefined;
  /** 0 when the model does not batch; otherwise the request's first dimension is the batch. */
  readonly maxBatchSize: number;
}

export interface DecodedInputs {
  readonly tensors: Tensor[];
  /** The request's batch size (1 for a model that does not batch). */
  readonly batchSize: number;
}

/**
 * Turns a request's input tensors into raw tensors, checking each against the model's
 * declared inputs. Raw input bytes are not copied: tensors keep views of the request.
 */
export function decodeInputs(request: ModelInferRequest, contract: InputContract): DecodedInputs {
  const usedRaw = request.rawInputContents.length > 0;
  if (usedRaw && request.rawInputContents.length !== request.inputs.length) {
    throw invalidArgument(
      `model '${contract.modelName}': raw_input_contents has ${request.rawInputContents.length} entries but the request has ${request.inputs.length} inputs; send one per input, in order`,
    );
  }
  const declared = contract.inputs ?? [];
  const specs = new Map(declared.map((spec) => [spec.name, spec]));
  const seen = new Set<string>();
  const batchSizes = new Set<number>();
  const tensors = request.inputs.map((input, index) => {
    const spec = contract.inputs === undefined ? undeclaredSpec(input, contract) : specs.get(input.name);
    if (spec === undefined) {
      const expected = declared.map((known) => known.name).join(", ");
      throw invalidArgument(
        `model '${contract.modelName}': unexpected input '${input.name}'; the model's inputs are: ${expected || "(none)"}`,
      );
    }
    if (seen.has(input.name))
      throw invalidArgument(`model '${contract.modelName}': input '${input.name}' is given twice`);
    seen.add(input.name);
    const shape = checkShape(input, spec, contract);
    if (contract.maxBatchSize > 0) batchSizes.add(shape[0] as number);
    const data = usedRaw
      ? checkRaw(input, shape, request.rawInputContents[index] as Uint8Array)
      : fromTyped(input, shape);
    const tensor: Tensor = { name: input.name, datatype: spec.datatype, shape, data, parameters: input.parameters };
    return tensor;
  });
  for (const spec of declared) {
    if (!spec.optional && !seen.has(spec.name)) {
      throw invalidArgument(`model '${contract.modelName}': missing required input '${spec.name}'`);
    }
  }
  if (batchSizes.size > 1) {
    throw invalidArgument(
      `model '${contract.modelName}': inputs disagree on the batch size (${[...batchSizes].join(", ")})`,
    );
  }
  return { tensors, batchSize: [...batchSizes][0] ?? 1 };
}

/** The spec an undeclared input is checked against: its own datatype (if KServe knows it), any shape. */
function undeclaredSpec(input: ModelInferRequest_InferInputTensor, contract: InputContract): TensorSpec {
  if (!isDatatype(input.datatype)) {
    throw invalidArgument(`tensor '${input.name}': '${input.datatype}' is not a KServe datatype`);
  }
  const dims = input.shape.slice(contract.maxBatchSize > 0 ? 1 : 0).map(() => -1);
  return { name: input.name, datatype: input.datatype, dims, optional: true };
}

function checkShape(input: ModelInferRequest_InferInputTensor, spec: TensorSpec, contract: InputContract): number[] {
  if (input.datatype !== spec.datatype) {
    const known = isDatatype(input.datatype) ? "" : " (not a KServe datatype)";
    throw invalidArgument(
      `tensor '${input.name}': datatype mismatch: model '${contract.modelName}' expects ${spec.datatype}, got '${input.datatype}'${known}`,
    );
  }
  const shape = input.shape.map((dim) => {
    if (dim < 0n || dim > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw invalidArgument(`tensor '${input.name}': invalid dimension ${dim} in shape [${input.shape.join(",")}]`);
    }
    return Number(dim);
  });
  const batched = contract.maxBatchSize > 0;
  if (!fitsDims(shape, spec.dims, batched)) {
    throw invalidArgument(
      `tensor '${input.name}': shape [${shape.join(",")}] does not match the model's [${declaredShape(spec.dims, batched).join(",")}]` +
        (batched ? ` (first dimension is the batch, max_batch_size ${contract.maxBatchSize})` : ""),
    );
  }
  if (batched) {
    const batch = shape[0] as number;
    if (batch < 1 || batch > contract.maxBatchSize) {
      throw invalidArgument(
        `tensor '${input.name}': batch size ${batch} is outside 1..${contract.maxBatchSize} (max_batch_size of model '${contract.modelName}')`,
      );
    }
  }
  return shape;
}

/** A declared tensor's shape as a request or reply has it: the batch dimension (-1) first for a batching model. */
export const declaredShape = (dims: readonly number[], batched: boolean): number[] =>
  batched ? [-1, ...dims] : [...dims];

/** Whether a tensor's shape fits declared dims (-1: any size). */
export function fitsDims(shape: readonly number[], dims: readonly number[], batched: boolean): boolean {
  const expected = declaredShape(dims, batched);
  return shape.length === expected.length && expected.every((dim, i) => dim === -1 || dim === shape[i]);
}

/**
 * What is wrong with a raw tensor's bytes for its datatype and shape, if anything: the
 * byte size of a fixed-size datatype, the element count of BYTES (a broken BYTES framing
 * is thrown). A request's inputs and an upstream's outputs are held to it alike.
 */
export function rawSizeMismatch(
  name: string,
  datatype: Datatype,
  shape: readonly number[],
  data: Uint8Array,
): string | undefined {
  const count = elementCount(shape);
  if (datatype === "BYTES") {
    const found = countBytesElements(data, name);
    return found === count
      ? undefined
      : `tensor '${name}': shape [${shape.join(",")}] needs ${count} BYTES elements, raw data holds ${found}`;
  }
  const needed = count * DATATYPES[datatype].byteSize;
  return data.byteLength === needed
    ? undefined
    : `tensor '${name}': raw data is ${data.byteLength} bytes, but shape [${shape.join(",")}] of ${datatype} needs ${needed}`;
}

function checkRaw(input: ModelInferRequest_InferInputTensor, shape: number[], data: Uint8Array): Uint8Array {
  if (!isEmptyContents(input.contents)) {
    throw invalidArgument(
      `tensor '${input.name}': both 'contents' and raw_input_contents are set; a request uses one or the other`,
    );
  }
  const mismatch = rawSizeMismatch(input.name, input.datatype as Datatype, shape, data);
  if (mismatch !== undefined) throw invalidArgument(mismatch);
  return data;
}

function fromTyped(input: ModelInferRequest_InferInputTensor, shape: number[]): Uint8Array {
  const datatype = DATATYPES[input.datatype as keyof typeof DATATYPES];
  return typedToRaw(input.name, datatype.name, input.contents ?? emptyContents(), elementCount(shape));
}

export interface EncodedOutputs {
  readonly outputs: ModelInferResponse_InferOutputTensor[];
  readonly rawOutputContents: Uint8Array[];
}

/**
 * Encodes output tensors for a reply, in raw_output_contents whatever form the request's
 * inputs took, as Triton always answers: clients written for it (the Python tritonclient,
 * hand-written ones) read raw_output_contents[0]. (Only MAX's character-code prompts are
 * answered in typed contents: inference/character-codes.ts.)
 */
export function encodeOutputs(tensors: readonly Tensor[]): EncodedOutputs {
  const outputs = tensors.map((tensor): ModelInferResponse_InferOutputTensor => ({
    name: tensor.name,
    datatype: tensor.datatype,
    shape: tensor.shape.map(BigInt),
    parameters: { ...(tensor.parameters ?? {}) } as Record<string, InferParameter>,
    contents: undefined,
  }));
  return { outputs, rawOutputContents: tensors.map((tensor) => tensor.data) };
}

/**
 * A response's output as a tensor (encodeOutputs' inverse): its raw contents, else its typed
 * ones made raw, checked against its datatype and shape. What an upstream or another model
 * of this data plane (an ensemble's step) answered.
 */
export function outputTensor(output: ModelInferResponse_InferOutputTensor, raw: Uint8Array | undefined): Tensor {
  if (!isDatatype(output.datatype)) throw internal(`output '${output.name}' has unknown datatype '${output.datatype}'`);
  const shape = output.shape.map(Number);
  const data = raw ?? typedToRaw(output.name, output.datatype, output.contents ?? emptyContents(), elementCount(shape));
  const mismatch = rawSizeMismatch(output.name, output.datatype, shape, data);
  if (mismatch !== undefined) throw internal(mismatch);
  return { name: output.name, datatype: output.datatype, shape, data, parameters: output.parameters };
}

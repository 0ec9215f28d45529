import { internal } from "../../../lib/errors.js";
import type { TensorSpec } from "../../../lib/model-repository/spec.js";
import { declaredShape, fitsDims } from "./request.js";

/** An output as a model returned it. */
export interface ReturnedOutput {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
}

/** What a model's outputs must match: the outputs its config declares, and its batching. */
export interface OutputContract {
  readonly modelName: string;
  /** Empty: the model declares no outputs, and what it returns is not checked. */
  readonly outputs: readonly TensorSpec[];
  /** 0 when the model does not batch; otherwise an output's first dimension is the batch. */
  readonly maxBatchSize: number;
}

/**
 * Checks what a model returned (a Python model, an upstream) against the outputs its config
 * declares (name, datatype, shape), as Triton does when a backend builds a response. A mismatch is the model's fault,
 * not the client's: INTERNAL, naming the model and the output.
 */
export function checkReturnedOutputs(outputs: readonly ReturnedOutput[], contract: OutputContract): void {
  if (contract.outputs.length === 0) return;
  const model = `model '${contract.modelName}'`;
  // On every response: a model's few declared outputs are searched rather than indexed.
  const batched = contract.maxBatchSize > 0;
  for (const { name, datatype, shape } of outputs) {
    const spec = contract.outputs.find((declared) => declared.name === name);
    if (spec === undefined) {
      const declared = contract.outputs.map((known) => known.name).join(", ");
      throw internal(`${model} returned output '${name}', which is not declared in its config (outputs: ${declared})`);
    }
    if (datatype !== spec.datatype) {
      throw internal(`${model} returned output '${name}' as ${datatype}; its config declares ${spec.datatype}`);
    }
    if (!fitsDims(shape, spec.dims, batched)) {
      throw internal(
        `${model} returned output '${name}' with shape [${shape.join(",")}]; its config declares [${declaredShape(spec.dims, batched).join(",")}]`,
      );
    }
  }
}

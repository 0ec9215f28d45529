import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import type { Datatype } from "../../../lib/model-repository/datatypes.js";

/**
 * A tensor inside the data plane. Elements are always held in raw form: little-endian
 * values, or for BYTES the length-prefixed elements. Raw request bytes stay views into
 * the received gRPC message, so an identity model never copies them.
 */
export interface Tensor {
  readonly name: string;
  readonly datatype: Datatype;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
  readonly parameters?: Readonly<Record<string, InferParameter>>;
}

export function elementCount(shape: readonly number[]): number {
  let count = 1;
  for (const dim of shape) count *= dim;
  return count;
}

/** The bytes the tensors' elements take (raw form). */
export function tensorBytes(tensors: readonly Tensor[]): number {
  let bytes = 0;
  for (const tensor of tensors) bytes += tensor.data.byteLength;
  return bytes;
}

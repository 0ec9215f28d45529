import type { Tensor as OrtTensor } from "onnxruntime-node";
import type { Datatype } from "../../../../lib/model-repository/datatypes.js";

/** KServe datatypes and onnxruntime tensor types, both ways, and the typed arrays that hold them. */

export type OrtType = keyof OrtTensor.DataTypeMap;

export const ORT_TYPE: Partial<Record<Datatype, OrtType>> = {
  BOOL: "bool",
  UINT8: "uint8",
  UINT16: "uint16",
  UINT32: "uint32",
  UINT64: "uint64",
  INT8: "int8",
  INT16: "int16",
  INT32: "int32",
  INT64: "int64",
  FP16: "float16",
  FP32: "float32",
  FP64: "float64",
  BYTES: "string",
};

export const DATATYPE_OF_ORT: Partial<Record<string, Datatype>> = Object.fromEntries(
  Object.entries(ORT_TYPE).map(([datatype, ort]) => [ort, datatype as Datatype]),
);

export type NumericArray = Exclude<OrtTensor.DataTypeMap[OrtType], string[]>;
export type NumericArrayConstructor = new (buffer: ArrayBuffer, byteOffset: number, length: number) => NumericArray;

export const ARRAY_OF: Partial<Record<OrtType, NumericArrayConstructor>> = {
  bool: Uint8Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  float16: Uint16Array,
  float32: Float32Array,
  float64: Float64Array,
};

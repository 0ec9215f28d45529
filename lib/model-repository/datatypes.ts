import { DataType } from "../../proto/gen/ts/model_config.js";
import type { InferTensorContents } from "../../proto/gen/ts/grpc_service.js";

/** KServe v2 datatype names, as they travel in requests and metadata. */
export const DATATYPE_NAMES = [
  "BOOL",
  "UINT8",
  "UINT16",
  "UINT32",
  "UINT64",
  "INT8",
  "INT16",
  "INT32",
  "INT64",
  "FP16",
  "BF16",
  "FP32",
  "FP64",
  "BYTES",
] as const;

export type Datatype = (typeof DATATYPE_NAMES)[number];

/** The repeated field of InferTensorContents that carries a datatype in typed form. */
export type TypedField = keyof InferTensorContents;

export interface DatatypeInfo {
  readonly name: Datatype;
  /** Bytes per element in raw form; 0 for BYTES, whose elements are length-prefixed. */
  readonly byteSize: number;
  /** The model_config.proto enum value (config.pbtxt spells it TYPE_<name>, BYTES is TYPE_STRING). */
  readonly configType: DataType;
  /** Where typed contents live; FP16 and BF16 have no typed form and travel only raw. */
  readonly typedField: TypedField | undefined;
}

const info = (
  name: Datatype,
  byteSize: number,
  configType: DataType,
  typedField: TypedField | undefined,
): DatatypeInfo => ({ name, byteSize, configType, typedField });

export const DATATYPES: Readonly<Record<Datatype, DatatypeInfo>> = {
  BOOL: info("BOOL", 1, DataType.TYPE_BOOL, "boolContents"),
  UINT8: info("UINT8", 1, DataType.TYPE_UINT8, "uintContents"),
  UINT16: info("UINT16", 2, DataType.TYPE_UINT16, "uintContents"),
  UINT32: info("UINT32", 4, DataType.TYPE_UINT32, "uintContents"),
  UINT64: info("UINT64", 8, DataType.TYPE_UINT64, "uint64Contents"),
  INT8: info("INT8", 1, DataType.TYPE_INT8, "intContents"),
  INT16: info("INT16", 2, DataType.TYPE_INT16, "intContents"),
  INT32: info("INT32", 4, DataType.TYPE_INT32, "intContents"),
  INT64: info("INT64", 8, DataType.TYPE_INT64, "int64Contents"),
  FP16: info("FP16", 2, DataType.TYPE_FP16, undefined),
  BF16: info("BF16", 2, DataType.TYPE_BF16, undefined),
  FP32: info("FP32", 4, DataType.TYPE_FP32, "fp32Contents"),
  FP64: info("FP64", 8, DataType.TYPE_FP64, "fp64Contents"),
  BYTES: info("BYTES", 0, DataType.TYPE_STRING, "bytesContents"),
};

const byConfigType = new Map<DataType, Datatype>(DATATYPE_NAMES.map((name) => [DATATYPES[name].configType, name]));

export function isDatatype(name: string): name is Datatype {
  return Object.hasOwn(DATATYPES, name);
}

/** TYPE_FP32 -> "FP32"; undefined for TYPE_INVALID or an unknown value. */
export function datatypeFromConfig(type: DataType): Datatype | undefined {
  return byConfigType.get(type);
}

/** How config.pbtxt spells a datatype: TYPE_<name>, and TYPE_STRING for BYTES. */
export function configTypeName(datatype: Datatype): string {
  return datatype === "BYTES" ? "TYPE_STRING" : `TYPE_${datatype}`;
}

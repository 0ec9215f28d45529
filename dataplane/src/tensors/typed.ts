import type { InferTensorContents } from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../lib/errors.js";
import { joinBytesElements, splitBytesElements } from "./bytes.js";
import { DATATYPES, type Datatype, type TypedField } from "../../../lib/model-repository/datatypes.js";

/**
 * Conversion between typed `contents` (InferTensorContents) and the raw little-endian
 * form every tensor has inside the data plane.
 */

type NumberArrayConstructor =
  | Int8ArrayConstructor
  | Int16ArrayConstructor
  | Int32ArrayConstructor
  | Uint8ArrayConstructor
  | Uint16ArrayConstructor
  | Uint32ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor;

interface IntegerRange {
  readonly min: number;
  readonly max: number;
}

interface NumberLayout {
  readonly kind: "number";
  readonly array: NumberArrayConstructor;
  /** For integer types: the values the datatype can hold. */
  readonly range?: IntegerRange;
}

interface BigIntLayout {
  readonly kind: "bigint";
  readonly array: BigInt64ArrayConstructor | BigUint64ArrayConstructor;
}

const LAYOUTS: Partial<Record<Datatype, NumberLayout | BigIntLayout>> = {
  UINT8: { kind: "number", array: Uint8Array, range: { min: 0, max: 0xff } },
  UINT16: { kind: "number", array: Uint16Array, range: { min: 0, max: 0xffff } },
  UINT32: { kind: "number", array: Uint32Array, range: { min: 0, max: 0xffffffff } },
  INT8: { kind: "number", array: Int8Array, range: { min: -0x80, max: 0x7f } },
  INT16: { kind: "number", array: Int16Array, range: { min: -0x8000, max: 0x7fff } },
  INT32: { kind: "number", array: Int32Array, range: { min: -0x80000000, max: 0x7fffffff } },
  FP32: { kind: "number", array: Float32Array },
  FP64: { kind: "number", array: Float64Array },
  INT64: { kind: "bigint", array: BigInt64Array },
  UINT64: { kind: "bigint", array: BigUint64Array },
};

const asBytes = (array: ArrayBufferView): Uint8Array =>
  new Uint8Array(array.buffer, array.byteOffset, array.byteLength);

/**
 * Typed arrays need aligned offsets; raw views into a gRPC message may not be. (The
 * copy uses the Uint8Array constructor: on a Buffer, slice() would return a view.)
 */
function aligned(data: Uint8Array, alignment: number): Uint8Array {
  return data.byteOffset % alignment === 0 ? data : new Uint8Array(data);
}

/** The typed field that carries values for a datatype, or an error naming the tensor. */
export function typedFieldOf(datatype: Datatype, tensorName: string): TypedField {
  const field = DATATYPES[datatype].typedField;
  if (field === undefined) {
    throw invalidArgument(
      `tensor '${tensorName}': datatype ${datatype} has no typed 'contents' field; send it in raw_input_contents`,
    );
  }
  return field;
}

/** True when `contents` holds no values in any field. */
export function isEmptyContents(contents: InferTensorContents | undefined): boolean {
  if (contents === undefined) return true;
  return Object.values(contents).every((values: unknown[]) => values.length === 0);
}

/**
 * Converts typed contents into raw form, checking the element count against the shape
 * and each value against the datatype's range.
 */
export function typedToRaw(
  tensorName: string,
  datatype: Datatype,
  contents: InferTensorContents,
  expectedCount: number,
): Uint8Array {
  const field = typedFieldOf(datatype, tensorName);
  const values = contents[field];
  if (values.length !== expectedCount) {
    throw invalidArgument(
      `tensor '${tensorName}': shape needs ${expectedCount} elements but contents.${snake(field)} holds ${values.length}`,
    );
  }
  for (const other of Object.keys(contents) as TypedField[]) {
    if (other !== field && contents[other].length > 0) {
      throw invalidArgument(
        `tensor '${tensorName}': datatype ${datatype} takes contents.${snake(field)}, but contents.${snake(other)} is set`,
      );
    }
  }
  if (datatype === "BOOL") return Uint8Array.from(contents.boolContents, (value) => (value ? 1 : 0));
  if (datatype === "BYTES") return joinBytesElements(contents.bytesContents);
  const layout = LAYOUTS[datatype];
  if (layout === undefined) throw invalidArgument(`tensor '${tensorName}': unsupported datatype ${datatype}`);
  if (layout.kind === "bigint") return int64Raw(values, datatype as "INT64" | "UINT64", `tensor '${tensorName}'`);
  const numbers = values as number[];
  if (layout.range !== undefined) checkRange(tensorName, datatype, numbers, layout.range);
  return asBytes(layout.array.from(numbers));
}

const INT64_RANGES = { INT64: [-(2n ** 63n), 2n ** 63n - 1n], UINT64: [0n, 2n ** 64n - 1n] } as const;

/**
 * INT64 / UINT64 elements as raw bytes, each checked against the datatype's range (`what`
 * names the tensor in the error): the one conversion, so no value wraps silently. Safe
 * integers (numbers) are written without a bigint each (millions of elements in a large
 * JSON body); bigints (typed contents, JSON values beyond 2^53) are checked as they are.
 */
export function int64Raw(values: readonly unknown[], datatype: "INT64" | "UINT64", what: string): Uint8Array {
  const [min, max] = INT64_RANGES[datatype];
  const raw = new Uint8Array(values.length * 8);
  const view = new DataView(raw.buffer);
  for (let index = 0; index < values.length; index++) {
    const value = values[index];
    const at = index * 8;
    if (typeof value === "number" && Number.isSafeInteger(value) && (value >= 0 || datatype === "INT64")) {
      // Two's complement halves: the low word modulo 2^32, the high word floored.
      view.setUint32(at, value >>> 0, true);
      view.setInt32(at + 4, Math.floor(value / 2 ** 32), true);
    } else if (typeof value === "bigint" && value >= min && value <= max) {
      if (datatype === "INT64") view.setBigInt64(at, value, true);
      else view.setBigUint64(at, value, true);
    } else {
      throw invalidArgument(`${what}: element ${index} must be a whole number in ${min}..${max} for ${datatype}`);
    }
  }
  return raw;
}

function checkRange(tensorName: string, datatype: Datatype, values: readonly number[], range: IntegerRange): void {
  for (let i = 0; i < values.length; i++) {
    const value = values[i] as number;
    if (!Number.isInteger(value) || value < range.min || value > range.max) {
      throw invalidArgument(`tensor '${tensorName}': element ${i} (${value}) is out of range for ${datatype}`);
    }
  }
}

/** Converts a raw tensor to typed contents (for replies to requests that sent typed contents). */
export function rawToTyped(datatype: Datatype, data: Uint8Array): InferTensorContents {
  const contents = emptyContents();
  if (datatype === "BOOL") {
    contents.boolContents = Array.from(data, (byte) => byte !== 0);
    return contents;
  }
  if (datatype === "BYTES") {
    contents.bytesContents = splitBytesElements(data);
    return contents;
  }
  const layout = LAYOUTS[datatype];
  const field = DATATYPES[datatype].typedField;
  if (layout === undefined || field === undefined) {
    throw invalidArgument(`datatype ${datatype} has no typed 'contents' field`);
  }
  const bytes = aligned(data, layout.array.BYTES_PER_ELEMENT);
  const view = new layout.array(
    bytes.buffer as ArrayBuffer,
    bytes.byteOffset,
    bytes.byteLength / layout.array.BYTES_PER_ELEMENT,
  );
  (contents[field] as unknown[]) = Array.from(view as ArrayLike<unknown>);
  return contents;
}

export function emptyContents(): InferTensorContents {
  return {
    boolContents: [],
    intContents: [],
    int64Contents: [],
    uintContents: [],
    uint64Contents: [],
    fp32Contents: [],
    fp64Contents: [],
    bytesContents: [],
  };
}

/** contents field names as the proto spells them, for messages. */
const PROTO_FIELD_NAMES: Readonly<Record<TypedField, string>> = {
  boolContents: "bool_contents",
  intContents: "int_contents",
  int64Contents: "int64_contents",
  uintContents: "uint_contents",
  uint64Contents: "uint64_contents",
  fp32Contents: "fp32_contents",
  fp64Contents: "fp64_contents",
  bytesContents: "bytes_contents",
};

const snake = (field: TypedField): string => PROTO_FIELD_NAMES[field];

import type { InferParameter, InferTensorContents } from "../../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../../lib/errors.js";
import { DATATYPES, isDatatype, type Datatype } from "../../../../lib/model-repository/datatypes.js";
import { elementCount } from "../../tensors/tensor.js";
import { emptyContents, int64Raw, rawToTyped, typedFieldOf, typedToRaw } from "../../tensors/typed.js";
import { parameterChoiceOf } from "../../tensors/parameters.js";

/**
 * Tensors and parameters in the KServe v2 JSON form: `data` arrays (flat or nested,
 * row-major) to the raw form every tensor has inside the data plane, and back as JSON
 * text. FP16 and BF16 have no JSON form (as in Triton): they travel as binary data.
 */

/** Parameters of a JSON request: booleans, strings, numbers (whole: int64, else double). */
export function parametersFromJson(value: unknown, field: string): Record<string, InferParameter> {
  if (value === undefined) return {};
  const object = jsonObject(value, field);
  const parameters: Record<string, InferParameter> = {};
  for (const [key, item] of Object.entries(object)) {
    parameters[key] = { parameterChoice: parameterChoiceOf(item, `${field}.${key}`) };
  }
  return parameters;
}

/** A JSON object (not an array, not null), or an error naming the field. */
export function jsonObject(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalidArgument(`'${field}' must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

/** A tensor's `shape`: whole numbers >= 0. */
export function shapeFromJson(value: unknown, field: string): number[] {
  if (!Array.isArray(value) || !value.every((dim) => Number.isSafeInteger(dim) && (dim as number) >= 0)) {
    throw invalidArgument(`'${field}' must be an array of whole numbers >= 0`);
  }
  return value as number[];
}

export function datatypeFromJson(value: unknown, field: string): Datatype {
  if (typeof value !== "string" || !isDatatype(value)) {
    throw invalidArgument(`'${field}' must be a KServe datatype (${Object.keys(DATATYPES).join(", ")})`);
  }
  return value;
}

/**
 * A tensor's JSON `data` in raw form, checked against its shape and datatype. `field` names
 * the tensor in messages (e.g. "inputs[0] 'INPUT0'").
 */
export function rawFromJson(data: unknown, datatype: Datatype, shape: readonly number[], field: string): Uint8Array {
  const values = flatten(data, field);
  const count = elementCount(shape);
  if (values.length !== count) {
    throw invalidArgument(
      `${field}: shape [${shape.join(",")}] needs ${count} elements, 'data' holds ${values.length}`,
    );
  }
  if (DATATYPES[datatype].typedField === undefined) {
    throw invalidArgument(
      `${field}: datatype ${datatype} has no JSON form; send it as binary data (parameters.binary_data_size)`,
    );
  }
  const contents: InferTensorContents = emptyContents();
  const typedField = typedFieldOf(datatype, field);
  const check = (ok: (value: unknown) => boolean, what: string): void => {
    const bad = values.findIndex((value) => !ok(value));
    if (bad >= 0) throw invalidArgument(`${field}: element ${bad} of 'data' must be ${what} for ${datatype}`);
  };
  switch (datatype) {
    case "BOOL":
      check((value) => typeof value === "boolean", "true or false");
      contents.boolContents = values as boolean[];
      break;
    case "BYTES":
      check((value) => typeof value === "string", "a string");
      contents.bytesContents = (values as string[]).map((value) => Buffer.from(value, "utf8"));
      break;
    case "INT64":
    case "UINT64":
      return int64Raw(values, datatype, field);
    default:
      check((value) => typeof value === "number", "a number");
      (contents[typedField] as number[]) = values as number[];
  }
  return typedToRaw(field, datatype, contents, count);
}

/** Nested arrays flattened in row-major order (a scalar is one element), without recursion. */
function flatten(data: unknown, field: string): unknown[] {
  if (data === undefined) throw invalidArgument(`${field}: 'data' is missing (or send binary data)`);
  if (!Array.isArray(data)) return [data];
  if (!data.some(Array.isArray)) return data;
  const flat: unknown[] = [];
  const stack: { items: unknown[]; next: number }[] = [{ items: data, next: 0 }];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if (top.next === top.items.length) {
      stack.pop();
      continue;
    }
    const item = top.items[top.next++];
    if (Array.isArray(item)) stack.push({ items: item, next: 0 });
    else flat.push(item);
  }
  return flat;
}

/** A raw tensor's elements as JSON array text (64-bit integers written exactly). */
export function jsonTextOfRaw(datatype: Datatype, data: Uint8Array): string {
  const contents = rawToTyped(datatype, data);
  const field = typedFieldOf(datatype, "output");
  if (datatype === "BYTES") {
    return JSON.stringify(contents.bytesContents.map((element) => Buffer.from(element).toString("utf8")));
  }
  if (datatype === "INT64" || datatype === "UINT64") return `[${(contents[field] as bigint[]).join(",")}]`;
  return JSON.stringify(contents[field]);
}

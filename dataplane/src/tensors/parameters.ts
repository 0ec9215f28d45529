import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../lib/errors.js";

/** True only for a boolean parameter set to true (e.g. sequence_end, triton_final_response). */
export function isTrue(parameter: InferParameter | undefined): boolean {
  return parameter?.parameterChoice?.$case === "boolParam" && parameter.parameterChoice.value;
}

export const boolParameter = (value: boolean): InferParameter => ({ parameterChoice: { $case: "boolParam", value } });

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const UINT64_MAX = (1n << 64n) - 1n;

/**
 * A JSON parameter value as an InferParameter choice: booleans, strings, numbers (whole:
 * int64, else double), and whole numbers read exact (bigints): int64, or uint64 beyond
 * int64's range (the only type that holds them).
 */
export function parameterChoiceOf(value: unknown, field: string): InferParameter["parameterChoice"] {
  if (typeof value === "boolean") return { $case: "boolParam", value };
  if (typeof value === "string") return { $case: "stringParam", value };
  if (typeof value === "bigint") {
    if (value >= INT64_MIN && value <= INT64_MAX) return { $case: "int64Param", value };
    if (value > INT64_MAX && value <= UINT64_MAX) return { $case: "uint64Param", value };
    throw invalidArgument(`'${field}' (${value}) does not fit a 64-bit integer`);
  }
  if (typeof value === "number") {
    return Number.isSafeInteger(value)
      ? { $case: "int64Param", value: BigInt(value) }
      : { $case: "doubleParam", value };
  }
  throw invalidArgument(`'${field}' must be a boolean, a number or a string`);
}

/**
 * Parameters as JSON values. An int64 or uint64 beyond 2^53 stays a bigint, so that its value
 * reaches JSON exact (a uint64_param of 2^64 - 1 is not 18446744073709552000): write these
 * values with json-text.ts's jsonText, not JSON.stringify.
 */
export function parametersToJson(parameters: Readonly<Record<string, InferParameter>>): Record<string, unknown> {
  const json: Record<string, unknown> = {};
  for (const [key, { parameterChoice }] of Object.entries(parameters)) {
    if (parameterChoice === undefined) continue;
    const { value } = parameterChoice;
    json[key] = typeof value === "bigint" && Number.isSafeInteger(Number(value)) ? Number(value) : value;
  }
  return json;
}

/**
 * A request's correlation ID (Triton's SequenceId): an unsigned 64-bit integer or a string.
 * The integer 5 and the string "5" are different sequences.
 */
export type SequenceId =
  { readonly kind: "uint"; readonly value: bigint } | { readonly kind: "string"; readonly value: string };

/** A request's place in a sequence: its correlation ID and flags. */
export interface SequenceRequest {
  readonly id: SequenceId;
  readonly start: boolean;
  readonly end: boolean;
}

function sequenceFlag(parameters: Readonly<Record<string, InferParameter>>, name: string): boolean {
  const choice = parameters[name]?.parameterChoice;
  if (choice === undefined) return false;
  if (choice.$case !== "boolParam") {
    throw invalidArgument(`invalid value type for '${name}' parameter, expected bool_param.`);
  }
  return choice.value;
}

/**
 * The request's `sequence_id`, `sequence_start` and `sequence_end` parameters, with Triton's
 * errors for values of the wrong type; undefined when it names no sequence (no ID, 0 or ""),
 * in which case its flags are still checked. An int64 ID is read as Triton reads it, as
 * unsigned (-1 is 2^64 - 1).
 */
export function sequenceOf(parameters: Readonly<Record<string, InferParameter>>): SequenceRequest | undefined {
  const start = sequenceFlag(parameters, "sequence_start");
  const end = sequenceFlag(parameters, "sequence_end");
  const choice = parameters["sequence_id"]?.parameterChoice;
  if (choice === undefined) return undefined;
  let id: SequenceId;
  switch (choice.$case) {
    case "int64Param":
    case "uint64Param":
      id = { kind: "uint", value: BigInt.asUintN(64, choice.value) };
      if (id.value === 0n) return undefined;
      break;
    case "stringParam":
      id = { kind: "string", value: choice.value };
      if (id.value === "") return undefined;
      break;
    default:
      throw invalidArgument("invalid value type for 'sequence_id' parameter, expected int64_param or string_param.");
  }
  return { id, start, end };
}

/** A sequence's key in maps: `u:<n>` or `s:<text>` (typed, so 5 and "5" differ). */
export function sequenceKey(id: SequenceId): string {
  return id.kind === "uint" ? `u:${id.value}` : `s:${id.value}`;
}

/** A correlation ID as Triton writes it in messages: the number, or the string as it is. */
export function sequenceIdText(id: SequenceId): string {
  return String(id.value);
}

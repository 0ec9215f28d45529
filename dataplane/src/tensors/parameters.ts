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

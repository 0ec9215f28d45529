import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../lib/errors.js";

/** True only for a boolean parameter set to true (e.g. sequence_end, triton_final_response). */
export function isTrue(parameter: InferParameter | undefined): boolean {
  return parameter?.parameterChoice?.$case === "boolParam" && parameter.parameterChoice.value;
}

export const boolParameter = (value: boolean): InferParameter => ({ parameterChoice: { $case: "boolParam", value } });

/** A JSON parameter value as an InferParameter choice: booleans, strings, numbers (whole: int64, else double). */
export function parameterChoiceOf(value: unknown, field: string): InferParameter["parameterChoice"] {
  if (typeof value === "boolean") return { $case: "boolParam", value };
  if (typeof value === "string") return { $case: "stringParam", value };
  if (typeof value === "number") {
    return Number.isSafeInteger(value)
      ? { $case: "int64Param", value: BigInt(value) }
      : { $case: "doubleParam", value };
  }
  throw invalidArgument(`'${field}' must be a boolean, a number or a string`);
}

/** Parameters as JSON values. */
export function parametersToJson(parameters: Readonly<Record<string, InferParameter>>): Record<string, unknown> {
  const json: Record<string, unknown> = {};
  for (const [key, { parameterChoice }] of Object.entries(parameters)) {
    if (parameterChoice === undefined) continue;
    const { value } = parameterChoice;
    json[key] = typeof value === "bigint" ? Number(value) : value;
  }
  return json;
}

import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";

/** True only for a boolean parameter set to true (e.g. sequence_end, triton_final_response). */
export function isTrue(parameter: InferParameter | undefined): boolean {
  return parameter?.parameterChoice?.$case === "boolParam" && parameter.parameterChoice.value;
}

export const boolParameter = (value: boolean): InferParameter => ({ parameterChoice: { $case: "boolParam", value } });

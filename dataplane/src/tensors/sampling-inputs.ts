import type { InferParameter, ModelInferRequest_InferInputTensor } from "../../../proto/gen/ts/grpc_service.js";
import { SAMPLING_NAMES, samplingInputValues, type SamplingName } from "../../../lib/engines/llm.js";
import type { ModelSpec } from "../../../lib/model-repository/spec.js";
import { emptyContents, int64Raw, typedFieldOf, typedToRaw } from "./typed.js";

/**
 * The per-value sampling inputs (TensorRT-LLM's layout) for a request to `spec` that gives
 * its sampling values as request parameters (numbers, or numeric strings as MAX sends
 * them): see samplingInputValues. Built for the request tensors of the OpenAI routes and of
 * MAX's prompts, in raw form, shape [1] (batched: [1, 1]); a value the input's datatype
 * cannot hold (MAX's max_tokens "1e19" for an INT64 input) is INVALID_ARGUMENT naming it.
 */
export function samplingInputs(
  spec: ModelSpec,
  parameters: Readonly<Record<string, InferParameter>>,
): { inputs: ModelInferRequest_InferInputTensor[]; raw: Uint8Array[] } {
  const given: Partial<Record<SamplingName, number>> = {};
  for (const name of SAMPLING_NAMES) {
    const choice = parameters[name]?.parameterChoice;
    const value = choice === undefined || choice.$case === "boolParam" ? NaN : Number(choice.value);
    if (Number.isFinite(value)) given[name] = value;
  }
  const shape = spec.maxBatchSize > 0 ? [1n, 1n] : [1n];
  const inputs: ModelInferRequest_InferInputTensor[] = [];
  const raw: Uint8Array[] = [];
  for (const { name, datatype, value } of samplingInputValues(spec, given)) {
    inputs.push({ name, datatype, shape, parameters: {}, contents: undefined });
    if (datatype === "INT64" || datatype === "UINT64") raw.push(int64Raw([value], datatype, `input '${name}'`));
    else {
      const contents = emptyContents();
      (contents[typedFieldOf(datatype, name)] as unknown[]) = [value];
      raw.push(typedToRaw(name, datatype, contents, 1));
    }
  }
  return { inputs, raw };
}

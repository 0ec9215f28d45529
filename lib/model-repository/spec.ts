import type { ModelConfig, ModelInput, ModelOutput } from "../../proto/gen/ts/model_config.js";
import { datatypeFromConfig, type Datatype } from "./datatypes.js";
import { ConfigError } from "./config.js";
import { schedulingOf, type Scheduling } from "./scheduling.js";

/** What a model declares for one of its tensors (from config.pbtxt). */
export interface TensorSpec {
  readonly name: string;
  readonly datatype: Datatype;
  /** Dimensions without the batch dimension; -1 accepts any size. */
  readonly dims: readonly number[];
  /** An input the request may leave out. */
  readonly optional: boolean;
}

/**
 * A model as the data plane serves it: the checked, normalized view of its
 * ModelConfig. Built once per (re)load; requests only read it.
 */
export interface ModelSpec {
  readonly name: string;
  /** What ModelMetadata reports: the config's platform, else its backend. */
  readonly platform: string;
  readonly backend: string;
  readonly maxBatchSize: number;
  readonly inputs: readonly TensorSpec[];
  readonly outputs: readonly TensorSpec[];
  /**
   * False when the config declares no input and no output: requests then pass through
   * unchecked (for an upstream that knows the model's tensors, e.g. kserve-grpc).
   */
  readonly declaresTensors: boolean;
  /** model_transaction_policy { decoupled: true }: any number of responses per request. */
  readonly decoupled: boolean;
  /**
   * A decoupled model's opt-in (parameters["model_infer_gathers_responses"] = "true"): unary
   * ModelInfer answers with its responses gathered into one, as NVIDIA Dynamo's KServe
   * frontend folds an LLM's stream. Without it, Triton's rule: UNIMPLEMENTED.
   */
  readonly gathersUnaryResponses: boolean;
  /** The config's `parameters` map, string values. */
  readonly parameters: Readonly<Record<string, string>>;
  /** How its requests are scheduled (dynamic batching, queues, instances, warmup), checked. */
  readonly scheduling: Scheduling;
  /** The configuration as loaded, for the ModelConfig RPC (name filled in). */
  readonly config: ModelConfig;
}

/** The config parameter by which a decoupled model opts in to unary ModelInfer (ModelSpec.gathersUnaryResponses). */
export const GATHERS_UNARY_RESPONSES = "model_infer_gathers_responses";

/**
 * Checks a configuration and builds the spec. `expectedName` is the repository folder
 * (or file) name: an empty config name takes it, a different one is an error, as in
 * Triton. With the config's `text`, an error carries the line of the field it names.
 */
export function toModelSpec(config: ModelConfig, source: string, expectedName?: string, text?: string): ModelSpec {
  const fail = (field: string, detail: string): never => {
    throw new ConfigError(source, `${field}: ${detail}`, text === undefined ? undefined : lineOfField(text, field));
  };
  const name = config.name || expectedName || "";
  if (!name) fail("name", "a model needs a name");
  if (expectedName !== undefined && config.name && config.name !== expectedName) {
    fail("name", `'${config.name}' does not match the model's folder or file name '${expectedName}'`);
  }
  if (config.maxBatchSize < 0) fail("max_batch_size", `must be 0 or more, got ${config.maxBatchSize}`);
  if (!config.backend && !config.platform)
    fail("backend", "set `backend` (or `platform`) to choose how the model runs");
  const inputs = tensorSpecs(config.input, "input", fail);
  const outputs = tensorSpecs(config.output, "output", fail);
  const parameters = Object.fromEntries(
    Object.entries(config.parameters).map(([key, value]) => [key, value.stringValue]),
  );
  const decoupled = config.modelTransactionPolicy?.decoupled ?? false;
  const gathers = parameters[GATHERS_UNARY_RESPONSES];
  if (gathers !== undefined && gathers !== "true" && gathers !== "false") {
    fail(`parameters["${GATHERS_UNARY_RESPONSES}"]`, `must be "true" or "false", not '${gathers}'`);
  }
  if (gathers === "true" && !decoupled) {
    fail(
      `parameters["${GATHERS_UNARY_RESPONSES}"]`,
      "applies to decoupled models only (model_transaction_policy { decoupled: true })",
    );
  }
  return {
    name,
    platform: config.platform || config.backend,
    backend: config.backend || config.platform,
    maxBatchSize: config.maxBatchSize,
    inputs,
    outputs,
    declaresTensors: inputs.length > 0 || outputs.length > 0,
    decoupled,
    gathersUnaryResponses: gathers === "true",
    parameters,
    // Named: Triton's sequence_batching errors name the model.
    scheduling: schedulingOf({ ...config, name }, fail),
    config: { ...config, name },
  };
}

function tensorSpecs(
  tensors: readonly (ModelInput | ModelOutput)[],
  kind: "input" | "output",
  fail: (field: string, detail: string) => never,
): TensorSpec[] {
  const names = new Set<string>();
  return tensors.map((tensor, index) => {
    const field = `${kind}[${index}]${tensor.name ? ` '${tensor.name}'` : ""}`;
    if (!tensor.name) fail(`${field}.name`, "every tensor needs a name");
    if (names.has(tensor.name)) fail(`${field}.name`, `${kind} '${tensor.name}' is declared twice`);
    names.add(tensor.name);
    const datatype = datatypeFromConfig(tensor.dataType);
    if (datatype === undefined) fail(`${field}.data_type`, "set a data_type such as TYPE_FP32");
    const hasReshape = tensor.reshape !== undefined;
    if (tensor.dims.length === 0 && !hasReshape) fail(`${field}.dims`, "list at least one dimension (-1 for any size)");
    const dims = tensor.dims.map((dim) => {
      if (dim === 0n || dim < -1n) fail(`${field}.dims`, `dimension ${dim} is not allowed (use a size >= 1, or -1)`);
      return Number(dim);
    });
    const optional = kind === "input" && (tensor as ModelInput).optional;
    return { name: tensor.name, datatype: datatype!, dims, optional };
  });
}

/**
 * The line of config.pbtxt a checked field is on, when the text shows it: a tensor's
 * field (`input[0] 'INPUT0'.dims`) at the line naming the tensor, a top-level field
 * (`max_batch_size`, `sequence_batching.direct...`) at the line that sets or opens it.
 */
export function lineOfField(text: string, field: string): number | undefined {
  const lines = text.split("\n");
  const tensor = /^(?:input|output)\[\d+\] '([^']+)'/.exec(field)?.[1];
  const pattern =
    tensor !== undefined
      ? new RegExp(`name\\s*:\\s*"${escapeRegExp(tensor)}"`)
      : new RegExp(`^\\s*${escapeRegExp(field.split(/[ .[]/)[0]!)}\\s*[:{[]`);
  const index = lines.findIndex((line) => pattern.test(line));
  return index === -1 ? undefined : index + 1;
}

const escapeRegExp = (value: string): string => value.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

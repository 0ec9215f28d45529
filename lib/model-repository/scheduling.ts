import {
  ModelQueuePolicy_TimeoutAction,
  type ModelConfig,
  type ModelDynamicBatching,
  type ModelQueuePolicy,
  type ModelWarmup,
} from "../../proto/gen/ts/model_config.js";
import { MAX_QUEUE_DELAY_US, controlNames, sequenceBatchingOf, type SequenceBatching } from "./sequence-batching.js";
import { DATATYPES, datatypeFromConfig, type Datatype } from "./datatypes.js";

/**
 * How Triton schedules a model's requests, as its model configuration says
 * (model_config.proto: `dynamic_batching`, its queue policies and priority levels,
 * `instance_group` counts, `model_warmup`), checked once when the config is read. The data
 * plane's scheduler (dataplane/src/scheduling/) runs what this describes for every local
 * engine; the operator and `migrate` check configs with it, loading nothing.
 */

/** What a queue does with a request that waits past its timeout (ModelQueuePolicy). */
export type TimeoutAction = "REJECT" | "DELAY";

/** One priority level's queue (ModelQueuePolicy). */
export interface QueuePolicy {
  readonly timeoutAction: TimeoutAction;
  /** How long a request may wait in this queue, in microseconds; 0: no bound. */
  readonly defaultTimeoutUs: number;
  /** Whether a request's `timeout` parameter may shorten its wait (as Triton: only ever shorten). */
  readonly allowTimeoutOverride: boolean;
  /** The most requests this queue holds; 0: no bound. A request past it is refused UNAVAILABLE. */
  readonly maxQueueSize: number;
}

/** `dynamic_batching`, normalized. */
export interface DynamicBatching {
  /** Ascending, each at most max_batch_size; empty: any size up to max_batch_size. */
  readonly preferredBatchSizes: readonly number[];
  /** How long the oldest request may wait for a batch to fill, in microseconds. */
  readonly maxQueueDelayUs: number;
  /** Responses leave in the order the requests came, whatever order their batches finish in. */
  readonly preserveOrdering: boolean;
  /** Priority levels, 1 the highest; 0: one level (a request's `priority` is then refused unless 0). */
  readonly priorityLevels: number;
  /** The level of a request that names none (priority 0); 0 when there are no levels. */
  readonly defaultPriorityLevel: number;
  /** The queue policy of every level the config does not give one. */
  readonly defaultQueuePolicy: QueuePolicy;
  /** Levels with a policy of their own (priority_queue_policy). */
  readonly queuePolicies: ReadonlyMap<number, QueuePolicy>;
}

/** Where a warmup input's values come from. */
export type WarmupData =
  | { readonly kind: "zero" }
  | { readonly kind: "random" }
  /** A file in the model folder's `warmup/` folder: a plain name, checked (no separators, no `..`). */
  | { readonly kind: "file"; readonly file: string };

export interface WarmupInput {
  readonly name: string;
  readonly datatype: Datatype;
  /** Without the batch dimension (when max_batch_size > 0); every size known. */
  readonly dims: readonly number[];
  readonly data: WarmupData;
}

/** One `model_warmup` sample: run `count` times on every instance before the model is READY (none of batch_size 0). */
export interface WarmupSample {
  readonly name: string;
  /** The batch size of the request (1 when the model does not batch). */
  readonly batchSize: number;
  readonly count: number;
  readonly inputs: readonly WarmupInput[];
}

export interface Scheduling {
  readonly maxBatchSize: number;
  /** Set when the config has `dynamic_batching`: requests queue (with its policies) and join batches. */
  readonly dynamicBatching: DynamicBatching | undefined;
  /** Set when the config has `sequence_batching`: each correlation ID's requests run in order on one slot of one instance. */
  readonly sequenceBatching: SequenceBatching | undefined;
  /** Executions that may run at once: the instance groups' counts added up (1 with no group). */
  readonly instanceCount: number;
  /**
   * Inputs whose shapes must be equal for requests to share a batch (as Triton: shape
   * tensors, and inputs with a variable dimension that do not allow a ragged batch).
   */
  readonly equalShapeInputs: ReadonlySet<string>;
  /** Inputs that allow a ragged batch (allow_ragged_batch): joined whatever their shapes. */
  readonly raggedInputs: ReadonlySet<string>;
  /** The samples that run, in the config's order (those of batch_size 0 are checked and skipped, as Triton skips them). */
  readonly warmup: readonly WarmupSample[];
}

/** More executions at once than this per model is a mistake in the config, not a plan. */
export const MAX_INSTANCES = 64;
/** A warmup sample's runs: more is a mistake that would keep the model from ever being READY. */
const MAX_WARMUP_COUNT = 1000;
/** A warmup input's data: bounded, so a config cannot make the data plane allocate without end. */
export const MAX_WARMUP_INPUT_BYTES = 256 * 1024 * 1024;
/** Byte size assumed per BYTES element of a zero or random warmup input (Triton: a 4-byte length, no content). */
const WARMUP_BYTES_ELEMENT = 4;

type Fail = (field: string, detail: string) => never;

/**
 * The scheduling a config asks for, checked; `fail` throws a ConfigError naming the field
 * (spec.ts gives it the config's source and line).
 */
export function schedulingOf(config: ModelConfig, fail: Fail): Scheduling {
  const maxBatchSize = config.maxBatchSize;
  const choice = config.schedulingChoice;
  const dynamicBatching =
    choice?.$case === "dynamicBatching" ? dynamicBatchingOf(choice.value, maxBatchSize, fail) : undefined;
  const equalShapeInputs = new Set<string>();
  const raggedInputs = new Set<string>();
  const instanceCount = instanceCountOf(config, fail);
  for (const input of config.input) {
    if (input.allowRaggedBatch) {
      if (maxBatchSize === 0) fail(`input '${input.name}'.allow_ragged_batch`, "needs max_batch_size > 0");
      raggedInputs.add(input.name);
    } else if (input.isShapeTensor || input.dims.some((dim) => dim === -1n)) {
      equalShapeInputs.add(input.name);
    }
  }
  const sequenceBatching = sequenceBatchingOf(config, fail, instanceCount);
  // A warmup sample may feed the sequence controls too (Triton adds them as override inputs).
  const controls = sequenceBatching === undefined ? new Set<string>() : controlNames(sequenceBatching);
  return {
    maxBatchSize,
    dynamicBatching,
    sequenceBatching,
    instanceCount,
    equalShapeInputs,
    raggedInputs,
    // As Triton: a sample of batch_size 0 (the field left out) is checked, then skipped.
    warmup: config.modelWarmup.flatMap((sample, index) => {
      const checked = warmupSampleOf(sample, index, config, controls, fail);
      return sample.batchSize === 0 ? [] : [checked];
    }),
  };
}

function dynamicBatchingOf(batching: ModelDynamicBatching, maxBatchSize: number, fail: Fail): DynamicBatching {
  const field = "dynamic_batching";
  const preferred = [...new Set(batching.preferredBatchSize)].sort((a, b) => a - b);
  for (const size of preferred) {
    if (maxBatchSize === 0)
      fail(`${field}.preferred_batch_size`, "needs max_batch_size > 0 (the model does not batch)");
    if (size < 1) fail(`${field}.preferred_batch_size`, `${size} is not a batch size (1 or more)`);
    if (size > maxBatchSize)
      fail(`${field}.preferred_batch_size`, `${size} is larger than max_batch_size ${maxBatchSize}`);
  }
  if (batching.maxQueueDelayMicroseconds < 0n || batching.maxQueueDelayMicroseconds > MAX_QUEUE_DELAY_US) {
    fail(
      `${field}.max_queue_delay_microseconds`,
      `${batching.maxQueueDelayMicroseconds} is past what a batch may wait, at most ${MAX_QUEUE_DELAY_US} (a day)`,
    );
  }
  const levels = batching.priorityLevels;
  if (levels < 0n || levels > 1_000_000n)
    fail(`${field}.priority_levels`, `${levels} is not a number of levels (0 to 1000000)`);
  const priorityLevels = Number(levels);
  const defaultLevel = Number(batching.defaultPriorityLevel);
  if (priorityLevels > 0 && (defaultLevel < 1 || defaultLevel > priorityLevels)) {
    fail(
      `${field}.default_priority_level`,
      `${defaultLevel} is not a level: set one in 1..${priorityLevels} (priority_levels)`,
    );
  }
  const defaultQueuePolicy = queuePolicyOf(batching.defaultQueuePolicy, `${field}.default_queue_policy`, fail);
  const queuePolicies = new Map<number, QueuePolicy>();
  // Without priority levels there is one queue, the default policy's: Triton loads such a
  // config and ignores default_priority_level and priority_queue_policy, and so do we.
  for (const [key, policy] of priorityLevels === 0 ? [] : batching.priorityQueuePolicy) {
    const level = Number(key);
    if (level < 1 || level > priorityLevels) {
      fail(`${field}.priority_queue_policy`, `level ${key} is not one of 1..${priorityLevels} (priority_levels)`);
    }
    queuePolicies.set(level, queuePolicyOf(policy, `${field}.priority_queue_policy[${key}]`, fail));
  }
  if (batching.preserveOrdering) checkPreservedOrder(priorityLevels, defaultQueuePolicy, queuePolicies, fail);
  return {
    preferredBatchSizes: preferred,
    maxQueueDelayUs: Number(batching.maxQueueDelayMicroseconds),
    preserveOrdering: batching.preserveOrdering,
    priorityLevels,
    defaultPriorityLevel: priorityLevels > 0 ? defaultLevel : 0,
    defaultQueuePolicy,
    queuePolicies,
  };
}

/**
 * As Triton refuses them (model_config_utils.cc): responses in arrival order cannot be kept
 * by requests that overtake one another, through priority levels or DELAY past a timeout.
 */
function checkPreservedOrder(
  levels: number,
  defaultPolicy: QueuePolicy,
  policies: ReadonlyMap<number, QueuePolicy>,
  fail: Fail,
): void {
  const field = "dynamic_batching.preserve_ordering";
  if (levels > 1) fail(field, `allows one priority level at most (priority_levels is ${levels})`);
  for (const policy of [defaultPolicy, ...policies.values()]) {
    if (policy.timeoutAction === "DELAY" && policy.defaultTimeoutUs !== 0) {
      fail(
        field,
        "a queue policy cannot DELAY requests past a timeout (timeout_action) when responses keep their order",
      );
    }
  }
}

function queuePolicyOf(policy: ModelQueuePolicy | undefined, field: string, fail: Fail): QueuePolicy {
  if (policy === undefined) {
    return { timeoutAction: "REJECT", defaultTimeoutUs: 0, allowTimeoutOverride: false, maxQueueSize: 0 };
  }
  const action =
    policy.timeoutAction === ModelQueuePolicy_TimeoutAction.REJECT
      ? "REJECT"
      : policy.timeoutAction === ModelQueuePolicy_TimeoutAction.DELAY
        ? "DELAY"
        : fail(`${field}.timeout_action`, "is REJECT or DELAY");
  if (policy.defaultTimeoutMicroseconds < 0n || policy.defaultTimeoutMicroseconds > MAX_QUEUE_DELAY_US) {
    fail(`${field}.default_timeout_microseconds`, `${policy.defaultTimeoutMicroseconds} is not a timeout (0 to a day)`);
  }
  if (policy.maxQueueSize < 0) fail(`${field}.max_queue_size`, `${policy.maxQueueSize} is not a size (0: no bound)`);
  return {
    timeoutAction: action,
    defaultTimeoutUs: Number(policy.defaultTimeoutMicroseconds),
    allowTimeoutOverride: policy.allowTimeoutOverride,
    maxQueueSize: policy.maxQueueSize,
  };
}

/** The instance groups' counts added up, each at least 1 (as Triton fills an unset count). */
function instanceCountOf(config: ModelConfig, fail: Fail): number {
  let total = 0;
  config.instanceGroup.forEach((group, index) => {
    if (group.count < 0) fail(`instance_group[${index}].count`, `${group.count} is not a count (1 or more)`);
    // Added up before anything is built: a count of 2^31-1 is refused, not allocated.
    total += Math.max(1, group.count) * Math.max(1, group.gpus.length);
  });
  if (total > MAX_INSTANCES) fail("instance_group", `${total} instances; a model runs at most ${MAX_INSTANCES}`);
  return Math.max(1, total);
}

function warmupSampleOf(
  sample: ModelWarmup,
  index: number,
  config: ModelConfig,
  controls: ReadonlySet<string>,
  fail: Fail,
): WarmupSample {
  const field = `model_warmup[${index}]${sample.name ? ` '${sample.name}'` : ""}`;
  if (!sample.name) fail(`${field}.name`, "every warmup sample needs a name");
  const batched = config.maxBatchSize > 0;
  if (sample.batchSize < 0 || (batched ? sample.batchSize > config.maxBatchSize : sample.batchSize > 1)) {
    fail(
      `${field}.batch_size`,
      `${sample.batchSize} is not a batch size this model takes (${batched ? `1..${config.maxBatchSize}` : "1: it does not batch"})`,
    );
  }
  if (sample.count < 0 || sample.count > MAX_WARMUP_COUNT) {
    fail(`${field}.count`, `${sample.count} runs; at most ${MAX_WARMUP_COUNT}`);
  }
  const batchSize = Math.max(1, sample.batchSize);
  const inputs: WarmupInput[] = [];
  for (const [name, input] of Object.entries(sample.inputs)) {
    const inputField = `${field}.inputs["${name}"]`;
    const declared = config.input.find((candidate) => candidate.name === name);
    if (config.input.length > 0 && declared === undefined && !controls.has(name)) {
      fail(inputField, `the model has no input '${name}'`);
    }
    const datatype = datatypeFromConfig(input.dataType);
    if (datatype === undefined) fail(`${inputField}.data_type`, "set a data_type such as TYPE_FP32");
    const dims = input.dims.map(Number);
    if (dims.some((dim) => !Number.isSafeInteger(dim) || dim < 0)) {
      fail(`${inputField}.dims`, "every dimension must be a size (0 or more): warmup data has a shape");
    }
    const elements = dims.reduce((product, dim) => product * dim, 1) * batchSize;
    const bytes = elements * (DATATYPES[datatype!].byteSize || WARMUP_BYTES_ELEMENT);
    if (bytes > MAX_WARMUP_INPUT_BYTES) {
      fail(`${inputField}.dims`, `${bytes} bytes of warmup data; at most ${MAX_WARMUP_INPUT_BYTES}`);
    }
    inputs.push({ name, datatype: datatype!, dims, data: warmupDataOf(input.inputDataType, inputField, fail) });
  }
  if (inputs.length === 0) fail(`${field}.inputs`, "a warmup sample needs at least one input");
  return { name: sample.name, batchSize, count: Math.max(1, sample.count), inputs };
}

function warmupDataOf(choice: ModelWarmup["inputs"][string]["inputDataType"], field: string, fail: Fail): WarmupData {
  switch (choice?.$case) {
    case "zeroData":
      return { kind: "zero" };
    case "randomData":
      return { kind: "random" };
    case "inputDataFile": {
      const file = choice.value;
      // A plain name in the model's warmup/ folder: a config cannot point the data plane at other files.
      if (!file || file === "." || file === ".." || /[/\\\0]/.test(file)) {
        fail(`${field}.input_data_file`, `'${file}' is not a file name in the model's warmup/ folder`);
      }
      return { kind: "file", file };
    }
    default:
      return fail(field, "set zero_data, random_data or input_data_file");
  }
}

import {
  DataType,
  ModelSequenceBatching_Control_Kind as ControlKind,
  type ModelConfig,
  type ModelSequenceBatching,
  type ModelSequenceBatching_Control,
} from "../../proto/gen/ts/model_config.js";
import { datatypeFromConfig, type Datatype } from "./datatypes.js";

/** A boolean sequence control (CONTROL_SEQUENCE_START, _END, _READY): the tensor and its two values. */
export interface BoolControl {
  readonly name: string;
  readonly datatype: "INT32" | "FP32" | "BOOL";
  readonly falseValue: number | boolean;
  readonly trueValue: number | boolean;
}

/** `sequence_batching.direct`: each slot's next request, batched by slot, null requests where a slot has none. */
export interface DirectStrategy {
  readonly kind: "direct";
  readonly maxQueueDelayUs: number;
  /** In (0, 1]; 0 when not set (no wait for slots to fill). */
  readonly minimumSlotUtilization: number;
}

/** `sequence_batching.oldest`: a dynamic batch over the heads of the instance's sequences, one request of each in flight. */
export interface OldestStrategy {
  readonly kind: "oldest";
  readonly maxCandidateSequences: number;
  /** Ascending; `[max_batch_size]` when the config gives none and max_batch_size > 0. */
  readonly preferredBatchSizes: readonly number[];
  readonly maxQueueDelayUs: number;
  readonly preserveOrdering: boolean;
}

/**
 * `sequence_batching`, normalized (lib/model-repository/sequence-batching.ts checks it).
 *
 * The control tensors are not client inputs: as Triton (its sequence batcher adds them to each
 * request as override inputs, infer_request.cc AddOverrideInput), a client input of a control's
 * name is refused unless the config also declares it in `input`; when it does, the client
 * sends it (checked as any declared input) and the model sees the control's value in its place.
 */
export interface SequenceBatching {
  readonly strategy: DirectStrategy | OldestStrategy;
  /** A sequence with no request for this long is forgotten and its slot freed (0 in the config: 1 s, as Triton). */
  readonly maxSequenceIdleUs: number;
  /** Sequences each instance holds at once (Triton: max_candidate_sequences for oldest, else max(1, max_batch_size)). */
  readonly slotsPerInstance: number;
  readonly controls: {
    readonly start?: BoolControl;
    readonly end?: BoolControl;
    readonly ready?: BoolControl;
    /** CONTROL_SEQUENCE_CORRID: the correlation ID as a tensor (UINT64, INT64, UINT32, INT32 or BYTES). */
    readonly corrid?: { readonly name: string; readonly datatype: Datatype };
  };
  /** The config declares implicit state (`state`): engines that cannot hold it refuse the model (UnsupportedFeature). */
  readonly hasState: boolean;
  /** `iterative_sequence`: engines that cannot reschedule requests refuse the model (UnsupportedFeature). */
  readonly iterative: boolean;
}

/** The names of the control tensors a config declares (a client's input of one of these names is not the client's). */
export function controlNames(batching: SequenceBatching): ReadonlySet<string> {
  const { start, end, ready, corrid } = batching.controls;
  return new Set([start?.name, end?.name, ready?.name, corrid?.name].filter((name) => name !== undefined));
}

/** Why a sequence model does not run here under several --grpc-workers (forwarded, or refused at load). */
export const SEQUENCE_WORKERS_REASON =
  "sequence_batching keeps a sequence in one process; a sequence's requests may reach any of the --grpc-workers processes: serve it with --grpc-workers 1";

/** Sequence slots of all of a model's instances: more is a mistake in the config, not a plan. */
export const MAX_SEQUENCE_SLOTS = 65_536;

/** A day, in microseconds: the longest a batch may wait or a sequence idle (more is a mistake, and past some runtimes' timer range). */
export const MAX_QUEUE_DELAY_US = 86_400_000_000n;

/** Triton's SEQUENCE_IDLE_DEFAULT_MICROSECONDS: what `max_sequence_idle_microseconds: 0` (or none) means. */
const SEQUENCE_IDLE_DEFAULT_US = 1_000_000;

type Fail = (field: string, detail: string) => never;

const FIELD = "sequence_batching";

/** The data types a CONTROL_SEQUENCE_CORRID tensor may have (Triton's ValidateModelConfig). */
const CORRID_TYPES: ReadonlySet<DataType> = new Set([
  DataType.TYPE_UINT64,
  DataType.TYPE_INT64,
  DataType.TYPE_UINT32,
  DataType.TYPE_INT32,
  DataType.TYPE_STRING,
]);

/**
 * A config's `sequence_batching`, checked as Triton checks it (model_config_utils.cc
 * ValidateModelConfig, GetBooleanSequenceControlProperties, GetTypedSequenceControlProperties,
 * with Triton's texts), with Triton's defaults filled in (NormalizeModelConfig) and this data
 * plane's bounds; `fail` throws a ConfigError naming the field. `instanceCount` is the
 * model's instances (every one holds `slotsPerInstance` sequences).
 */
export function sequenceBatchingOf(
  config: ModelConfig,
  fail: Fail,
  instanceCount: number,
): SequenceBatching | undefined {
  const choice = config.schedulingChoice;
  if (choice?.$case !== "sequenceBatching") return undefined;
  const batching = choice.value;
  const model = config.name;
  if (config.responseCache?.enable === true) {
    fail(
      "response_cache.enable",
      `Response Cache does not currently support model ${model} with sequence batching scheduler. Please disable the response cache.`,
    );
  }
  const controls = controlsOf(batching, model, fail);
  const strategy = strategyOf(batching, config.maxBatchSize, model, fail);
  const slotsPerInstance =
    strategy.kind === "oldest" && strategy.maxCandidateSequences > 0
      ? strategy.maxCandidateSequences
      : Math.max(1, config.maxBatchSize);
  if (slotsPerInstance * instanceCount > MAX_SEQUENCE_SLOTS) {
    fail(
      FIELD,
      `${slotsPerInstance} sequence slots per instance × ${instanceCount} instance(s) is past ${MAX_SEQUENCE_SLOTS}, the most this data plane holds for a model (slots per instance: oldest.max_candidate_sequences, else max_batch_size)`,
    );
  }
  return {
    strategy,
    maxSequenceIdleUs: idleOf(batching.maxSequenceIdleMicroseconds, fail),
    slotsPerInstance,
    controls,
    hasState: batching.state.length > 0,
    iterative: batching.iterativeSequence,
  };
}

function idleOf(micros: bigint, fail: Fail): number {
  if (micros === 0n) return SEQUENCE_IDLE_DEFAULT_US;
  if (micros < 0n || micros > MAX_QUEUE_DELAY_US) {
    fail(`${FIELD}.max_sequence_idle_microseconds`, `${micros} is longer than a day (at most ${MAX_QUEUE_DELAY_US})`);
  }
  return Number(micros);
}

function queueDelayOf(micros: bigint, field: string, fail: Fail): number {
  if (micros < 0n || micros > MAX_QUEUE_DELAY_US) {
    fail(field, `${micros} is past what a batch may wait, at most ${MAX_QUEUE_DELAY_US} (a day)`);
  }
  return Number(micros);
}

function strategyOf(
  batching: ModelSequenceBatching,
  maxBatchSize: number,
  model: string,
  fail: Fail,
): DirectStrategy | OldestStrategy {
  const choice = batching.strategyChoice;
  if (choice?.$case === "oldest") {
    const field = `${FIELD}.oldest`;
    const oldest = choice.value;
    for (const size of oldest.preferredBatchSize) {
      if (size <= 0)
        fail(`${field}.preferred_batch_size`, `sequence batching preferred batch size must be positive for ${model}`);
      if (size > maxBatchSize) {
        fail(
          `${field}.preferred_batch_size`,
          `sequence batching preferred batch size must be <= max batch size for ${model}`,
        );
      }
    }
    if (oldest.maxCandidateSequences < 0) {
      fail(
        `${field}.max_candidate_sequences`,
        `${oldest.maxCandidateSequences} is not a number of sequences (0: max_batch_size)`,
      );
    }
    const preferred = [...new Set(oldest.preferredBatchSize)].sort((a, b) => a - b);
    return {
      kind: "oldest",
      maxCandidateSequences: oldest.maxCandidateSequences,
      // As Triton's NormalizeModelConfig: none given is max_batch_size (none when the model does not batch).
      preferredBatchSizes: preferred.length === 0 && maxBatchSize > 0 ? [maxBatchSize] : preferred,
      maxQueueDelayUs: queueDelayOf(oldest.maxQueueDelayMicroseconds, `${field}.max_queue_delay_microseconds`, fail),
      preserveOrdering: oldest.preserveOrdering,
    };
  }
  const field = `${FIELD}.direct`;
  const direct = choice?.value ?? { maxQueueDelayMicroseconds: 0n, minimumSlotUtilization: 0 };
  const utilization = direct.minimumSlotUtilization;
  // Triton refuses < 0 and > 1 (0 is "not set"); NaN is refused here too.
  if (!(utilization >= 0 && utilization <= 1)) {
    fail(
      `${field}.minimum_slot_utilization`,
      `sequence batching minimum slot utilization must be in range (0.0, 1.0] for ${model}`,
    );
  }
  return {
    kind: "direct",
    maxQueueDelayUs: queueDelayOf(direct.maxQueueDelayMicroseconds, `${field}.max_queue_delay_microseconds`, fail),
    minimumSlotUtilization: utilization,
  };
}

/** Where one control is in the config: its tensor, and the field that names it for errors. */
interface ControlAt {
  readonly name: string;
  readonly control: ModelSequenceBatching_Control;
  readonly field: string;
}

function controlsOf(batching: ModelSequenceBatching, model: string, fail: Fail): SequenceBatching["controls"] {
  const byKind = new Map<KnownKind, ControlAt[]>();
  const names = new Set<string>();
  batching.controlInput.forEach((input, index) => {
    const field = `${FIELD}.control_input[${index}]`;
    if (!input.name) fail(`${field}.name`, `sequence batching control tensor must have a name for ${model}`);
    const named = `${field} '${input.name}'`;
    // Triton catches a name given twice; one tensor with two kinds of control is the same
    // mistake (the model would get one tensor for both), refused here with the same words.
    const kinds = new Set(input.control.map((control) => control.kind));
    if (names.has(input.name) || kinds.size > 1) {
      fail(
        named,
        `sequence batching control tensor '${input.name}' is specified for multiple control kinds for ${model}`,
      );
    }
    names.add(input.name);
    input.control.forEach((control, controlIndex) => {
      const at = { name: input.name, control, field: `${named}.control[${controlIndex}]` };
      const kind = control.kind;
      if (kind === ControlKind.UNRECOGNIZED || !(kind in KIND_NAMES)) {
        fail(`${at.field}.kind`, `not a control kind (${Object.values(KIND_NAMES).join(", ")})`);
      }
      byKind.set(kind as KnownKind, [...(byKind.get(kind as KnownKind) ?? []), at]);
    });
  });
  const only = (kind: KnownKind): ControlAt | undefined => {
    const found = byKind.get(kind) ?? [];
    if (found.length > 1) {
      fail(found[1]!.field, `sequence batching specifies multiple ${KIND_NAMES[kind]} tensors for ${model}`);
    }
    return found[0];
  };
  const bool = (kind: KnownKind): BoolControl | undefined => {
    const at = only(kind);
    return at === undefined ? undefined : boolControlOf(at, KIND_NAMES[kind], model, fail);
  };
  const start = bool(ControlKind.CONTROL_SEQUENCE_START);
  const end = bool(ControlKind.CONTROL_SEQUENCE_END);
  const ready = bool(ControlKind.CONTROL_SEQUENCE_READY);
  const corridAt = only(ControlKind.CONTROL_SEQUENCE_CORRID);
  const corrid = corridAt === undefined ? undefined : corridOf(corridAt, model, fail);
  return {
    ...(start !== undefined ? { start } : {}),
    ...(end !== undefined ? { end } : {}),
    ...(ready !== undefined ? { ready } : {}),
    ...(corrid !== undefined ? { corrid } : {}),
  };
}

/** The control kinds, as Triton's messages name them. */
const KIND_NAMES: Readonly<Record<Exclude<ControlKind, ControlKind.UNRECOGNIZED>, string>> = {
  [ControlKind.CONTROL_SEQUENCE_START]: "CONTROL_SEQUENCE_START",
  [ControlKind.CONTROL_SEQUENCE_READY]: "CONTROL_SEQUENCE_READY",
  [ControlKind.CONTROL_SEQUENCE_END]: "CONTROL_SEQUENCE_END",
  [ControlKind.CONTROL_SEQUENCE_CORRID]: "CONTROL_SEQUENCE_CORRID",
};
type KnownKind = keyof typeof KIND_NAMES;

const VALUE_LISTS = ["int32_false_true", "fp32_false_true", "bool_false_true"] as const;

/** The false/true lists a control gives, by their config names. */
const valueListsOf = (control: ModelSequenceBatching_Control) =>
  ({
    int32_false_true: control.int32FalseTrue,
    fp32_false_true: control.fp32FalseTrue,
    bool_false_true: control.boolFalseTrue,
  }) as const;

const BOOL_DATATYPES = { int32_false_true: "INT32", fp32_false_true: "FP32", bool_false_true: "BOOL" } as const;

function boolControlOf({ name, control, field }: ControlAt, kind: string, model: string, fail: Fail): BoolControl {
  const lists = valueListsOf(control);
  const given = VALUE_LISTS.filter((list) => lists[list].length > 0);
  if (given.length === 0) {
    fail(
      field,
      `sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for ${kind} for ${model}`,
    );
  }
  if (given.length > 1) {
    fail(
      field,
      `sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and 'bool_false_true' for ${kind} for ${model}`,
    );
  }
  const list = given[0]!;
  const values = lists[list];
  if (values.length !== 2) {
    fail(
      `${field}.${list}`,
      `sequence batching control '${list}' must have exactly 2 entries for ${kind} for ${model}`,
    );
  }
  return { name, datatype: BOOL_DATATYPES[list], falseValue: values[0]!, trueValue: values[1]! };
}

function corridOf(
  { name, control, field }: ControlAt,
  model: string,
  fail: Fail,
): { name: string; datatype: Datatype } {
  const kind = KIND_NAMES[ControlKind.CONTROL_SEQUENCE_CORRID];
  const lists = valueListsOf(control);
  if (VALUE_LISTS.some((list) => lists[list].length > 0)) {
    fail(
      field,
      `sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for ${kind} for ${model}`,
    );
  }
  const datatype = CORRID_TYPES.has(control.dataType) ? datatypeFromConfig(control.dataType) : undefined;
  if (datatype === undefined) {
    fail(
      `${field}.data_type`,
      `unexpected data type for control ${kind} for ${model}. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING`,
    );
  }
  return { name, datatype: datatype! };
}

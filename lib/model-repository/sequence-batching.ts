import type { ModelConfig } from "../../proto/gen/ts/model_config.js";
import type { Datatype } from "./datatypes.js";

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

/** `sequence_batching`, normalized (lib/model-repository/sequence-batching.ts checks it). */
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

/** Sequence slots of all of a model's instances: more is a mistake in the config, not a plan. */
export const MAX_SEQUENCE_SLOTS = 65_536;

/**
 * A config's `sequence_batching`, checked as Triton checks it (model_config_utils.cc), with
 * Triton's defaults filled in; `fail` throws a ConfigError naming the field.
 * PLACEHOLDER (issue 38 contract): the checks land with the sequence-config task.
 */
export function sequenceBatchingOf(
  config: ModelConfig,
  fail: (field: string, detail: string) => never,
): SequenceBatching | undefined {
  void config;
  void fail;
  return undefined;
}

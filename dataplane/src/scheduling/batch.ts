import type { Scheduling } from "../../../lib/model-repository/scheduling.js";
import type { Tensor } from "../tensors/tensor.js";

/** What batch formation reads of a queued request. */
export interface Batchable {
  /** Its batch items (the first dimension of its inputs on a batching model; 1 otherwise). */
  readonly batchSize: number;
  /** When it was queued (nowNs). */
  readonly enqueuedNs: bigint;
  readonly inputs: readonly Tensor[];
}

/** How batches are formed for one model, from its scheduling. */
export interface BatchRules {
  /** Whether requests join batches (dynamic_batching); otherwise one request per execution. */
  readonly batching: boolean;
  /** The most batch items an execution takes (1 on a model that does not batch). */
  readonly maxBatchSize: number;
  /** Ascending; never empty (as Triton: max_batch_size when the config names none). */
  readonly preferredBatchSizes: readonly number[];
  readonly maxQueueDelayNs: bigint;
  readonly equalShapeInputs: ReadonlySet<string>;
}

export function batchRulesOf(scheduling: Scheduling): BatchRules {
  const batching = scheduling.dynamicBatching;
  const maxBatchSize = Math.max(1, scheduling.maxBatchSize);
  const preferred = batching?.preferredBatchSizes ?? [];
  return {
    batching: batching !== undefined,
    maxBatchSize,
    preferredBatchSizes: preferred.length > 0 ? preferred : [maxBatchSize],
    maxQueueDelayNs: BigInt(batching?.maxQueueDelayUs ?? 0) * 1000n,
    equalShapeInputs: scheduling.equalShapeInputs,
  };
}

/** Run these now, or wait (up to `waitNs`) for the batch to grow. */
export type BatchChoice<E> = { readonly run: readonly E[] } | { readonly waitNs: bigint };

/**
 * The next execution's requests, as Triton's dynamic batcher forms it
 * (DynamicBatchScheduler::GetDynamicBatch), from the queue in order: requests join while
 * the batch stays within max_batch_size and their inputs agree (the same inputs, equal
 * shapes where the config requires them); a batch that reaches a preferred size runs at
 * once, and one that cannot grow past the largest preferred size too; otherwise the oldest
 * request of the batch waits up to max_queue_delay_microseconds for more, after which the
 * batch runs as it is. `ordered` must not be empty.
 */
export function nextBatch<E extends Batchable>(ordered: Iterable<E>, rules: BatchRules, nowNs: bigint): BatchChoice<E> {
  const pending: E[] = [];
  if (!rules.batching) {
    for (const entry of ordered) return { run: [entry] };
    return { run: pending };
  }
  const { maxBatchSize, preferredBatchSizes } = rules;
  const largestPreferred = preferredBatchSizes[preferredBatchSizes.length - 1]!;
  let size = 0;
  /** Requests of the batch at the largest preferred size it reached (or before it would pass them all). */
  let best = 0;
  let full = false;
  let oldestNs: bigint | undefined;
  for (const entry of ordered) {
    const items = entry.batchSize;
    if (pending.length > 0) {
      if (size + items > largestPreferred && best === 0) best = pending.length;
      if (size + items > maxBatchSize || !joins(pending[0]!, entry, rules.equalShapeInputs)) {
        full = true;
        break;
      }
    }
    pending.push(entry);
    size += items;
    if (oldestNs === undefined || entry.enqueuedNs < oldestNs) oldestNs = entry.enqueuedNs;
    if (preferredBatchSizes.includes(size)) best = pending.length;
  }
  const waitedNs = nowNs - oldestNs!;
  const delayNs = rules.maxQueueDelayNs;
  const delayPassed = delayNs !== 0n && waitedNs >= delayNs;
  if (best > 0 && !delayPassed) return { run: pending.slice(0, best) };
  if (full || size >= largestPreferred || delayPassed || delayNs === 0n) return { run: pending };
  return { waitNs: delayNs - waitedNs };
}

/**
 * Whether `candidate` may share a batch that `first` started: the same inputs, and equal
 * shapes for the inputs whose shapes must match (Triton's RequiredEqualInputs).
 */
export function joins(first: Batchable, candidate: Batchable, equalShapeInputs: ReadonlySet<string>): boolean {
  if (first.inputs.length !== candidate.inputs.length) return false;
  for (const input of candidate.inputs) {
    const other = first.inputs.find((tensor) => tensor.name === input.name);
    if (other === undefined) return false;
    if (equalShapeInputs.has(input.name) && !sameShape(other.shape, input.shape)) return false;
  }
  return true;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  // The batch dimension may differ (it is what joining adds up); shapes compared past it.
  for (let index = 1; index < a.length; index++) if (a[index] !== b[index]) return false;
  return true;
}

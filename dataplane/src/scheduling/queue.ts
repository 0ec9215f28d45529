import { unavailable } from "../../../lib/errors.js";
import type { DynamicBatching, QueuePolicy } from "../../../lib/model-repository/scheduling.js";
import { policyOf } from "./parameters.js";

/** What the queue needs of a request. */
export interface QueueEntry {
  /** 1 the highest; 0 on a model without priority levels. */
  readonly level: number;
}

interface Level<E> {
  readonly policy: QueuePolicy;
  /** In arrival order. */
  readonly waiting: E[];
  /** Moved here past their timeout (timeout_action DELAY): after every waiting one of the level. */
  readonly delayed: E[];
}

/** The policy of a model that queues without dynamic_batching (Triton's default scheduler): unbounded, no timeout. */
const UNBOUNDED: QueuePolicy = {
  timeoutAction: "REJECT",
  defaultTimeoutUs: 0,
  allowTimeoutOverride: false,
  maxQueueSize: 0,
};

/**
 * Triton's priority queue (scheduler_utils.cc, PriorityQueue): one queue per priority level,
 * each with its policy (a bound on its size, a timeout and what happens past it); requests
 * are taken by level (1 first), then in arrival order, those delayed past their timeout
 * last in their level. Levels are made as requests use them (a config may declare a
 * million) and dropped once empty.
 */
export class PriorityQueue<E extends QueueEntry> {
  private readonly levels = new Map<number, Level<E>>();
  /** The levels made so far, ascending. */
  private readonly order: number[] = [];
  private count = 0;

  constructor(
    private readonly batching: DynamicBatching | undefined,
    private readonly describe: string,
  ) {}

  get size(): number {
    return this.count;
  }

  /** The levels that hold requests (an empty level is forgotten: it costs neither memory nor a visit). */
  get levelCount(): number {
    return this.levels.size;
  }

  policy(level: number): QueuePolicy {
    return this.levelOf(level).policy;
  }

  /** Queues `entry`, or refuses it UNAVAILABLE (Triton's words) when its level's queue is full. */
  add(entry: E): void {
    const level = this.levelOf(entry.level);
    const { maxQueueSize } = level.policy;
    if (maxQueueSize !== 0 && level.waiting.length + level.delayed.length >= maxQueueSize) {
      const field =
        this.batching?.queuePolicies.has(entry.level) === true
          ? `dynamic_batching.priority_queue_policy[${entry.level}].max_queue_size`
          : "dynamic_batching.default_queue_policy.max_queue_size";
      const where = entry.level === 0 ? "" : ` at priority level ${entry.level}`;
      throw unavailable(
        `Exceeds maximum queue size: ${this.describe} queues at most ${maxQueueSize} request${maxQueueSize === 1 ? "" : "s"}${where} (${field})`,
      );
    }
    level.waiting.push(entry);
    this.count++;
  }

  /** Takes `entry` out, wherever it waits; false if it was not queued. */
  remove(entry: E): boolean {
    const level = this.levels.get(entry.level);
    if (level === undefined) return false;
    if (takeOut(level.waiting, entry) || takeOut(level.delayed, entry)) {
      this.count--;
      if (level.waiting.length === 0 && level.delayed.length === 0) this.forget(entry.level);
      return true;
    }
    return false;
  }

  /**
   * Drops an empty level: batches walk the levels in use only, and a client sending each
   * request at another level of a config's million leaves nothing behind (levels kept
   * would cost every later request a walk over all of them).
   */
  private forget(number: number): void {
    this.levels.delete(number);
    this.order.splice(this.order.indexOf(number), 1);
  }

  /** Moves a waiting entry behind every other of its level (timeout_action DELAY). */
  delay(entry: E): void {
    const level = this.levels.get(entry.level);
    if (level !== undefined && takeOut(level.waiting, entry)) level.delayed.push(entry);
  }

  /** Every queued entry in the order batches take them. */
  *ordered(): IterableIterator<E> {
    for (const number of this.order) {
      const level = this.levels.get(number)!;
      yield* level.waiting;
      yield* level.delayed;
    }
  }

  private levelOf(number: number): Level<E> {
    let level = this.levels.get(number);
    if (level === undefined) {
      const { batching } = this;
      const policy =
        batching === undefined ? UNBOUNDED : policyOf(batching.queuePolicies, batching.defaultQueuePolicy, number);
      level = { policy, waiting: [], delayed: [] };
      this.levels.set(number, level);
      let index = this.order.length;
      while (index > 0 && this.order[index - 1]! > number) index--;
      this.order.splice(index, 0, number);
    }
    return level;
  }
}

function takeOut<E>(list: E[], entry: E): boolean {
  // Entries leave mostly from the front (batches take the oldest).
  const index = list.indexOf(entry);
  if (index < 0) return false;
  if (index === 0) list.shift();
  else list.splice(index, 1);
  return true;
}

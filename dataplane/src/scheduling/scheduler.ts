import { abortedError, unavailable } from "../../../lib/errors.js";
import type { Scheduling } from "../../../lib/model-repository/scheduling.js";
import type { Engine } from "../engines/engine.js";
import { nowNs } from "../models/statistics.js";
import { batchRulesOf, nextBatch, type BatchRules } from "./batch.js";
import {
  Entry,
  QueueingScheduler,
  unloadedWhileQueued,
  unwatch,
  type ExecutionStatistics,
  type RequestScheduler,
  type ScheduledRequest,
} from "./execution.js";
import { queueTimeoutUs } from "./parameters.js";
import { PriorityQueue } from "./queue.js";

export type { ExecutionReport, ExecutionStatistics, RequestScheduler, ScheduledRequest } from "./execution.js";

export interface SchedulerOptions {
  readonly model: string;
  readonly version: string;
  readonly scheduling: Scheduling;
  readonly engine: Engine;
  readonly statistics?: ExecutionStatistics;
}

/**
 * The scheduler of one model version, as Triton's schedulers run a model: requests queue
 * by priority level with each level's policy (PriorityQueue), and whenever one of the
 * model's instances is free the next execution is formed (dynamic_batching: a batch,
 * batch.ts; otherwise one request) and given to the engine, which is called once per
 * request with the same Execution. At most `instanceCount` executions run at once. A
 * request cancelled or past its deadline while it waits leaves the queue at once and never
 * runs; with preserve_ordering, responses leave in the order the requests came.
 */
export class Scheduler extends QueueingScheduler implements RequestScheduler {
  private readonly queue: PriorityQueue<Entry>;
  private readonly rules: BatchRules;
  /** Free instances, the lowest index last (taken first). */
  private readonly free: number[];
  /** When the batch being formed waits for more requests (max_queue_delay_microseconds). */
  private batchTimer: NodeJS.Timeout | undefined;
  private pumping = false;
  private pumpAgain = false;
  private closed = false;
  /** preserve_ordering: the last request to arrive is done. */
  private lastDone: Promise<void> | undefined;
  private readonly describe: string;

  constructor(private readonly options: SchedulerOptions) {
    super(options.engine, options.statistics);
    const { scheduling, model, version } = options;
    this.describe = `model '${model}' version ${version}`;
    this.queue = new PriorityQueue(scheduling.dynamicBatching, this.describe);
    this.rules = batchRulesOf(scheduling);
    this.free = Array.from({ length: scheduling.instanceCount }, (_, index) => scheduling.instanceCount - 1 - index);
  }

  /** Requests waiting for an execution. */
  get queued(): number {
    return this.queue.size;
  }

  /** Refuses every request still queued (the model's engine is closing); nothing is queued after. */
  close(): void {
    this.closed = true;
    clearTimeout(this.batchTimer);
    const reason = unloadedWhileQueued(this.describe);
    for (const entry of [...this.queue.ordered()]) this.leaveQueue(entry, reason);
  }

  /** Refused when its level's queue is full or the scheduler is closed; rejected UNAVAILABLE past its queue timeout (REJECT). */
  protected enqueue(scheduled: ScheduledRequest): Entry {
    if (this.closed) throw unavailable(`${this.describe} is unloading: its scheduler takes no more requests`);
    const { signal } = scheduled.options;
    if (signal.aborted) throw abortedError(signal);
    const entry = new Entry(scheduled, scheduled.place.level);
    this.queue.add(entry);
    const policy = this.queue.policy(entry.level);
    const timeoutUs = queueTimeoutUs(policy, scheduled.place.timeoutUs);
    if (timeoutUs > 0) {
      entry.timer = setTimeout(() => this.expire(entry, policy.timeoutAction, timeoutUs), Math.ceil(timeoutUs / 1000));
    }
    entry.onAbort = () => this.leaveQueue(entry, abortedError(signal));
    signal.addEventListener("abort", entry.onAbort, { once: true });
    if (this.options.scheduling.dynamicBatching?.preserveOrdering === true) {
      // Its turn ends once it and every request before it are done: one that ends early
      // (cancelled while it waits its turn) must not let the next overtake those before it.
      const previous = this.lastDone;
      entry.previous = previous;
      this.lastDone = previous === undefined ? entry.done : Promise.all([previous, entry.done]).then(() => undefined);
    }
    this.pump();
    return entry;
  }

  /** Past its queue timeout: refused (REJECT, Triton's words) or moved behind the others (DELAY). */
  private expire(entry: Entry, action: "REJECT" | "DELAY", timeoutUs: number): void {
    entry.timer = undefined;
    if (entry.state !== "queued") return;
    if (action === "REJECT") {
      const error = unavailable(`Request timeout expired: ${this.describe} queued it longer than ${timeoutUs} µs`);
      this.leaveQueue(entry, error);
    } else {
      this.queue.delay(entry);
      this.pump();
    }
  }

  /** A queued request leaves without running. */
  protected leaveQueue(entry: Entry, error: unknown): void {
    if (entry.state !== "queued" || !this.queue.remove(entry)) return;
    unwatch(entry);
    entry.state = "ended";
    entry.refuse(error);
    entry.end();
    // The batch being formed may have lost its oldest request.
    this.pump();
  }

  /** Starts executions while an instance is free and requests wait (re-entered calls run once more after). */
  private pump(): void {
    // Closed: its engine is closing, nothing more starts on it.
    if (this.closed) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        clearTimeout(this.batchTimer);
        this.batchTimer = undefined;
        while (this.free.length > 0 && this.queue.size > 0) {
          const choice = nextBatch(this.queue.ordered(), this.rules, nowNs());
          if ("waitNs" in choice) {
            const waitMs = Math.max(1, Math.ceil(Number(choice.waitNs) / 1e6));
            this.batchTimer = setTimeout(() => this.pump(), waitMs);
            break;
          }
          this.execute(choice.run);
        }
      } while (this.pumpAgain);
    } finally {
      this.pumping = false;
    }
  }

  private execute(requests: readonly Entry[]): void {
    const instance = this.free.pop()!;
    for (const entry of requests) this.queue.remove(entry);
    this.executions.start(instance, requests, () => {
      this.free.push(instance);
      this.free.sort((a, b) => b - a);
      this.pump();
    });
  }
}

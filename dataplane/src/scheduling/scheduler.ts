import { abortedError, unavailable } from "../../../lib/errors.js";
import type { Scheduling } from "../../../lib/model-repository/scheduling.js";
import type { Engine, EngineRequest, EngineResponse, Execution, InferOptions } from "../engines/engine.js";
import { nowNs, type ComputeTimings } from "../models/statistics.js";
import { batchRulesOf, nextBatch, type BatchRules } from "./batch.js";
import { queueTimeoutUs, type QueuePlace } from "./parameters.js";
import { PriorityQueue } from "./queue.js";

/** Where the scheduler records each execution (Triton's execution_count and batch_stats). */
export interface ExecutionStatistics {
  recordExecution(batchSize: number, timings: ComputeTimings): void;
}

/** What each request of an execution tells it once the request is done: its compute times. */
export interface ExecutionReport {
  report(timings: ComputeTimings): void;
}

/** One request given to the scheduler. */
export interface ScheduledRequest {
  readonly request: EngineRequest;
  /** Its batch items (the first dimension of its inputs on a batching model; 1 otherwise). */
  readonly batchSize: number;
  readonly place: QueuePlace;
  readonly options: Omit<InferOptions, "execution">;
  /**
   * The model answers each request once (it is not decoupled): its part of the execution is
   * over with its response, and the instance need not wait while the response is encoded and sent.
   */
  readonly oneResponse?: boolean;
  /**
   * Told when its execution starts: it waited from `enqueuedNs` to `startedNs`; it reports
   * its compute times to `execution` when it is done (the execution's batch statistics).
   */
  started?(enqueuedNs: bigint, startedNs: bigint, execution: ExecutionReport): void;
}

export interface SchedulerOptions {
  readonly model: string;
  readonly version: string;
  readonly scheduling: Scheduling;
  readonly engine: Engine;
  readonly statistics?: ExecutionStatistics;
}

/** Queued; running (its execution started); executed (the engine is done with it, its responses may still be leaving); ended. */
type EntryState = "queued" | "running" | "executed" | "ended";

/** A request in the scheduler, from its arrival until it is done. */
class Entry {
  state: EntryState = "queued";
  readonly enqueuedNs = nowNs();
  timer: NodeJS.Timeout | undefined;
  execution: RunningExecution | undefined;
  /** Settled when it leaves the queue: the engine's responses, or why it never ran. */
  readonly admitted: Promise<AsyncIterable<EngineResponse>>;
  start: (results: AsyncIterable<EngineResponse>) => void = () => undefined;
  refuse: (error: unknown) => void = () => undefined;
  /** Resolved when it is done (preserve_ordering: the next one's responses wait for it). */
  readonly done: Promise<void>;
  end: () => void = () => undefined;
  /** preserve_ordering: the request that came before. */
  previous: Promise<void> | undefined;
  onAbort: () => void = () => undefined;

  constructor(
    readonly scheduled: ScheduledRequest,
    readonly level: number,
  ) {
    this.admitted = new Promise((resolve, reject) => {
      this.start = resolve;
      this.refuse = reject;
    });
    this.admitted.catch(() => undefined); // read by the request's own iteration, unless it never gets there
    this.done = new Promise((resolve) => (this.end = resolve));
  }

  get batchSize(): number {
    return this.scheduled.batchSize;
  }

  get inputs(): EngineRequest["inputs"] {
    return this.scheduled.request.inputs;
  }

  get signal(): AbortSignal {
    return this.scheduled.options.signal;
  }
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
export class Scheduler {
  private readonly queue: PriorityQueue<Entry>;
  private readonly rules: BatchRules;
  /** Free instances, the lowest index last (taken first). */
  private readonly free: number[];
  private runningCount = 0;
  /** When the batch being formed waits for more requests (max_queue_delay_microseconds). */
  private batchTimer: NodeJS.Timeout | undefined;
  private pumping = false;
  private pumpAgain = false;
  private closed = false;
  /** preserve_ordering: the last request to arrive is done. */
  private lastDone: Promise<void> | undefined;
  private readonly describe: string;

  constructor(private readonly options: SchedulerOptions) {
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

  /** Requests whose execution has started and that the engine is not done with. */
  get running(): number {
    return this.runningCount;
  }

  /**
   * Queues the request and, once its execution starts, yields the engine's responses.
   * Refused (thrown on the first step) when its level's queue is full or the scheduler is
   * closed; rejected UNAVAILABLE past its queue timeout (timeout_action REJECT); CANCELLED
   * or DEADLINE_EXCEEDED when its lifetime ends while it waits.
   */
  async *infer(scheduled: ScheduledRequest): AsyncGenerator<EngineResponse> {
    const entry = this.enqueue(scheduled);
    try {
      const results = this.executing(entry, await entry.admitted);
      if (entry.previous === undefined) yield* results;
      else yield* inOrder(results, entry.previous, entry.signal);
    } finally {
      this.finish(entry);
    }
  }

  /**
   * The engine's responses to a request whose execution started; the request's part of the
   * execution is over once the engine has given them all (or its one response), as a Triton
   * instance is free once execute returns, while the responses are still on their way.
   */
  private async *executing(entry: Entry, results: AsyncIterable<EngineResponse>): AsyncGenerator<EngineResponse> {
    try {
      if (entry.scheduled.oneResponse !== true) {
        yield* readAhead(results, entry.signal, () => this.executed(entry));
        return;
      }
      for await (const response of results) {
        this.executed(entry);
        yield response;
      }
    } finally {
      this.executed(entry);
    }
  }

  /** Refuses every request still queued (the model's engine is closing); nothing is queued after. */
  close(): void {
    this.closed = true;
    clearTimeout(this.batchTimer);
    const reason = unavailable(`${this.describe} is unloading: the request was queued and did not run`);
    for (const entry of [...this.queue.ordered()]) this.leaveQueue(entry, reason);
  }

  private enqueue(scheduled: ScheduledRequest): Entry {
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
  private leaveQueue(entry: Entry, error: unknown): void {
    if (entry.state !== "queued" || !this.queue.remove(entry)) return;
    this.unwatch(entry);
    entry.state = "ended";
    entry.refuse(error);
    entry.end();
    // The batch being formed may have lost its oldest request.
    this.pump();
  }

  private unwatch(entry: Entry): void {
    clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.signal.removeEventListener("abort", entry.onAbort);
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
    const running = new RunningExecution(
      requests,
      () => {
        this.free.push(instance);
        this.free.sort((a, b) => b - a);
        this.pump();
      },
      this.options.statistics,
    );
    const execution: Execution = {
      instance,
      requests: requests.map((entry) => entry.scheduled.request),
      release: () => running.release(),
    };
    const startedNs = nowNs();
    for (const entry of requests) {
      this.queue.remove(entry);
      this.unwatch(entry);
      entry.state = "running";
      entry.execution = running;
      this.runningCount++;
    }
    for (const entry of requests) {
      const { scheduled } = entry;
      scheduled.started?.(entry.enqueuedNs, startedNs, running);
      try {
        entry.start(this.options.engine.infer(scheduled.request, { ...scheduled.options, execution }));
      } catch (error) {
        entry.start(failing(error));
      }
    }
  }

  /** The engine is done with the request: it no longer holds its execution's instance. */
  private executed(entry: Entry): void {
    if (entry.state !== "running") return;
    entry.state = "executed";
    this.runningCount--;
    entry.execution?.requestDone();
  }

  /** The request is done (answered, failed, or stopped by its caller). */
  private finish(entry: Entry): void {
    if (entry.state === "queued") this.leaveQueue(entry, abortedError(entry.signal));
    this.executed(entry);
    if (entry.state === "executed") {
      entry.state = "ended";
      entry.end();
    }
  }
}

/** An execution under way: its instance is free once every request is done or the engine releases it. */
class RunningExecution implements ExecutionReport {
  private remaining: number;
  private reports = 0;
  private released = false;
  private readonly batchSize: number;
  private inputNs = 0n;
  private inferNs = 0n;
  private outputNs = 0n;

  constructor(
    private readonly requests: readonly Entry[],
    private readonly free: () => void,
    private readonly statistics: ExecutionStatistics | undefined,
  ) {
    this.remaining = requests.length;
    this.batchSize = requests.reduce((total, entry) => total + entry.batchSize, 0);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.free();
  }

  requestDone(): void {
    if (--this.remaining === 0) this.release();
  }

  /**
   * One request's compute times: the execution's are its requests' inputs and outputs
   * added up (each request's own work) and the longest time in the engine (they ran as one).
   */
  report(timings: ComputeTimings): void {
    this.inputNs += timings.computeInputNs;
    this.outputNs += timings.computeOutputNs;
    if (timings.computeInferNs > this.inferNs) this.inferNs = timings.computeInferNs;
    if (++this.reports === this.requests.length) {
      this.statistics?.recordExecution(this.batchSize, {
        computeInputNs: this.inputNs,
        computeInferNs: this.inferNs,
        computeOutputNs: this.outputNs,
      });
    }
  }
}

/**
 * preserve_ordering: the engine's responses, the first held back until the request that
 * came before is done. The engine is read meanwhile (the execution runs); only what leaves waits.
 */
async function* inOrder(
  results: AsyncIterable<EngineResponse>,
  previous: Promise<void>,
  signal: AbortSignal,
): AsyncGenerator<EngineResponse> {
  const iterator = results[Symbol.asyncIterator]();
  let waiting = true;
  let finished = false;
  try {
    for (;;) {
      // An error leaves in order too.
      const step = await iterator.next().catch(async (error: unknown) => {
        finished = true;
        if (waiting) await untilDone(previous, signal);
        throw error;
      });
      finished = step.done === true;
      if (waiting) {
        await untilDone(previous, signal);
        waiting = false;
      }
      if (step.done === true) return;
      yield step.value;
    }
  } finally {
    if (!finished) await iterator.return?.();
  }
}

/**
 * A decoupled model's responses, taken from the engine as fast as it makes them and kept
 * until the caller reads them: its execution is over, and its instance free, when the
 * engine is done, however slowly the caller reads (as a Triton instance sends a decoupled
 * model's responses without waiting for its client). Read lazily, a caller that stopped
 * reading would hold the instance, and every other caller of the model, for good. Once the
 * caller is gone (cancelled, past its deadline) what is kept is dropped.
 */
async function* readAhead(
  results: AsyncIterable<EngineResponse>,
  signal: AbortSignal,
  engineDone: () => void,
): AsyncGenerator<EngineResponse> {
  const iterator = results[Symbol.asyncIterator]();
  const kept: EngineResponse[] = [];
  let failure: { readonly error: unknown } | undefined;
  let ended = false;
  let callerLeft = false;
  let wake: (() => void) | undefined;
  const reading = (async () => {
    try {
      while (!callerLeft) {
        const step = await iterator.next();
        if (step.done === true) break;
        kept.push(step.value);
        wake?.();
      }
      // The caller left before the end: the engine stops at the response it made last.
      if (callerLeft) await iterator.return?.();
    } catch (error) {
      failure = { error };
    } finally {
      ended = true;
      engineDone();
      wake?.();
    }
  })();
  try {
    for (;;) {
      // A caller whose lifetime is over takes none of what is kept.
      if (signal.aborted) throw abortedError(signal);
      const response = kept.shift();
      if (response !== undefined) {
        yield response;
        continue;
      }
      if (ended) {
        if (failure !== undefined) throw failure.error;
        return;
      }
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
  } finally {
    callerLeft = true;
    await reading;
  }
}

/** Waits for the request before to be done, unless this one's lifetime ends first. */
function untilDone(previous: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(abortedError(signal));
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(abortedError(signal));
    signal.addEventListener("abort", onAbort, { once: true });
    void previous.then(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}

/** An engine's infer that threw instead of returning its responses: the request fails with it. */
// eslint-disable-next-line require-yield
async function* failing(error: unknown): AsyncGenerator<EngineResponse> {
  throw error;
}

import { abortedError, unavailable, type DataPlaneError } from "../../../lib/errors.js";
import type { Engine, EngineRequest, EngineResponse, Execution, InferOptions } from "../engines/engine.js";
import { nowNs, type ComputeTimings } from "../models/statistics.js";
import type { SequenceRequest } from "../tensors/parameters.js";
import type { QueuePlace } from "./parameters.js";

/**
 * What every scheduler of the data plane shares (scheduler.ts's queue of a model, sequence.ts's
 * sequence slots): a request from its arrival to its end (Entry), an execution given to the
 * engine (startExecution), its responses read ahead or kept in order, and its statistics.
 */

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
  /** Its correlation ID and flags, for a model with sequence_batching (tensors/parameters.ts sequenceOf). */
  readonly sequence?: SequenceRequest;
  /**
   * Told when its execution starts: it waited from `enqueuedNs` to `startedNs`; it reports
   * its compute times to `execution` when it is done (the execution's batch statistics).
   */
  started?(enqueuedNs: bigint, startedNs: bigint, execution: ExecutionReport): void;
}

/** A scheduler of one model version, as the registry, the pipeline and the metrics see it. */
export interface RequestScheduler {
  /** Queues the request and, once its execution starts, yields the engine's responses. */
  infer(scheduled: ScheduledRequest): AsyncGenerator<EngineResponse>;
  /** Requests waiting for an execution. */
  readonly queued: number;
  /** Requests whose execution has started and that the engine is not done with. */
  readonly running: number;
  /** Refuses every request still queued (the model's engine is closing). */
  close(): void;
}

/** Queued; running (its execution started); executed (the engine is done with it, its responses may still be leaving); ended. */
type EntryState = "queued" | "running" | "executed" | "ended";

/** A request in a scheduler, from its arrival until it is done. */
export class Entry {
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
    /** A null request (sequence batching's padding): the scheduler's own, no client's; not counted as running. */
    readonly padding = false,
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
 * The executions of one scheduler: each given to the engine on one instance, its requests'
 * responses read (ahead for a decoupled model), and `running` counted. The scheduler says
 * how a queued request leaves its queue (`leaveQueue`) and hears when the engine is done
 * with a request (`onExecuted`).
 */
export class Executions {
  private runningCount = 0;

  constructor(
    private readonly engine: Engine,
    private readonly statistics: ExecutionStatistics | undefined,
    private readonly leaveQueue: (entry: Entry, error: unknown) => void,
    private readonly onExecuted: (entry: Entry) => void = () => undefined,
  ) {}

  /** Clients' requests whose execution has started and that the engine is not done with. */
  get running(): number {
    return this.runningCount;
  }

  /**
   * Once the entry's execution starts, the engine's responses; the entry is finished when
   * the caller stops reading (answered, failed or gone).
   */
  async *respond(entry: Entry): AsyncGenerator<EngineResponse> {
    try {
      const results = this.executing(entry, await entry.admitted);
      if (entry.previous === undefined) yield* results;
      else yield* inOrder(results, entry.previous, entry.signal);
    } finally {
      this.finish(entry);
    }
  }

  /**
   * Runs `entries` as one execution on `instance`: the engine is called once per request,
   * all with the same Execution; `onFree` is called once the instance is free again.
   * The entries must have left their queue.
   */
  start(instance: number, entries: readonly Entry[], onFree: () => void): RunningExecution {
    const running = new RunningExecution(entries, onFree, this.statistics);
    const execution: Execution = {
      instance,
      requests: entries.map((entry) => entry.scheduled.request),
      release: () => running.release(),
    };
    const startedNs = nowNs();
    for (const entry of entries) {
      unwatch(entry);
      entry.state = "running";
      entry.execution = running;
      if (!entry.padding) this.runningCount++;
    }
    for (const entry of entries) {
      const { scheduled } = entry;
      scheduled.started?.(entry.enqueuedNs, startedNs, running);
      try {
        entry.start(this.engine.infer(scheduled.request, { ...scheduled.options, execution }));
      } catch (error) {
        entry.start(failing(error));
      }
    }
    return running;
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

  /** The engine is done with the request: it no longer holds its execution's instance. */
  private executed(entry: Entry): void {
    if (entry.state !== "running") return;
    entry.state = "executed";
    if (!entry.padding) this.runningCount--;
    entry.execution?.requestDone();
    this.onExecuted(entry);
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

/**
 * What a scheduler of the data plane is on top of its queue: `infer` queues a request
 * (`enqueue`, which throws to refuse it) and yields its responses once its execution starts;
 * the executions and their running count are shared (Executions). A queued request whose
 * caller is gone leaves through `leaveQueue`; `onExecuted` hears when the engine is done with one.
 */
export abstract class QueueingScheduler implements RequestScheduler {
  protected readonly executions: Executions;

  constructor(engine: Engine, statistics: ExecutionStatistics | undefined) {
    this.executions = new Executions(
      engine,
      statistics,
      (entry, error) => this.leaveQueue(entry, error),
      (entry) => this.onExecuted(entry),
    );
  }

  abstract get queued(): number;

  get running(): number {
    return this.executions.running;
  }

  /**
   * Queues the request and, once its execution starts, yields the engine's responses;
   * refused (thrown on the first step) as `enqueue` says; CANCELLED or DEADLINE_EXCEEDED
   * when its lifetime ends while it waits.
   */
  async *infer(scheduled: ScheduledRequest): AsyncGenerator<EngineResponse> {
    yield* this.executions.respond(this.enqueue(scheduled));
  }

  abstract close(): void;

  protected abstract enqueue(scheduled: ScheduledRequest): Entry;

  protected abstract leaveQueue(entry: Entry, error: unknown): void;

  protected onExecuted(entry: Entry): void {
    void entry;
  }
}

/** Why a request still queued when its model's engine closes did not run. */
export const unloadedWhileQueued = (describe: string): DataPlaneError =>
  unavailable(`${describe} is unloading: the request was queued and did not run`);

/** Stops watching a queued entry's timer and its caller's signal (it leaves the queue). */
export function unwatch(entry: Entry): void {
  clearTimeout(entry.timer);
  entry.timer = undefined;
  entry.signal.removeEventListener("abort", entry.onAbort);
}

/** An execution under way: its instance is free once every request is done or the engine releases it. */
export class RunningExecution implements ExecutionReport {
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

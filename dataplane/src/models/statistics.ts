import type { InferBatchStatistics, ModelStatistics, StatisticDuration } from "../../../proto/gen/ts/grpc_service.js";

/** Nanoseconds from a monotonic clock. */
export const nowNs = (): bigint => process.hrtime.bigint();

/**
 * Sums below this many nanoseconds are kept in a number (exact up to 2^53), and carried
 * into a BigInt past it: adding a request's times then allocates nothing (a BigInt sum
 * allocated a new BigInt per addition, a dozen per request), and a sum never loses a
 * nanosecond, however long the server runs.
 */
const CARRY_NS = 2 ** 52;

class Duration {
  private count = 0;
  private ns = 0;
  private carriedNs = 0n;

  /** `ns`: whole nanoseconds. */
  add(ns: number): void {
    this.count++;
    this.ns += ns;
    if (this.ns >= CARRY_NS) {
      this.carriedNs += BigInt(this.ns);
      this.ns = 0;
    }
  }

  toProto(): StatisticDuration {
    return { count: BigInt(this.count), ns: this.carriedNs + BigInt(this.ns) };
  }
}

/** Nanoseconds in milliseconds (performance.now() deltas), rounded to whole nanoseconds. */
export const msToNs = (ms: number): number => Math.round(ms * 1e6);

/** How long an execution's (or one request's) compute phases took, in nanoseconds. */
export interface ComputeTimings {
  readonly computeInputNs: bigint;
  readonly computeInferNs: bigint;
  readonly computeOutputNs: bigint;
}

/** How long each phase of one request took, in nanoseconds. */
export interface RequestTimings extends ComputeTimings {
  readonly queueNs: bigint;
}

/**
 * One request's times in whole nanoseconds, as numbers: what the inference pipeline
 * reports per request without allocating (RequestTimings' BigInts are for the schedulers).
 */
export interface RequestPhases {
  totalNs: number;
  queueNs: number;
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

/** The executions of one batch size (Triton's InferBatchStatistics). */
class BatchStatistics {
  readonly computeInput = new Duration();
  readonly computeInfer = new Duration();
  readonly computeOutput = new Duration();

  toProto(batchSize: number): InferBatchStatistics {
    return {
      batchSize: BigInt(batchSize),
      computeInput: this.computeInput.toProto(),
      computeInfer: this.computeInfer.toProto(),
      computeOutput: this.computeOutput.toProto(),
    };
  }
}

/**
 * Cumulative statistics of one model version, in the shape of Triton's ModelStatistics:
 * successes and failures with their total time, and the time spent in each phase
 * (queued, decoding inputs, running the engine, encoding outputs), by request; and the
 * model's executions (a batch of requests run together counts once), by batch size.
 */
export class VersionStatistics {
  private readonly success = new Duration();
  private readonly fail = new Duration();
  private readonly queue = new Duration();
  private readonly computeInput = new Duration();
  private readonly computeInfer = new Duration();
  private readonly computeOutput = new Duration();
  private inferenceCount = 0;
  private executionCount = 0;
  private lastInferenceMs = 0;
  private readonly batches = new Map<number, BatchStatistics>();

  /**
   * A request answered: `batchSize` inferences; `ownExecution`: it ran on its own (not in a
   * batch the scheduler records once for all its requests), so it is an execution too.
   */
  recordRequest(batchSize: number, phases: RequestPhases, ownExecution: boolean): void {
    this.success.add(phases.totalNs);
    this.queue.add(phases.queueNs);
    this.computeInput.add(phases.computeInputNs);
    this.computeInfer.add(phases.computeInferNs);
    this.computeOutput.add(phases.computeOutputNs);
    this.inferenceCount += batchSize;
    this.lastInferenceMs = Date.now();
    if (ownExecution)
      this.addExecution(batchSize, phases.computeInputNs, phases.computeInferNs, phases.computeOutputNs);
  }

  /** A request answered (timed in BigInts, as the warm-up times its samples). Its execution is recorded on its own (recordExecution). */
  recordSuccess(totalNs: bigint, batchSize: number, timings: RequestTimings): void {
    this.recordRequest(
      batchSize,
      {
        totalNs: Number(totalNs),
        queueNs: Number(timings.queueNs),
        computeInputNs: Number(timings.computeInputNs),
        computeInferNs: Number(timings.computeInferNs),
        computeOutputNs: Number(timings.computeOutputNs),
      },
      false,
    );
  }

  /** One execution of the model, of `batchSize` batch items (every request's added up). */
  recordExecution(batchSize: number, timings: ComputeTimings): void {
    this.addExecution(
      batchSize,
      Number(timings.computeInputNs),
      Number(timings.computeInferNs),
      Number(timings.computeOutputNs),
    );
  }

  /** `ns`: the failed request's time from arrival, in whole nanoseconds. */
  recordFailure(ns: bigint | number): void {
    this.fail.add(Number(ns));
    this.lastInferenceMs = Date.now();
  }

  private addExecution(batchSize: number, inputNs: number, inferNs: number, outputNs: number): void {
    this.executionCount++;
    let batch = this.batches.get(batchSize);
    if (batch === undefined) {
      batch = new BatchStatistics();
      this.batches.set(batchSize, batch);
    }
    batch.computeInput.add(inputNs);
    batch.computeInfer.add(inferNs);
    batch.computeOutput.add(outputNs);
  }

  toProto(name: string, version: string): ModelStatistics {
    return {
      name,
      version,
      lastInference: BigInt(this.lastInferenceMs),
      inferenceCount: BigInt(this.inferenceCount),
      executionCount: BigInt(this.executionCount),
      inferenceStats: {
        success: this.success.toProto(),
        fail: this.fail.toProto(),
        queue: this.queue.toProto(),
        computeInput: this.computeInput.toProto(),
        computeInfer: this.computeInfer.toProto(),
        computeOutput: this.computeOutput.toProto(),
        cacheHit: { count: 0n, ns: 0n },
        cacheMiss: { count: 0n, ns: 0n },
      },
      batchStats: [...this.batches].sort(([a], [b]) => a - b).map(([batchSize, batch]) => batch.toProto(batchSize)),
      memoryUsage: [],
      responseStats: {},
    };
  }
}

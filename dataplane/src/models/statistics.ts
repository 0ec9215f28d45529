import type { InferBatchStatistics, ModelStatistics, StatisticDuration } from "../../../proto/gen/ts/grpc_service.js";

/** Nanoseconds from a monotonic clock. */
export const nowNs = (): bigint => process.hrtime.bigint();

class Duration {
  count = 0n;
  ns = 0n;

  add(ns: bigint): void {
    this.count += 1n;
    this.ns += ns;
  }

  toProto(): StatisticDuration {
    return { count: this.count, ns: this.ns };
  }
}

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
  private inferenceCount = 0n;
  private executionCount = 0n;
  private lastInferenceMs = 0n;
  private readonly batches = new Map<number, BatchStatistics>();

  /** A request answered: `batchSize` inferences. Its execution is recorded on its own (recordExecution). */
  recordSuccess(totalNs: bigint, batchSize: number, timings: RequestTimings): void {
    this.success.add(totalNs);
    this.queue.add(timings.queueNs);
    this.computeInput.add(timings.computeInputNs);
    this.computeInfer.add(timings.computeInferNs);
    this.computeOutput.add(timings.computeOutputNs);
    this.inferenceCount += BigInt(batchSize);
    this.lastInferenceMs = BigInt(Date.now());
  }

  /** One execution of the model, of `batchSize` batch items (every request's added up). */
  recordExecution(batchSize: number, timings: ComputeTimings): void {
    this.executionCount += 1n;
    let batch = this.batches.get(batchSize);
    if (batch === undefined) {
      batch = new BatchStatistics();
      this.batches.set(batchSize, batch);
    }
    batch.computeInput.add(timings.computeInputNs);
    batch.computeInfer.add(timings.computeInferNs);
    batch.computeOutput.add(timings.computeOutputNs);
  }

  recordFailure(totalNs: bigint): void {
    this.fail.add(totalNs);
    this.lastInferenceMs = BigInt(Date.now());
  }

  toProto(name: string, version: string): ModelStatistics {
    return {
      name,
      version,
      lastInference: this.lastInferenceMs,
      inferenceCount: this.inferenceCount,
      executionCount: this.executionCount,
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

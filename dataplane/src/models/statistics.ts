import type { ModelStatistics, StatisticDuration } from "../../../proto/gen/ts/grpc_service.js";

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

/** How long each phase of one request took, in nanoseconds. */
export interface RequestTimings {
  readonly queueNs: bigint;
  readonly computeInputNs: bigint;
  readonly computeInferNs: bigint;
  readonly computeOutputNs: bigint;
}

/**
 * Cumulative statistics of one model version, in the shape of Triton's ModelStatistics:
 * successes and failures with their total time, and the time spent in each phase
 * (decoding inputs, running the engine, encoding outputs).
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

  recordSuccess(totalNs: bigint, batchSize: number, timings: RequestTimings): void {
    this.success.add(totalNs);
    this.queue.add(timings.queueNs);
    this.computeInput.add(timings.computeInputNs);
    this.computeInfer.add(timings.computeInferNs);
    this.computeOutput.add(timings.computeOutputNs);
    this.inferenceCount += BigInt(batchSize);
    this.executionCount += 1n;
    this.lastInferenceMs = BigInt(Date.now());
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
      batchStats: [],
      memoryUsage: [],
      responseStats: {},
    };
  }
}

import type { RequestHead } from "../inference/request-scope.js";
import { sequenceKey, sequenceOf } from "../tensors/parameters.js";

/**
 * The lane of a stream's request: the requests of one sequence (the same model, version
 * asked and correlation ID, typed: 5 and "5" differ) share one; undefined for a request
 * outside any sequence. Throws sequenceOf's INVALID_ARGUMENT for malformed sequence
 * parameters.
 */
export function laneOf(request: RequestHead): string | undefined {
  const sequence = sequenceOf(request.parameters);
  if (sequence === undefined) return undefined;
  const { modelName, modelVersion } = request;
  // Lengths first: whatever the names hold, two different triples never give one key.
  return `${modelName.length}:${modelName}${modelVersion.length}:${modelVersion}${sequenceKey(sequence.id)}`;
}

/** Starts a waiting request (true) or drops it (false: the stream ended first). */
type Turn = (run: boolean) => void;

/**
 * Sequence order on one stream (Triton reads a stream's requests in order and runs one
 * request of a sequence at a time): the requests of a lane start in arrival order, each once
 * the one before it has finished, so their responses also leave in that order, and a
 * forwarded sequence reaches its upstream in order. Requests without a lane, and different
 * lanes, run concurrently. A failed request does not hold back the next. When the stream
 * ends, requests still waiting are dropped without running. A lane is forgotten as soon as
 * it has nothing running or waiting.
 */
export class SequenceLanes {
  /** Per lane with a request running, the requests waiting behind it, oldest first. */
  private readonly lanes = new Map<string, Turn[]>();

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener("abort", this.dropWaiting, { once: true });
  }

  /** Lanes with a request running (for tests and accounting). */
  get size(): number {
    return this.lanes.size;
  }

  /**
   * Runs `serve` once every earlier request of `lane` has finished (at once without a lane);
   * settles when it has run, or when it was dropped because the stream ended.
   */
  run(lane: string | undefined, serve: () => Promise<void>): Promise<void> {
    // Without a lane no promise of its own: most requests of most streams have none.
    return lane === undefined ? serve() : this.inLane(lane, serve);
  }

  private async inLane(lane: string, serve: () => Promise<void>): Promise<void> {
    if (this.signal.aborted) return;
    let waiting = this.lanes.get(lane);
    if (waiting === undefined) {
      waiting = [];
      this.lanes.set(lane, waiting);
    } else if (!(await new Promise<boolean>((turn) => waiting!.push(turn)))) {
      return;
    }
    try {
      await serve();
    } finally {
      this.next(lane, waiting);
    }
  }

  /** The lane's next request starts; a lane with none waiting is forgotten. */
  private next(lane: string, waiting: Turn[]): void {
    const turn = waiting.shift();
    if (turn !== undefined) turn(true);
    else if (this.lanes.get(lane) === waiting) this.lanes.delete(lane);
  }

  private readonly dropWaiting = (): void => {
    for (const waiting of this.lanes.values()) for (const turn of waiting.splice(0)) turn(false);
    this.lanes.clear();
  };
}

import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import { abortedError } from "../../../lib/errors.js";

/** Node's timers take at most 2^31 - 1 ms; longer waits are made of several. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/** Waits `milliseconds` (any length) unless the request is cancelled first (then throws why it was). */
export async function pause(milliseconds: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw abortedError(signal);
  let remaining = milliseconds;
  while (remaining > 0) {
    const step = Math.min(remaining, LONGEST_TIMER_MS);
    try {
      await sleep(step, undefined, { signal });
    } catch {
      throw abortedError(signal);
    }
    remaining -= step;
  }
}

/** How long an engine may compute for one request before letting the rest of the server run. */
const SLICE_MS = 4;

/**
 * Per-request CPU work in slices. An engine that computes step by step (token by token)
 * calls `step()` each time: after SLICE_MS of work it yields to the event loop, so other
 * calls, health checks and /metrics are served, and once the request is cancelled it
 * throws, so the work stops.
 */
export class CpuSlices {
  private sliceStart = performance.now();

  constructor(private readonly signal: AbortSignal) {}

  async step(): Promise<void> {
    if (this.signal.aborted) throw abortedError(this.signal);
    if (performance.now() - this.sliceStart < SLICE_MS) return;
    await nextTurn();
    this.sliceStart = performance.now();
    if (this.signal.aborted) throw abortedError(this.signal);
  }
}

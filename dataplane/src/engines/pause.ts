import { setTimeout as sleep } from "node:timers/promises";
import { abortedError } from "../errors.js";

/** Waits `milliseconds` unless the request is cancelled first (then throws why it was). */
export async function pause(milliseconds: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw abortedError(signal);
  if (milliseconds <= 0) return;
  try {
    await sleep(milliseconds, undefined, { signal });
  } catch {
    throw abortedError(signal);
  }
}

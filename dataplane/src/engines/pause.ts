import { setTimeout as sleep } from "node:timers/promises";
import { DataPlaneError } from "../errors.js";

/** Waits `milliseconds` unless the request is cancelled first (then throws Cancelled). */
export async function pause(milliseconds: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw new DataPlaneError("Cancelled", "request cancelled");
  if (milliseconds <= 0) return;
  try {
    await sleep(milliseconds, undefined, { signal });
  } catch {
    throw new DataPlaneError("Cancelled", "request cancelled");
  }
}

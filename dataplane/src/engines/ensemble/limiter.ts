import { abortedError } from "../../../../lib/errors.js";

/**
 * At most `limit` holders at once (Triton's per-step in-flight limiter of an ensemble);
 * the others wait in arrival order. A waiter whose signal aborts leaves the line.
 */
export class Limiter {
  private held = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw abortedError(signal);
    if (this.held < this.limit) {
      this.held++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const granted = (): void => {
        signal.removeEventListener("abort", aborted);
        resolve();
      };
      const aborted = (): void => {
        this.waiting.splice(this.waiting.indexOf(granted), 1);
        reject(abortedError(signal));
      };
      signal.addEventListener("abort", aborted, { once: true });
      this.waiting.push(granted);
    });
  }

  release(): void {
    const next = this.waiting.shift();
    // Handed straight to the next in line: the count of holders stays.
    if (next !== undefined) next();
    else this.held--;
  }
}

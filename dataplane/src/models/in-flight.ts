/**
 * How many requests are running, so what must wait for them can: shutdown waits for the
 * server's (once none is left, what still holds the server open — health Watch streams,
 * idle ModelStreamInfer streams — carries no work and can be cut), and a replaced or
 * unloaded model's engine is closed only after its own have finished.
 */
export class InFlight {
  private count = 0;
  private waiters: (() => void)[] = [];

  begin(): void {
    this.count++;
  }

  end(): void {
    this.count--;
    if (this.count === 0) for (const wake of this.waiters.splice(0)) wake();
  }

  get size(): number {
    return this.count;
  }

  /** Resolves when no request is running (at once if none is). */
  idle(): Promise<void> {
    return this.count === 0 ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve));
  }
}

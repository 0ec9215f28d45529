/**
 * How many inference requests are running, so shutdown can wait for exactly those: once
 * none is left, what still holds the server open (health Watch streams, idle
 * ModelStreamInfer streams) carries no work and can be cut.
 */
export class ActiveRequests {
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

/**
 * Closed-loop load for e2e tests: `clients` loops, each sending its next request as soon as
 * the last one is answered, until stopped. Counts what was sent and what failed (with the
 * first few distinct errors, to say why).
 */
export interface LoadOutcome {
  readonly sent: number;
  readonly failed: number;
  readonly errors: readonly string[];
}

export class ClosedLoopLoad {
  private stopped = false;
  private sent = 0;
  private failed = 0;
  private readonly errors = new Set<string>();
  private readonly loops: Promise<void>[];

  constructor(clients: number, request: (client: number) => Promise<void>) {
    this.loops = Array.from({ length: clients }, async (_, client) => {
      while (!this.stopped) {
        this.sent++;
        const failed = await request(client).then(
          () => false,
          (error: unknown) => {
            this.failed++;
            if (this.errors.size < 5) this.errors.add(error instanceof Error ? error.message : String(error));
            return true;
          },
        );
        // A request that fails at once would make this loop a chain of microtasks that never
        // lets a timer (or stop()) run: after a failure, wait a little.
        if (failed) await new Promise((resolve) => setTimeout(resolve, 10));
      }
    });
  }

  /** Stops sending and resolves once every request in flight is answered. */
  async stop(): Promise<LoadOutcome> {
    this.stopped = true;
    await Promise.all(this.loops);
    return { sent: this.sent, failed: this.failed, errors: [...this.errors] };
  }
}

import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";

export interface QueueMetrics {
  depth(value: number): void;
  added(): void;
  retried(): void;
}

export interface WorkQueueOptions {
  readonly name: string;
  readonly workers: number;
  /** Delay after the first failure of a key; doubles with each further failure. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  readonly logger: Logger;
  readonly metrics?: QueueMetrics;
}

/**
 * A work queue in the manner of client-go's: a key is queued at most once, a key is
 * handled by at most one worker at a time (one added while it is being handled runs again
 * afterwards), N workers, and a key whose handler fails comes back after an exponentially
 * growing delay (reset when it succeeds).
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  /** One pending delayed add per key, the earliest asked for (as client-go's delaying queue keeps). */
  private readonly delayed = new Map<string, { timer: NodeJS.Timeout; at: number }>();
  private readonly idleWorkers: (() => void)[] = [];
  private running = false;
  private workers: Promise<void>[] = [];

  constructor(
    /**
     * Reconciles a key; resolves with a delay in ms to see it again after a while
     * (controller-runtime's RequeueAfter), or undefined.
     */
    private readonly handler: (key: string) => Promise<number | undefined>,
    private readonly options: WorkQueueOptions,
  ) {}

  add(key: string): void {
    if (!this.running) return;
    this.options.metrics?.added();
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.options.metrics?.depth(this.queue.length);
    this.idleWorkers.shift()?.();
  }

  /**
   * Adds `key` after `delayMs`, unless it is already due sooner: every reconcile may ask to
   * run again later, and without this each event would start one more periodic chain.
   */
  addAfter(key: string, delayMs: number): void {
    const at = Date.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending !== undefined) {
      if (pending.at <= at) return;
      clearTimeout(pending.timer);
    }
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.delayed.set(key, { timer, at });
  }

  get length(): number {
    return this.queue.length;
  }

  start(): void {
    this.running = true;
    this.workers = Array.from({ length: this.options.workers }, () => this.work());
  }

  /** Stops taking keys and waits for the handlers in progress to finish. */
  async stop(): Promise<void> {
    this.running = false;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.idleWorkers.splice(0).forEach((wake) => wake());
    await Promise.all(this.workers);
  }

  private async work(): Promise<void> {
    while (this.running) {
      const key = this.queue.shift();
      if (key === undefined) {
        await new Promise<void>((resolve) => this.idleWorkers.push(resolve));
        continue;
      }
      this.options.metrics?.depth(this.queue.length);
      this.queued.delete(key);
      this.processing.add(key);
      try {
        const requeueAfterMs = await this.handler(key);
        this.failures.delete(key);
        if (requeueAfterMs !== undefined) this.addAfter(key, requeueAfterMs);
      } catch (error) {
        const failures = (this.failures.get(key) ?? 0) + 1;
        this.failures.set(key, failures);
        const delay = Math.min(this.options.maxDelayMs, this.options.baseDelayMs * 2 ** (failures - 1));
        this.options.logger.warn({ key, err: errorMessage(error), retryInMs: delay }, "reconcile failed; will retry");
        this.options.metrics?.retried();
        this.addAfter(key, delay);
      } finally {
        this.processing.delete(key);
        if (this.dirty.delete(key)) this.add(key);
      }
    }
  }
}

import type { PodWatch, ReadyPod } from "./pods.js";

/** How a held request ended: relayed to a pod, out of time, or its client went away. */
export type HoldOutcome = "relayed" | "deadline" | "cancelled";

/** What a request waiting for a pod gets: a pod, or why not. */
export type HoldResult =
  | { readonly kind: "pod"; readonly pod: ReadyPod }
  | { readonly kind: "full" }
  | { readonly kind: "deadline" }
  | { readonly kind: "cancelled" }
  | { readonly kind: "stopping" };

/** What the holding room reports (metrics.ts listens). */
export interface HoldingEvents {
  held(count: number): void;
  ended(outcome: HoldOutcome | "refused"): void;
  /** The first held request of a cold start to the first ready pod, in seconds. */
  coldStart(seconds: number): void;
}

interface Waiter {
  readonly resolve: (result: HoldResult) => void;
}

/**
 * The room where requests wait for a ready pod, and the round-robin over ready pods. A request
 * asks `acquire`: with a pod ready it gets one at once; otherwise it is held (counted, at most
 * `maxHeld`) until a pod is ready, its time is up or its client goes away. Listeners hear the
 * held count change at once (KEDA's StreamIsActive pushes it). Relays in progress are counted
 * too (`busy`), so a stop waits for them.
 */
export class Holding {
  private readonly waiters = new Set<Waiter>();
  private readonly listeners = new Set<(held: number) => void>();
  private next = 0;
  private relaying = 0;
  private stopping = false;
  private told = 0;
  private readonly settled = new Set<() => void>();
  /** When the first request of the current cold start was held (undefined: none waiting since a pod was ready). */
  private coldSince: number | undefined;

  constructor(
    private readonly pods: PodWatch,
    private readonly maxHeld: number,
    private readonly events: HoldingEvents,
  ) {
    pods.onChange(() => this.release());
  }

  get held(): number {
    return this.waiters.size;
  }

  /** Requests held or being relayed. */
  get busy(): number {
    return this.waiters.size + this.relaying;
  }

  /** Whether a pod is ready and nothing waits: client connections may be sent to the pods. */
  get handedOver(): boolean {
    return this.pods.readyPods().length > 0 && this.waiters.size === 0;
  }

  /** Hears every change of the held count (and nothing else). */
  onHeld(listener: (held: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Hears every time a hold begins or ends, or a relay ends. */
  onSettled(listener: () => void): void {
    this.settled.add(listener);
  }

  /** A pod for a request, waiting at most `waitMs` (and no longer than `signal` allows). */
  acquire(waitMs: number, signal: AbortSignal): Promise<HoldResult> {
    if (this.stopping && this.pods.readyPods().length === 0) return Promise.resolve({ kind: "stopping" });
    const pod = this.pick();
    if (pod !== undefined) return Promise.resolve({ kind: "pod", pod });
    if (signal.aborted) return Promise.resolve({ kind: "cancelled" });
    if (this.waiters.size >= this.maxHeld) {
      this.events.ended("refused");
      return Promise.resolve({ kind: "full" });
    }
    this.coldSince ??= performance.now();
    return new Promise((resolve) => {
      const finish = (result: HoldResult): void => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        this.waiters.delete(waiter);
        this.events.ended(outcomeOf(result));
        this.changed();
        resolve(result);
      };
      const waiter: Waiter = { resolve: finish };
      const onAbort = (): void => finish({ kind: "cancelled" });
      const timer = setTimeout(() => finish({ kind: "deadline" }), Math.max(0, waitMs));
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiters.add(waiter);
      this.changed();
    });
  }

  /** Counts a relay under way until `done` settles (a stop waits for it). */
  track(done: Promise<unknown>): void {
    this.relaying++;
    const end = (): void => {
      this.relaying--;
      this.changed();
    };
    done.then(end, end);
  }

  /** No new holds (held ones keep waiting, for a pod or their time). */
  stop(): void {
    this.stopping = true;
  }

  /**
   * The shutdown grace is over: every request still held is answered "stopping" now, so its
   * client hears why rather than seeing its connection cut.
   */
  refuseHeld(): void {
    for (const waiter of [...this.waiters]) waiter.resolve({ kind: "stopping" });
  }

  /** Resolves once nothing is held or relayed, or after `graceMs`. */
  drained(graceMs: number): Promise<boolean> {
    if (this.busy === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (drained: boolean): void => {
        clearTimeout(timer);
        this.settled.delete(onSettled);
        resolve(drained);
      };
      const onSettled = (): void => {
        if (this.busy === 0) done(true);
      };
      const timer = setTimeout(() => done(this.busy === 0), graceMs);
      this.settled.add(onSettled);
    });
  }

  private pick(): ReadyPod | undefined {
    const ready = this.pods.readyPods();
    if (ready.length === 0) return undefined;
    this.next = (this.next + 1) % ready.length;
    return ready[this.next];
  }

  /** A pod turned ready (or the set changed): every held request gets one, in turn. */
  private release(): void {
    if (this.pods.readyPods().length === 0) return;
    if (this.coldSince !== undefined) {
      this.events.coldStart((performance.now() - this.coldSince) / 1000);
      this.coldSince = undefined;
    }
    for (const waiter of [...this.waiters]) waiter.resolve({ kind: "pod", pod: this.pick()! });
  }

  /** Tells the listeners when the held count changed (not for every relay that ended). */
  private changed(): void {
    const held = this.waiters.size;
    if (held === 0 && this.pods.readyPods().length > 0) this.coldSince = undefined;
    if (held !== this.told) {
      this.told = held;
      this.events.held(held);
      for (const listener of this.listeners) listener(held);
    }
    for (const listener of this.settled) listener();
  }
}

/** How a hold's end is counted: one the shutdown could not wait for ran out of time too. */
function outcomeOf(result: HoldResult): HoldOutcome | "refused" {
  switch (result.kind) {
    case "pod":
      return "relayed";
    case "stopping":
      return "deadline";
    case "full":
      return "refused";
    default:
      return result.kind;
  }
}

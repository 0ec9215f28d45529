import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import type { Owner, Transition } from "../api/objects.js";

/** What the recorder sends events through (the KubeWriter). */
export interface EventSink {
  event(
    owner: Owner & { readonly metadata: { readonly resourceVersion?: string } },
    transition: Transition,
    at: Date,
  ): Promise<void>;
}

type Recorded = {
  readonly owner: Parameters<EventSink["event"]>[0];
  readonly transition: Transition;
  readonly at: Date;
};

/** Events waiting to be sent at most; newer ones are dropped beyond it. */
const MAX_QUEUED = 1000;
/** Events in flight at once. */
const SENDERS = 2;

/**
 * Kubernetes Events sent off the reconcile path, as client-go's event broadcaster sends
 * them: a reconcile queues its condition changes and goes on, and two senders post them
 * (stamped with the time they were recorded, which is what `kubectl describe` sorts by).
 * Events are best effort: a failed one is logged, and while the API server falls behind at
 * most MAX_QUEUED wait (newer ones are dropped and counted), so recording can neither hold
 * up reconciles nor grow without bound.
 */
export class EventRecorder {
  private readonly queued: Recorded[] = [];
  private readonly senders = new Set<Promise<void>>();
  private dropped = 0;

  constructor(
    private readonly sink: EventSink,
    private readonly logger: Logger,
    private readonly onDropped: () => void = () => undefined,
  ) {}

  record(owner: Parameters<EventSink["event"]>[0], transition: Transition): void {
    if (this.queued.length >= MAX_QUEUED) {
      if (this.dropped++ === 0)
        this.logger.warn({ queued: MAX_QUEUED }, "events are dropped: the API server is behind");
      this.onDropped();
      return;
    }
    this.queued.push({ owner, transition, at: new Date() });
    while (this.senders.size < SENDERS && this.senders.size < this.queued.length) {
      const sender: Promise<void> = this.send().finally(() => this.senders.delete(sender));
      this.senders.add(sender);
    }
  }

  /** Resolves once every queued event is sent (or failed), or after `timeoutMs`. */
  async flush(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.senders.size > 0 && Date.now() < deadline) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(this.senders),
        new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now())))),
      ]);
      clearTimeout(timer);
    }
  }

  private async send(): Promise<void> {
    for (let next = this.queued.shift(); next !== undefined; next = this.queued.shift()) {
      if (this.queued.length === 0) this.dropped = 0;
      const { owner, transition, at } = next;
      await this.sink.event(owner, transition, at).catch((error: unknown) =>
        this.logger.warn(
          {
            [owner.kind]: `${owner.metadata.namespace}/${owner.metadata.name}`,
            reason: transition.reason,
            err: errorMessage(error),
          },
          "could not record an event",
        ),
      );
    }
  }
}

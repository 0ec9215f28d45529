/**
 * What one inference request's work is tied to, whatever protocol it came in on: aborted
 * when the client cancels (reason: Cancelled) or its deadline passes (DeadlineExceeded).
 */
export interface RequestLifetime {
  readonly signal: AbortSignal;
  /** The client's deadline in ms since the epoch (Infinity for none), handed on to upstreams. */
  readonly deadline: number;
  /** The call's text metadata (e.g. a W3C `traceparent`). */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The requests of one stream, each with a lifetime of its own that ends with the stream's.
 * A stream may carry thousands of requests at once: their listeners (timers, upstream
 * calls) then sit on a signal per request, never all on the stream's, where each added
 * listener would cost time in proportion to those already there.
 */
export class StreamRequests {
  private readonly running = new Set<AbortController>();

  constructor(private readonly stream: RequestLifetime) {
    stream.signal.addEventListener(
      "abort",
      () => {
        for (const controller of this.running) controller.abort(stream.signal.reason);
        this.running.clear();
      },
      { once: true },
    );
  }

  get size(): number {
    return this.running.size;
  }

  /** A lifetime for one request of the stream; `end` it when the request is done. */
  begin(): RequestLifetime & { end(): void } {
    const controller = new AbortController();
    if (this.stream.signal.aborted) controller.abort(this.stream.signal.reason);
    else this.running.add(controller);
    const { deadline, headers } = this.stream;
    return { signal: controller.signal, deadline, headers, end: () => this.running.delete(controller) };
  }
}

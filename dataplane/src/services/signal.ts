import type { ServerUnaryCall } from "@grpc/grpc-js";
import { DataPlaneError } from "../errors.js";

/** What every kind of server call (unary or streaming) offers: its deadline and "cancelled". */
interface CallSurface {
  getDeadline: ServerUnaryCall<unknown, unknown>["getDeadline"];
  readonly metadata: ServerUnaryCall<unknown, unknown>["metadata"];
  once(event: "cancelled", listener: () => void): unknown;
}

/** What one inference request's work is tied to: its call's, or its own within a stream. */
export interface RequestLifetime {
  /** Aborted when the client cancels (reason: Cancelled) or the call's deadline passes (DeadlineExceeded). */
  readonly signal: AbortSignal;
  /** The client's deadline in ms since the epoch (Infinity for none), handed on to upstreams. */
  readonly deadline: number;
  /** The call's text metadata (e.g. a W3C `traceparent`). */
  readonly headers: Readonly<Record<string, string>>;
}

export interface CallLifetime extends RequestLifetime {
  /** Aborts the work (e.g. the stream broke) as if the client had cancelled. */
  cancel(): void;
  /**
   * The call has ended as it should: grpc-js reports the close of every stream as
   * "cancelled", and building an abort reason (an Error, with its stack) per finished call
   * costs measurable time under load.
   */
  finished(): void;
}

/**
 * Ties a request's work to its call: grpc-js reports both a client cancel and an expired
 * deadline as "cancelled", so the deadline decides which of the two it was.
 */
export function callLifetime(call: CallSurface): CallLifetime {
  const controller = new AbortController();
  const given = call.getDeadline();
  const deadline = given instanceof Date ? given.getTime() : given;
  let done = false;
  const cancel = (): void => controller.abort(new DataPlaneError("Cancelled", "request cancelled"));
  call.once("cancelled", () => {
    if (done) return;
    if (Date.now() < deadline) return cancel();
    controller.abort(new DataPlaneError("DeadlineExceeded", "the request's deadline passed before it finished"));
  });
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(call.metadata.getMap()))
    if (typeof value === "string") headers[key] = value;
  const finished = (): void => {
    done = true;
  };
  return { signal: controller.signal, deadline, cancel, finished, headers };
}

/**
 * The requests of one stream, each with a lifetime of its own that ends with the stream's.
 * A stream may carry thousands of requests at once: their listeners (timers, upstream
 * calls) then sit on a signal per request, never all on the stream's, where each added
 * listener would cost time in proportion to those already there.
 */
export class StreamRequests {
  private readonly running = new Set<AbortController>();

  constructor(private readonly stream: CallLifetime) {
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

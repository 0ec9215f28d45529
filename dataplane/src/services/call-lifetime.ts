import type { ServerUnaryCall } from "@grpc/grpc-js";
import { DataPlaneError } from "../../../lib/errors.js";
import type { RequestLifetime } from "../inference/lifetime.js";

/** What every kind of server call (unary or streaming) offers: its deadline and "cancelled". */
interface CallSurface {
  getDeadline: ServerUnaryCall<unknown, unknown>["getDeadline"];
  readonly metadata: ServerUnaryCall<unknown, unknown>["metadata"];
  once(event: "cancelled", listener: () => void): unknown;
}

/** A gRPC call's lifetime: its request's, and what the handler does at the call's end. */
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
  let headers: Record<string, string> | undefined;
  const finished = (): void => {
    done = true;
  };
  return {
    signal: controller.signal,
    deadline,
    cancel,
    finished,
    // Copied when first read (tracing on, an engine handing the trace context on): most calls never read it.
    get headers() {
      headers ??= textEntries(call.metadata);
      return headers;
    },
  };
}

function textEntries(metadata: CallSurface["metadata"]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata.getMap())) if (typeof value === "string") headers[key] = value;
  return headers;
}

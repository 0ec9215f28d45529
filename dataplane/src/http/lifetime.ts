import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { DataPlaneError } from "../../../lib/errors.js";
import type { RequestLifetime } from "../inference/lifetime.js";

/**
 * An HTTP request's lifetime: aborted (Cancelled) when the client goes away before its
 * reply is complete — a closed connection or a reset HTTP/2 stream — so the engine stops
 * working for nobody. HTTP carries no deadline; its headers carry the trace context.
 */
export function httpLifetime(headers: IncomingHttpHeaders, response: ServerResponse): RequestLifetime {
  const controller = new AbortController();
  response.once("close", () => {
    if (!response.writableFinished) {
      controller.abort(
        new DataPlaneError("Cancelled", "the client closed the connection before the reply was complete"),
      );
    }
  });
  const text: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) if (typeof value === "string") text[key] = value;
  return { signal: controller.signal, deadline: Infinity, headers: text };
}

import { DataPlaneError, errorMessage } from "../../../lib/errors.js";
import { HTTP_STATUS_OF } from "../../../lib/http/status-codes.js";
import { boundedDetail } from "../limits.js";

/** An error as an HTTP status and a message a client can act on (bounded, as gRPC details are). */
export interface HttpError {
  readonly status: number;
  readonly message: string;
  /** The request field at fault, for OpenAI's error body. */
  readonly param?: string;
}

/**
 * A request field the server does not take (or not with that value): the client's error,
 * 400, with the field as OpenAI's `param` (a 5xx would make the openai SDK retry it).
 */
export class ParameterError extends DataPlaneError {
  constructor(
    readonly param: string,
    message: string,
  ) {
    super("InvalidArgument", message);
  }
}

export const parameterError = (param: string, message: string): ParameterError => new ParameterError(param, message);

/**
 * Anything thrown, as an HTTP error: the data plane's errors through the one table, the
 * HTTP server's own (body too large: 413, a broken compressed body: 400) by their status,
 * the rest 500.
 */
export function httpErrorOf(error: unknown): HttpError {
  if (error instanceof DataPlaneError) {
    const param = error instanceof ParameterError ? { param: error.param } : {};
    return { status: HTTP_STATUS_OF[error.kind], message: boundedDetail(error.message), ...param };
  }
  const statusCode = (error as { statusCode?: unknown } | undefined)?.statusCode;
  if (typeof statusCode === "number" && statusCode >= 400 && statusCode < 600) {
    return { status: statusCode, message: boundedDetail(errorMessage(error)) };
  }
  return { status: 500, message: boundedDetail(`internal error: ${errorMessage(error)}`) };
}

/** The body of an error reply: Triton's `{"error": "..."}`, or OpenAI's error object under /v1. */
export function errorBody(error: HttpError, openai: boolean): Record<string, unknown> {
  if (!openai) return { error: error.message };
  return {
    error: {
      message: error.message,
      type: error.status < 500 ? "invalid_request_error" : "server_error",
      param: error.param ?? null,
      code: error.status === 404 ? "model_not_found" : null,
    },
  };
}

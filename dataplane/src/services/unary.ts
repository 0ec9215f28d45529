import type { handleUnaryCall, ServerUnaryCall } from "@grpc/grpc-js";
import { unimplemented } from "../../../lib/errors.js";
import { toServiceError } from "../server/status.js";

/** Adapts an async handler to grpc-js: its result is the reply, what it throws the status. */
export function unary<Request, Response>(
  handler: (request: Request, call: ServerUnaryCall<Request, Response>) => Promise<Response> | Response,
): handleUnaryCall<Request, Response> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => handler(call.request, call))
      .then(
        (response) => callback(null, response),
        (error: unknown) => callback(toServiceError(error)),
      );
  };
}

/** A handler for an RPC this data plane does not implement: UNIMPLEMENTED with a reason. */
export function notImplemented<Request, Response>(rpc: string, reason: string): handleUnaryCall<Request, Response> {
  return unary(() => {
    throw unimplemented(`${rpc} is not implemented by this data plane: ${reason}`);
  });
}

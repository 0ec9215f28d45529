import type { CallOptions, ClientUnaryCall, ServiceError } from "@grpc/grpc-js";

/** How a generated client sends one unary request: options in, the reply or the error to `done`. */
export type UnarySend<Reply> = (
  options: Partial<CallOptions>,
  done: (error: ServiceError | null, reply: Reply) => void,
) => ClientUnaryCall;

/**
 * One unary gRPC call as a promise: with a deadline (ms since the epoch) and an abort
 * signal that cancels the call. Rejects with the call's ServiceError (for a cancel:
 * CANCELLED), for the caller to read or translate.
 */
export function unaryCall<Reply>(
  send: UnarySend<Reply>,
  { deadline, signal }: { deadline?: number; signal?: AbortSignal } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const options = deadline === undefined || !Number.isFinite(deadline) ? {} : { deadline };
    const call = send(options, (error, reply) => {
      signal?.removeEventListener("abort", cancel);
      if (error !== null) reject(error);
      else resolve(reply);
    });
    const cancel = (): void => call.cancel();
    if (signal?.aborted === true) cancel();
    else signal?.addEventListener("abort", cancel, { once: true });
  });
}

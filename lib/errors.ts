/**
 * The data plane's error kinds. Every room throws these; the gRPC layer maps them to
 * status codes in one table (server/status.ts). Messages name the model, tensor or
 * field so a user can act on them without reading logs.
 */
export type ErrorKind =
  | "InvalidArgument"
  | "NotFound"
  | "AlreadyExists"
  | "Unavailable"
  | "DeadlineExceeded"
  | "Cancelled"
  | "FailedPrecondition"
  | "ResourceExhausted"
  | "Unimplemented"
  | "Internal";

export class DataPlaneError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
  ) {
    super(message);
    this.name = `DataPlaneError(${kind})`;
  }
}

/**
 * An error an upstream server returned: its gRPC status code is passed back to our
 * client unchanged (the kind only classifies it for logs and conditions).
 */
export class UpstreamStatusError extends DataPlaneError {
  constructor(
    kind: ErrorKind,
    readonly grpcCode: number,
    message: string,
  ) {
    super(kind, message);
  }
}

export const invalidArgument = (message: string): DataPlaneError => new DataPlaneError("InvalidArgument", message);
export const notFound = (message: string): DataPlaneError => new DataPlaneError("NotFound", message);
export const alreadyExists = (message: string): DataPlaneError => new DataPlaneError("AlreadyExists", message);
export const unavailable = (message: string): DataPlaneError => new DataPlaneError("Unavailable", message);
export const unimplemented = (message: string): DataPlaneError => new DataPlaneError("Unimplemented", message);
export const failedPrecondition = (message: string): DataPlaneError =>
  new DataPlaneError("FailedPrecondition", message);
export const internal = (message: string): DataPlaneError => new DataPlaneError("Internal", message);

/**
 * Why a request's signal was aborted: the reason it was aborted with when that is one of
 * ours (the deadline passed: DeadlineExceeded), otherwise the client cancelled.
 */
export function abortedError(signal: AbortSignal): DataPlaneError {
  return signal.reason instanceof DataPlaneError ? signal.reason : new DataPlaneError("Cancelled", "request cancelled");
}

/** The message of anything thrown, for logs and error replies. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

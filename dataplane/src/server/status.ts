import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { DataPlaneError, errorMessage, UpstreamStatusError, type ErrorKind } from "../../../lib/errors.js";

/** The one table from the data plane's error kinds to gRPC status codes. */
export const GRPC_CODE_OF: Readonly<Record<ErrorKind, status>> = {
  InvalidArgument: status.INVALID_ARGUMENT,
  NotFound: status.NOT_FOUND,
  Unavailable: status.UNAVAILABLE,
  DeadlineExceeded: status.DEADLINE_EXCEEDED,
  Cancelled: status.CANCELLED,
  FailedPrecondition: status.FAILED_PRECONDITION,
  ResourceExhausted: status.RESOURCE_EXHAUSTED,
  Unimplemented: status.UNIMPLEMENTED,
  Internal: status.INTERNAL,
};

/** A gRPC error for anything thrown; unknown errors become INTERNAL with their message. */
export function toServiceError(error: unknown): Partial<ServiceError> {
  const code =
    error instanceof UpstreamStatusError
      ? error.grpcCode
      : error instanceof DataPlaneError
        ? GRPC_CODE_OF[error.kind]
        : status.INTERNAL;
  return { code, details: errorMessage(error), metadata: new Metadata() };
}

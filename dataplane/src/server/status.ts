import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { GRPC_CODE_OF } from "../../../lib/grpc/status-codes.js";
import { DataPlaneError, errorMessage, UpstreamStatusError } from "../../../lib/errors.js";

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

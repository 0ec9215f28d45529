import { status } from "@grpc/grpc-js";
import type { ErrorKind } from "../errors.js";

/**
 * The one table between the data plane's error kinds and gRPC status codes, used both
 * ways: a kind becomes the code a client sees; an upstream's code is classified as a kind
 * (for logs and conditions; the code itself is passed back unchanged).
 */
export const GRPC_CODE_OF: Readonly<Record<ErrorKind, status>> = {
  InvalidArgument: status.INVALID_ARGUMENT,
  NotFound: status.NOT_FOUND,
  AlreadyExists: status.ALREADY_EXISTS,
  Unavailable: status.UNAVAILABLE,
  DeadlineExceeded: status.DEADLINE_EXCEEDED,
  Cancelled: status.CANCELLED,
  FailedPrecondition: status.FAILED_PRECONDITION,
  ResourceExhausted: status.RESOURCE_EXHAUSTED,
  Unimplemented: status.UNIMPLEMENTED,
  Internal: status.INTERNAL,
};

const KIND_OF_CODE = new Map<number, ErrorKind>(
  (Object.entries(GRPC_CODE_OF) as [ErrorKind, status][]).map(([kind, code]) => [code, kind]),
);

/** The kind of a gRPC status code; codes with no kind of their own (UNKNOWN, DATA_LOSS, ...) are Internal. */
export const kindOfGrpcCode = (code: number): ErrorKind => KIND_OF_CODE.get(code) ?? "Internal";

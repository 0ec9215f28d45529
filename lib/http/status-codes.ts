import type { ErrorKind } from "../errors.js";

/**
 * The one table between the data plane's error kinds and HTTP statuses, as Triton's HTTP
 * frontend answers them: 400 for what the request got wrong, 404 for an unknown model or
 * version, 503 for a model that cannot serve now, 501 for what is not implemented.
 */
export const HTTP_STATUS_OF: Readonly<Record<ErrorKind, number>> = {
  InvalidArgument: 400,
  FailedPrecondition: 400,
  // As Triton's HTTP frontend: a shared-memory region name already registered is a bad request.
  AlreadyExists: 400,
  NotFound: 404,
  Cancelled: 499,
  ResourceExhausted: 429,
  Unimplemented: 501,
  Internal: 500,
  Unavailable: 503,
  DeadlineExceeded: 504,
};

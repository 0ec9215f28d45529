import { MAX_ERROR_DETAIL_BYTES } from "./limits.js";

/**
 * The data plane's error kinds. Every room throws these; the gRPC layer maps them to
 * status codes in one table (server/status.ts). Messages name the model, tensor or
 * field so a user can act on them without reading logs.
 */
export type ErrorKind =
  | "InvalidArgument"
  | "NotFound"
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

/** Of a detail that is cut, how much of the budget its beginning keeps (the rest: its end). */
const HEAD_SHARE = 0.6;

/**
 * `text` cut in the middle to at most `maxBytes` UTF-8 bytes, with a marker saying how much
 * was left out; the beginning (what is wrong) and the end (e.g. "is not found") stay.
 */
export function boundedDetail(text: string, maxBytes = MAX_ERROR_DETAIL_BYTES): string {
  if (text.length <= maxBytes / 4 || Buffer.byteLength(text, "utf8") <= maxBytes) return text;
  const bytes = Buffer.from(text, "utf8");
  const marker = (cut: number): string => `…[${cut} bytes cut]…`;
  const budget = maxBytes - Buffer.byteLength(marker(bytes.length), "utf8");
  let headEnd = Math.floor(budget * HEAD_SHARE);
  let tailStart = bytes.length - (budget - headEnd);
  // Cut between characters: back off from UTF-8 continuation bytes (10xxxxxx).
  while (headEnd > 0 && (bytes[headEnd]! & 0xc0) === 0x80) headEnd--;
  while (tailStart < bytes.length && (bytes[tailStart]! & 0xc0) === 0x80) tailStart++;
  const head = bytes.subarray(0, headEnd).toString("utf8");
  const tail = bytes.subarray(tailStart).toString("utf8");
  return `${head}${marker(tailStart - headEnd)}${tail}`;
}

/** What a client is told of anything thrown: its message, bounded. */
export function errorDetail(error: unknown): string {
  return boundedDetail(errorMessage(error));
}

import { createWriteStream } from "node:fs";
import { Transform, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { StorageError, type ObjectStoreOptions, type StorageErrorKind } from "./store.js";

/** What the stores share around their SDKs: timeouts, streaming to a file, safe error text. */

export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export function requestTimeoutMs(options: ObjectStoreOptions): number {
  return options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
}

/** A list prefix that matches whole folders only: "models/a" would also match "models/ab/...". */
export function folderPrefix(prefix: string): string {
  return prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`;
}

/**
 * Runs `request` (one SDK call, retries included) and fails it as "unreachable" when it has no
 * answer within `timeoutMs`: the SDKs' own retry policies would otherwise go on for minutes
 * against an endpoint that drops packets. The signal given to `request` is aborted then (and when
 * `signal` is), for SDKs that take one.
 */
export async function withDeadline<T>(
  timeoutMs: number,
  describe: () => string,
  signal: AbortSignal | undefined,
  request: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  signal?.throwIfAborted();
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new StorageError("unreachable", `${describe()}: no answer within ${timeoutMs} ms`);
      controller.abort(error);
      reject(error);
    }, timeoutMs);
  });
  const aborted = new Promise<never>((_, reject) =>
    controller.signal.addEventListener("abort", () => reject(controller.signal.reason as Error), { once: true }),
  );
  const work = request(controller.signal);
  try {
    return await Promise.race([work, deadline, aborted]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
    // A request that lost the race still settles later: its failure is already reported.
    work.catch(() => undefined);
  }
}

/**
 * Streams `body` into `file` (created or truncated) and returns the bytes written. Memory stays
 * at the streams' buffers. A body that sends nothing for `idleMs` fails as "unreachable" (a stalled
 * connection would otherwise hold the download forever); `signal` aborts it.
 */
export async function streamToFile(
  body: Readable,
  file: string,
  idleMs: number,
  describe: () => string,
  signal?: AbortSignal,
): Promise<number> {
  let bytes = 0;
  let timer: NodeJS.Timeout | undefined;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      armIdleTimer();
      done(null, chunk);
    },
  });
  const armIdleTimer = (): void => {
    clearTimeout(timer);
    timer = setTimeout(
      () => counter.destroy(new StorageError("unreachable", `${describe()}: no data for ${idleMs} ms`)),
      idleMs,
    );
  };
  armIdleTimer();
  try {
    await pipeline(body, counter, createWriteStream(file), signal === undefined ? {} : { signal });
  } finally {
    clearTimeout(timer);
  }
  return bytes;
}

/**
 * A listing's check on its continuation tokens: an endpoint that hands back a token it gave
 * before would keep a listing (and the poll that runs it) paging forever, each page answered
 * in time. Call it with each page's token; it throws then.
 */
export function continuationGuard(describe: () => string): (token: string | undefined) => void {
  const seen = new Set<string>();
  return (token) => {
    if (token === undefined || token === "") return;
    if (seen.has(token))
      throw storageFailure("other", describe(), "the store repeated a continuation token; the listing never ends");
    seen.add(token);
  };
}

/** Network and TLS failures (no HTTP answer at all), by Node's and the SDKs' error codes. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "ESOCKETTIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
  // @azure/core-rest-pipeline's wrapper of any of the above.
  "REQUEST_SEND_ERROR",
  // TLS: the endpoint's certificate is not trusted (a private CA without --storage-ca-file) or
  // does not name it; the message says which.
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_SIGNATURE_FAILURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/** True when `error` (or what it wraps) says the endpoint could not be reached. */
export function isNetworkFailure(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Object && depth < 5; depth++) {
    const { code, errors } = current as { code?: unknown; errors?: unknown };
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
    // An AggregateError (every address of a host refused) holds the attempts.
    if (Array.isArray(errors) && errors.some(isNetworkFailure)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * An SDK's error text made safe for a message: first line only, bounded, and with every
 * credential value the store was given (and anything shaped like a signature or key) replaced.
 * SDK messages usually hold none, but some echo a request URL, and a SAS token is a query string.
 */
export function safeErrorText(error: unknown, secrets: readonly string[]): string {
  const raw = error instanceof Error ? error.message : String(error);
  let text = raw.split("\n")[0] ?? "";
  for (const secret of secrets) if (secret.length >= 4) text = text.split(secret).join("***");
  text = text
    .replace(/([?&](?:sig|se|sp|sv|st|spr|srt|ss|skoid|sktid|ske|skt|sks|skv)=)[^&\s'"]*/gi, "$1***")
    .replace(/((?:AccountKey|SharedAccessSignature|private_key|access_token)\s*[=:]\s*)[^;\s'",]*/gi, "$1***")
    .replace(/(Bearer\s+)[A-Za-z0-9._~+/=-]{16,}/g, "$1***");
  return text.length > 300 ? `${text.slice(0, 300)}...` : text;
}

/**
 * The kind an HTTP status means for a store's request, where it says one on its own: a list's
 * 404 is its bucket's (or container's), a download's its object's.
 */
export function statusKind(status: unknown, operation: "list" | "download"): StorageErrorKind | undefined {
  switch (status) {
    case 401:
    case 403:
      return "access-denied";
    case 404:
      return operation === "list" ? "no-such-bucket" : "not-found";
    case 412:
      return "changed";
    default:
      return undefined;
  }
}

/** A store's failure in one form: what was being done, the kind in words, and what the SDK said. */
export function storageFailure(kind: StorageErrorKind, what: string, detail?: string): StorageError {
  return new StorageError(kind, `${what}: ${KIND_WORDS[kind]}${detail === undefined ? "" : ` (${detail})`}`);
}

/** A kind in the words a message uses. */
const KIND_WORDS: Readonly<Record<StorageErrorKind, string>> = {
  "access-denied": "access denied",
  "no-such-bucket": "no such bucket",
  unreachable: "endpoint unreachable",
  "not-found": "the object is gone",
  changed: "the object changed since it was listed",
  "unsafe-key": "unsafe key",
  "cache-full": "cache full",
  other: "failed",
};

import { errorMessage } from "../../lib/errors.js";

/**
 * The data plane's bounds on what one client can make it do (docs/guides/production.md,
 * "Bounds", lists them). Each room enforces its own; none is a timed limit. The defaults of the bounds an
 * option sets — the message size (64 MiB: a message is decoded, checked and copied, several
 * times its size at the peak, and grpc-js stops inflating a compressed one past it; Triton's
 * 2 GiB - 1 let one request take gigabytes) and the requests pending on one stream — are
 * declared with their options (lib/contract/dataplane.ts); `max_tokens`'s with the LLM
 * conventions (lib/engines/llm.ts).
 */

/**
 * The most an error detail may take, in UTF-8 bytes. Details echo what clients sent (model
 * and tensor names, shapes) and travel in the `grpc-message` trailer, percent-encoded (up
 * to 3 bytes per byte): stock clients refuse trailers past 8 KiB (gRPC C-core's default)
 * and would then report RESOURCE_EXHAUSTED instead of what went wrong.
 */
export const MAX_ERROR_DETAIL_BYTES = 2048;

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

/**
 * System shared-memory regions registered at once: each holds an open file (and keeps its
 * segment alive after the client unlinks it), so the count is bounded; past it a register
 * is refused RESOURCE_EXHAUSTED.
 */
export const MAX_SHM_REGIONS = 1024;

/**
 * The longest name a system shared-memory region may have, in UTF-8 bytes (Triton sets none):
 * registered regions live until unregistered, so 1024 names of a message's size each would
 * hold gigabytes; past it a register is refused INVALID_ARGUMENT.
 */
export const MAX_SHM_REGION_NAME_BYTES = 1024;

/**
 * Bytes read from system shared-memory regions into requests' tensors and held at once (each
 * request holds its copy until it ends). Node cannot map a region, so every request's inputs
 * are copied: without a bound, a client with one 60 MiB region and 32 small requests made the
 * data plane hold 2.2 GiB it never had to receive (over the wire, the same memory takes the
 * bytes sent). Past it a request is refused RESOURCE_EXHAUSTED; a read when none is held
 * always goes (--max-message-size bounds one request).
 */
export const MAX_SHM_READ_BYTES_IN_FLIGHT = 1024 * 1024 * 1024;

/**
 * Requests of sequences waiting for a sequence slot, per model version (Triton's backlog is
 * unbounded): past it a request is refused UNAVAILABLE (a full sequence batcher).
 */
export const MAX_SEQUENCE_BACKLOG = 10_000;

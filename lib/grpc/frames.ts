import { status } from "@grpc/grpc-js";
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http2";

/**
 * gRPC over HTTP/2 as the data plane's upstream transport (engines/kserve-grpc/h2-upstream.ts)
 * and the activator's relay need it, pure: the length-prefixed message framing both ways,
 * `grpc-timeout`, `grpc-message` decoding, the tables that turn an HTTP/2 reset or an HTTP
 * status into a gRPC status, and which headers may cross us. Facts from gRPC's PROTOCOL-HTTP2.md and "HTTP to gRPC status code
 * mapping".
 */

/** One custom metadata entry of a call: `-bin` values as bytes, text as it came. */
export type MetadataEntry = readonly [name: string, value: string | Uint8Array];

/** A message's prefix: one flag byte (1: compressed) and its length, 4 bytes big-endian. */
export const FRAME_HEADER_BYTES = 5;

/** The 5-byte prefix of an uncompressed message of `length` bytes. */
export function frameHeader(length: number): Buffer {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header[0] = 0;
  header.writeUInt32BE(length, 1);
  return header;
}

/** What a message is written on: an HTTP/2 stream (corked, so prefix and body leave in one DATA frame). */
export interface FrameWritable {
  cork(): void;
  uncork(): void;
  write(chunk: Uint8Array): boolean;
}

/** Writes one message, its body as it is (a view, never copied): prefix and body corked together. */
export function writeMessage(stream: FrameWritable, body: Uint8Array): boolean {
  stream.cork();
  stream.write(frameHeader(body.byteLength));
  const flowing = stream.write(body);
  stream.uncork();
  return flowing;
}

/** A framing fault: what gRPC status it ends the call with, and why. */
export class FrameError extends Error {
  constructor(
    readonly code: status,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Reads length-prefixed messages out of DATA chunks as they arrive. A message inside one
 * chunk comes out as a view of it (no copy); one split across chunks is copied once into a
 * buffer of its announced size, allocated once half of it has come (its length checked
 * against the bound first, so an upstream cannot make us hold more than `maxSize` bytes of
 * one message): never more allocated ahead of the bytes than has come, where a buffer
 * allocated at the prefix would let an upstream reserve `maxSize` (counted by V8 as in use)
 * on every call with a few bytes. Faults throw FrameError (the caller resets the stream).
 */
export class MessageReader {
  private readonly header = Buffer.alloc(FRAME_HEADER_BYTES);
  private headerFilled = 0;
  /** The length of the message under way (undefined: none), how much of it has come, its pieces until half has, then its buffer. */
  private length: number | undefined;
  private filled = 0;
  private pieces: Uint8Array[] = [];
  private body: Buffer | undefined;

  constructor(
    private readonly maxSize: number,
    private readonly onMessage: (message: Uint8Array) => void,
  ) {}

  /** Whether a message was begun and not finished: the stream must not end here. */
  get midMessage(): boolean {
    return this.headerFilled > 0 || this.length !== undefined;
  }

  push(chunk: Uint8Array): void {
    let offset = 0;
    while (offset < chunk.byteLength) {
      if (this.length !== undefined) {
        offset = this.fillBody(chunk, offset);
        continue;
      }
      if (this.headerFilled === 0 && chunk.byteLength - offset >= FRAME_HEADER_BYTES) {
        const length = this.checkedLength(chunk[offset]!, readLength(chunk, offset + 1));
        offset += FRAME_HEADER_BYTES;
        if (chunk.byteLength - offset >= length) {
          this.onMessage(chunk.subarray(offset, offset + length));
          offset += length;
        } else this.length = length;
        continue;
      }
      const taken = Math.min(FRAME_HEADER_BYTES - this.headerFilled, chunk.byteLength - offset);
      this.header.set(chunk.subarray(offset, offset + taken), this.headerFilled);
      this.headerFilled += taken;
      offset += taken;
      if (this.headerFilled < FRAME_HEADER_BYTES) continue;
      this.headerFilled = 0;
      const length = this.checkedLength(this.header[0]!, this.header.readUInt32BE(1));
      if (length === 0) this.onMessage(new Uint8Array(0));
      else this.length = length;
    }
  }

  private fillBody(chunk: Uint8Array, offset: number): number {
    const length = this.length!;
    const taken = Math.min(length - this.filled, chunk.byteLength - offset);
    if (this.body !== undefined) this.body.set(chunk.subarray(offset, offset + taken), this.filled);
    else this.pieces.push(chunk.subarray(offset, offset + taken));
    this.filled += taken;
    if (this.body === undefined && 2 * this.filled >= length) {
      this.body = Buffer.concat(this.pieces, length);
      this.pieces = [];
    }
    if (this.filled === length) {
      const body = this.body!;
      this.length = undefined;
      this.filled = 0;
      this.body = undefined;
      this.onMessage(body);
    }
    return offset + taken;
  }

  private checkedLength(flag: number, length: number): number {
    // We ask for identity (grpc-accept-encoding), so a compressed message is a protocol fault.
    if (flag !== 0) {
      throw new FrameError(
        status.INTERNAL,
        flag === 1 ? "upstream sent a compressed message although none was accepted" : `bad message flag ${flag}`,
      );
    }
    if (length > this.maxSize) {
      throw new FrameError(
        status.RESOURCE_EXHAUSTED,
        `Received message larger than max (${length} vs. ${this.maxSize})`,
      );
    }
    return length;
  }
}

function readLength(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) >>> 0) + (bytes[at + 1]! << 16) + (bytes[at + 2]! << 8) + bytes[at + 3]!;
}

const TIMEOUT_UNITS: readonly [unit: string, ms: number][] = [
  ["m", 1],
  ["S", 1000],
  ["M", 60_000],
  ["H", 3_600_000],
];
const TIMEOUT_MAX_VALUE = 99_999_999;

/**
 * `grpc-timeout` for the time left: whole milliseconds rounded up (never 0: the spec wants a
 * positive value), in the smallest unit whose value fits the spec's 8 digits, rounded up
 * there too (an upstream never gets less time than the client gave us).
 */
export function grpcTimeout(remainingMs: number): string {
  for (const [unit, ms] of TIMEOUT_UNITS) {
    const value = Math.max(1, Math.ceil(remainingMs / ms));
    if (value <= TIMEOUT_MAX_VALUE) return `${value}${unit}`;
  }
  return `${TIMEOUT_MAX_VALUE}H`;
}

const utf8 = new TextDecoder();

/**
 * `grpc-message` as sent (percent-encoded UTF-8) back to its text. A `%` not followed by
 * two hex digits is kept as it is, as the spec asks of a receiver.
 */
export function decodeGrpcMessage(encoded: string): string {
  if (!encoded.includes("%")) return encoded;
  const bytes: number[] = [];
  const raw = Buffer.from(encoded, "utf8");
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === 0x25 && i + 2 < raw.length && isHex(raw[i + 1]!) && isHex(raw[i + 2]!)) {
      bytes.push(parseInt(String.fromCharCode(raw[i + 1]!, raw[i + 2]!), 16));
      i += 2;
    } else bytes.push(raw[i]!);
  }
  return utf8.decode(Uint8Array.from(bytes));
}

const isHex = (byte: number): boolean =>
  (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66);

/** HTTP/2 error codes (RFC 9113 §7) the tables name. */
export const H2_CODE = {
  NO_ERROR: 0,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  ENHANCE_YOUR_CALM: 11,
  INADEQUATE_SECURITY: 12,
} as const;

/** The gRPC status of a call the peer reset with RST_STREAM `code` (PROTOCOL-HTTP2.md's table). */
export function statusOfReset(code: number): status {
  switch (code) {
    case H2_CODE.REFUSED_STREAM:
      return status.UNAVAILABLE;
    case H2_CODE.CANCEL:
      return status.CANCELLED;
    case H2_CODE.ENHANCE_YOUR_CALM:
      return status.RESOURCE_EXHAUSTED;
    case H2_CODE.INADEQUATE_SECURITY:
      return status.PERMISSION_DENIED;
    default:
      return status.INTERNAL;
  }
}

/** The gRPC status of a response whose `:status` is not 200, or that has no `grpc-status` ("HTTP to gRPC status code mapping"). */
export function statusOfHttp(httpStatus: number): status {
  switch (httpStatus) {
    case 400:
      return status.INTERNAL;
    case 401:
      return status.UNAUTHENTICATED;
    case 403:
      return status.PERMISSION_DENIED;
    case 404:
      return status.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return status.UNAVAILABLE;
    default:
      return status.UNKNOWN;
  }
}

/**
 * Headers that never cross us as a call's custom metadata, either way: HTTP/2 and HTTP/1
 * connection headers, the gRPC protocol's own and `date` (each hop writes its own), and
 * `authorization` (a client's token is for us, never for an upstream). Names starting with
 * `:` (pseudo-headers) and `grpc-` are reserved too; see isForwardableHeader.
 */
const NEVER_FORWARDED: ReadonlySet<string> = new Set([
  "authorization",
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "transfer-encoding",
  "upgrade",
  // HTTP/1's upgrade to h2c, meaningless over HTTP/2: node accepts it from a peer but refuses to send it.
  "http2-settings",
  "host",
  "te",
  "content-type",
  "content-length",
  "content-encoding",
  "user-agent",
  "date",
]);

/** gRPC's reserved names that still carry an application's data: passed on. */
const FORWARDED_GRPC: ReadonlySet<string> = new Set(["grpc-status-details-bin", "grpc-trace-bin"]);

/** Whether a metadata entry named `name` (lowercase) may be sent on to an upstream or back to a client. */
export function isForwardableHeader(name: string): boolean {
  if (name.startsWith(":") || NEVER_FORWARDED.has(name)) return false;
  return !name.startsWith("grpc-") || FORWARDED_GRPC.has(name);
}

/**
 * An HTTP/2 header block's custom metadata as entries, reserved names left out: `-bin`
 * values base64-decoded (several values, comma-joined by HTTP, each decoded), text as it came.
 */
export function metadataOf(headers: IncomingHttpHeaders): MetadataEntry[] {
  const entries: MetadataEntry[] = [];
  for (const name in headers) {
    if (!isForwardableHeader(name)) continue;
    const value = headers[name];
    if (value === undefined) continue;
    const values = Array.isArray(value) ? value : [value];
    for (const one of values) {
      if (!name.endsWith("-bin")) entries.push([name, one]);
      else for (const part of one.split(",")) entries.push([name, Buffer.from(part.trim(), "base64")]);
    }
  }
  return entries;
}

/**
 * Entries as outgoing headers (`-bin` values base64, several values of a name as several
 * fields), reserved names dropped. Names are lowercased first: node sends them lowercased,
 * so an `Authorization` or `Host` judged as written would pass the deny list and go upstream.
 */
export function addMetadataHeaders(headers: OutgoingHttpHeaders, entries: readonly MetadataEntry[]): void {
  for (const [written, value] of entries) {
    const name = written.toLowerCase();
    if (!isForwardableHeader(name)) continue;
    const text = typeof value === "string" ? value : Buffer.from(value).toString("base64");
    const existing = headers[name];
    if (existing === undefined) headers[name] = text;
    else headers[name] = [...(Array.isArray(existing) ? existing : [String(existing)]), text];
  }
}

const TIMEOUT_UNIT_MS: Readonly<Record<string, number>> = { n: 1e-6, u: 1e-3, m: 1, S: 1000, M: 60_000, H: 3_600_000 };

/**
 * A `grpc-timeout` value in milliseconds (up to 8 digits and a unit: H, M, S, m, u, n);
 * undefined when absent or malformed (gRPC then has no deadline).
 */
export function parseGrpcTimeout(value: string | undefined): number | undefined {
  const match = value === undefined ? null : /^(\d{1,8})([HMSmun])$/.exec(value);
  if (match === null) return undefined;
  return Number(match[1]) * TIMEOUT_UNIT_MS[match[2]!]!;
}

/**
 * `grpc-message` as the spec asks it sent: UTF-8, percent-encoding every byte outside
 * printable ASCII and `%` itself (decodeGrpcMessage reads it back).
 */
export function encodeGrpcMessage(message: string): string {
  let encoded = "";
  for (const byte of Buffer.from(message, "utf8")) {
    encoded +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return encoded;
}

/**
 * A reply that is only trailers (PROTOCOL-HTTP2.md's Trailers-Only): the call ends with
 * `code` and `message` before any response message, in one HEADERS frame.
 */
export function trailersOnly(code: status, message: string): OutgoingHttpHeaders {
  return {
    ":status": 200,
    "content-type": "application/grpc",
    "grpc-status": String(code),
    "grpc-message": encodeGrpcMessage(message),
  };
}

import { jsonText, parseJsonText } from "../../tensors/json-text.js";
import type { FromStub } from "./protocol.js";

/**
 * The frames the data plane and a Python model process exchange (the other end is
 * dataplane/python/dynamo_kserve_python_stub.py): header length and payload length as
 * uint32 little endian, a JSON header (a message of protocol.ts), then the payload (tensor
 * bytes). JSON keeps the Python side to its standard library; tensors never go through it.
 */

const HEAD_SIZE = 8;

/** One frame's parts, ready for a vectored write (the payload's parts as they are). */
export function encodeFrame(header: object, payload: readonly Uint8Array[] = []): Uint8Array[] {
  // Exact integers: a uint64 parameter reaches the model as the value it is.
  const json = Buffer.from(jsonText(header));
  const head = Buffer.allocUnsafe(HEAD_SIZE);
  head.writeUInt32LE(json.length, 0);
  head.writeUInt32LE(
    payload.reduce((total, part) => total + part.byteLength, 0),
    4,
  );
  return [head, json, ...payload];
}

export interface Frame {
  /** A message of the stub's, as it sent it (the stub is trusted to send what protocol.ts says). */
  readonly header: FromStub;
  /** The payload, in one buffer of its own (tensor views may outlive the chunks it came in). */
  readonly payload: Buffer;
  /** Outputs the process put in shared memory instead, read out in the order the header lists them. */
  readonly shared?: readonly Buffer[];
}

/**
 * Reassembles frames from the chunks a pipe delivers. A payload is copied once, from the
 * chunks into a buffer of the length its frame announced.
 */
export class FrameReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private current: { header: FromStub; payload: Buffer; filled: number } | undefined;

  /**
   * The frames the chunk completes; throws MalformedFrame for a header that is not a JSON
   * object with a kind (the reader is then unusable).
   */
  push(chunk: Buffer): Frame[] {
    const frames: Frame[] = [];
    let data = chunk;
    for (;;) {
      if (this.current !== undefined) {
        const { payload } = this.current;
        const take = Math.min(payload.length - this.current.filled, data.length);
        data.copy(payload, this.current.filled, 0, take);
        this.current.filled += take;
        data = data.subarray(take);
        if (this.current.filled < payload.length) return frames;
        frames.push({ header: this.current.header, payload });
        this.current = undefined;
        continue;
      }
      if (data.length > 0) {
        this.pending.push(data);
        this.pendingBytes += data.length;
        data = Buffer.alloc(0);
      }
      if (this.pendingBytes < HEAD_SIZE) return frames;
      const buffered = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
      const headerLength = buffered.readUInt32LE(0);
      const payloadLength = buffered.readUInt32LE(4);
      if (buffered.length < HEAD_SIZE + headerLength) {
        this.pending = [buffered];
        return frames;
      }
      const header = parseHeader(buffered.toString("utf8", HEAD_SIZE, HEAD_SIZE + headerLength));
      this.pending = [];
      this.pendingBytes = 0;
      data = buffered.subarray(HEAD_SIZE + headerLength);
      if (payloadLength === 0) {
        frames.push({ header, payload: Buffer.alloc(0) });
        continue;
      }
      this.current = { header, payload: Buffer.allocUnsafe(payloadLength), filled: 0 };
    }
  }
}

/** Digits no double holds exactly can only be in a header with a run of 16 (strings included). */
const EXACT_INTEGERS_NEEDED = /\d{16}/;

/** A frame the other end should never have sent: that process is broken. */
export class MalformedFrame extends Error {}

function parseHeader(text: string): FromStub {
  let header: unknown;
  try {
    // A model's int64 parameter beyond 2^53 stays exact (a double would round it).
    header = EXACT_INTEGERS_NEEDED.test(text)
      ? parseJsonText(text, "a frame header", { exactIntegers: true })
      : JSON.parse(text);
  } catch (error) {
    throw new MalformedFrame(`a frame header that is not JSON (${(error as Error).message}): ${text.slice(0, 120)}`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new MalformedFrame(`a frame header that is not a JSON object: ${text.slice(0, 120)}`);
  }
  if (typeof (header as { kind?: unknown }).kind !== "string") {
    throw new MalformedFrame(`a frame header without a kind: ${text.slice(0, 120)}`);
  }
  return header as FromStub;
}

import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ModelInferRequest, type ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { internal } from "../../../lib/errors.js";

/**
 * KServe inference messages handled as bytes: encoded with each tensor's bytes copied once,
 * and forwarded without decoding and re-encoding their tensors. ModelInferRequest and
 * ModelInferResponse both begin with `model_name = 1` and `model_version = 2` (strings);
 * forwarded, everything else passes as it came, unknown fields included.
 * ModelStreamInferResponse is `error_message = 1` and `infer_response = 2`.
 */

/** A ModelInferResponse already encoded: an upstream's reply, passed on as it came. */
export interface EncodedInferResponse {
  readonly encoded: Uint8Array;
}

/** A ModelInferResponse decoded, or an upstream's still encoded (passed on as it came). */
export type InferResponseOrEncoded = ModelInferResponse | EncodedInferResponse;

const MODEL_NAME = 1;
const MODEL_VERSION = 2;
const ERROR_MESSAGE = 1;
const INFER_RESPONSE = 2;

/** One top-level field: its number, where it starts and ends, and a length-delimited field's value (a view). */
interface Field {
  readonly number: number;
  readonly start: number;
  readonly end: number;
  readonly value: Uint8Array | undefined;
}

/**
 * The message's top-level fields, in order, read by the protobuf runtime's own reader (it
 * skips groups, bounds nesting and refuses what runs past the end).
 */
function fieldsOf(bytes: Uint8Array): Field[] {
  const reader = new BinaryReader(bytes);
  const fields: Field[] = [];
  try {
    while (reader.pos < reader.len) {
      const start = reader.pos;
      const [number, wireType] = reader.tag();
      let value: Uint8Array | undefined;
      if (wireType === WireType.LengthDelimited) value = reader.bytes();
      else reader.skip(wireType, number);
      fields.push({ number, start, end: reader.pos, value });
    }
  } catch (error) {
    const why = error instanceof RangeError ? "a field runs past the message's end" : (error as Error).message;
    throw internal(`malformed protobuf message: ${why}`);
  }
  return fields;
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

function sameText(field: Field | undefined, text: Uint8Array): boolean {
  if (field === undefined) return text.byteLength === 0;
  return field.value !== undefined && Buffer.compare(field.value, text) === 0;
}

function stringField(number: number, text: Uint8Array): Uint8Array {
  if (text.byteLength === 0) return new Uint8Array(0);
  return new BinaryWriter().tag(number, WireType.LengthDelimited).bytes(text).finish();
}

/**
 * A ModelInferRequest or ModelInferResponse naming the given model and version (version
 * undefined: whichever it names), the rest of it as it came. When it already names them,
 * the very same bytes come back (nothing copied); otherwise the name and version go first
 * and every other field is copied once.
 */
export function withModel(bytes: Uint8Array, name: string, version?: string): Uint8Array {
  const nameBytes = utf8.encode(name);
  const versionBytes = version === undefined ? undefined : utf8.encode(version);
  if (namesAtHead(bytes, nameBytes, versionBytes)) return bytes;
  const fields = fieldsOf(bytes);
  const names = fields.filter((field) => field.number === MODEL_NAME);
  const versions = fields.filter((field) => field.number === MODEL_VERSION);
  const keptVersion = versionBytes ?? versions.at(-1)?.value ?? new Uint8Array(0);
  if (names.length <= 1 && versions.length <= 1 && sameText(names[0], nameBytes) && sameText(versions[0], keptVersion))
    return bytes;
  const head = [stringField(MODEL_NAME, nameBytes), stringField(MODEL_VERSION, keptVersion)];
  const kept = fields.filter((field) => field.number !== MODEL_NAME && field.number !== MODEL_VERSION);
  let size = head[0]!.byteLength + head[1]!.byteLength;
  for (const field of kept) size += field.end - field.start;
  const out = Buffer.allocUnsafe(size);
  let offset = 0;
  for (const part of head) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  for (const field of kept) {
    out.set(bytes.subarray(field.start, field.end), offset);
    offset += field.end - field.start;
  }
  return out;
}

/**
 * The common case without decoding anything: the message begins with the name (and the
 * version, unless it is empty or any will do), as every KServe encoder writes them, and
 * no later top-level field names them again (the last one would count). The rest is only
 * stepped over by the protobuf runtime's reader, field by field. False: look closer
 * (withModel's walk, which also reports a malformed message).
 */
function namesAtHead(bytes: Uint8Array, name: Uint8Array, version: Uint8Array | undefined): boolean {
  const reader = new BinaryReader(bytes);
  try {
    if (name.byteLength > 0 && !nextStringIs(reader, MODEL_NAME, name)) return false;
    if (version !== undefined && version.byteLength > 0 && !nextStringIs(reader, MODEL_VERSION, version)) return false;
    while (reader.pos < reader.len) {
      const [number, wireType] = reader.tag();
      if (number === MODEL_NAME || (number === MODEL_VERSION && version !== undefined)) return false;
      reader.skip(wireType, number);
    }
    return true;
  } catch {
    return false;
  }
}

/** Whether the reader's next field is string field `number` equal to `text` (read past it). */
function nextStringIs(reader: BinaryReader, number: number, text: Uint8Array): boolean {
  const [found, wireType] = reader.tag();
  return found === number && wireType === WireType.LengthDelimited && Buffer.compare(reader.bytes(), text) === 0;
}

/**
 * A ModelStreamInferResponse whose infer_response names the given model (withModel's
 * rule); the same bytes when it already does, or when it carries none (an error_message).
 */
export function withStreamReplyModel(bytes: Uint8Array, name: string, version?: string): Uint8Array {
  const fields = fieldsOf(bytes);
  const inner = fields.findLast((field) => field.number === INFER_RESPONSE && field.value !== undefined);
  if (inner === undefined) return bytes;
  const renamed = withModel(inner.value!, name, version);
  if (renamed === inner.value) return bytes;
  const kept = fields.filter((field) => field.number !== INFER_RESPONSE);
  const tag = (INFER_RESPONSE << 3) | WireType.LengthDelimited;
  let size = 1 + varintSize(renamed.byteLength) + renamed.byteLength;
  for (const field of kept) size += field.end - field.start;
  const out = Buffer.allocUnsafe(size);
  let offset = 0;
  for (const field of kept) {
    out.set(bytes.subarray(field.start, field.end), offset);
    offset += field.end - field.start;
  }
  out[offset++] = tag;
  offset = writeVarint(out, offset, renamed.byteLength);
  out.set(renamed, offset);
  return out;
}

/** A ModelStreamInferResponse's two fields: the error message, and the response's bytes (a view, not a copy). */
export function streamReplyParts(bytes: Uint8Array): { errorMessage: string; inferResponse: Uint8Array | undefined } {
  let errorMessage = "";
  let inferResponse: Uint8Array | undefined;
  for (const field of fieldsOf(bytes)) {
    if (field.value === undefined) continue;
    if (field.number === ERROR_MESSAGE) errorMessage = utf8Decoder.decode(field.value);
    else if (field.number === INFER_RESPONSE) inferResponse = field.value;
  }
  return { errorMessage, inferResponse };
}

/** The bytes as a Buffer over the same memory, as grpc-js's serializers must return. */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export const varintSize = (value: number): number =>
  value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5;

export function writeVarint(out: Buffer, offset: number, value: number): number {
  let rest = value;
  while (rest > 0x7f) {
    out[offset++] = (rest & 0x7f) | 0x80;
    rest >>>= 7;
  }
  out[offset++] = rest;
  return offset;
}

/**
 * A message whose last field is its tensors' raw bytes (ModelInferRequest's 7,
 * ModelInferResponse's 6), before assembly: the generated code's encoding of the rest, then
 * the tensors. The generic protobuf writer copies each tensor into a growing buffer
 * (again at every doubling) and slices the result; placed here, each is copied once, into
 * one buffer of the exact size, byte for byte what the generated encoder writes.
 */
export interface TensorMessage {
  readonly head: Uint8Array;
  readonly tag: number;
  readonly raw: readonly Uint8Array[];
  readonly size: number;
}

export function tensorMessage(head: Uint8Array, rawField: number, raw: readonly Uint8Array[]): TensorMessage {
  let size = head.byteLength;
  for (const bytes of raw) size += 1 + varintSize(bytes.byteLength) + bytes.byteLength;
  return { head, tag: (rawField << 3) | WireType.LengthDelimited, raw, size };
}

/**
 * Tensors at least this large go out as views of where they already are (a gRPC reply
 * written by scatter-gather, patches/@grpc+grpc-js+1.14.7.patch); smaller ones cost less
 * copied than as a part of their own.
 */
export const VIEWED_TENSOR_BYTES = 32 * 1024;

/**
 * The message after `prefix` as parts for one vectored write: everything but the tensors
 * of `viewedFrom` bytes or more copied into one buffer, cut where each of those goes in as
 * a view of its own bytes, so a megabyte tensor is neither copied nor allocated again. One
 * part when no tensor is that large (with `viewedFrom` Infinity: the message copied whole).
 */
export function tensorMessageParts(
  prefix: Uint8Array,
  message: TensorMessage,
  viewedFrom = VIEWED_TENSOR_BYTES,
): Buffer[] {
  let viewedBytes = 0;
  for (const bytes of message.raw) if (bytes.byteLength >= viewedFrom) viewedBytes += bytes.byteLength;
  const copied = Buffer.allocUnsafe(prefix.byteLength + message.size - viewedBytes);
  copied.set(prefix, 0);
  copied.set(message.head, prefix.byteLength);
  let offset = prefix.byteLength + message.head.byteLength;
  let cut = 0;
  const parts: Buffer[] = [];
  for (const bytes of message.raw) {
    copied[offset++] = message.tag;
    offset = writeVarint(copied, offset, bytes.byteLength);
    if (bytes.byteLength >= viewedFrom) {
      parts.push(copied.subarray(cut, offset), asBuffer(bytes));
      cut = offset;
    } else {
      copied.set(bytes, offset);
      offset += bytes.byteLength;
    }
  }
  if (offset > cut || parts.length === 0) parts.push(copied.subarray(cut, offset));
  return parts;
}

/** No bytes: the prefix of a message that has none. */
export const EMPTY = new Uint8Array(0);

/** ModelInferRequest.raw_input_contents: field 7. */
const RAW_INPUT_FIELD = 7;

/** A ModelInferRequest encoded with its tensors' bytes copied once (an upstream's request). */
export function encodeInferRequest(request: ModelInferRequest): Buffer {
  const head = ModelInferRequest.encode({ ...request, rawInputContents: [] }).finish();
  const [whole] = tensorMessageParts(EMPTY, tensorMessage(head, RAW_INPUT_FIELD, request.rawInputContents), Infinity);
  return whole!;
}

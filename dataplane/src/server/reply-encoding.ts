import { ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { asBuffer, type InferReply } from "../tensors/wire.js";

/**
 * Inference replies as grpc-js sends them, with each output tensor's bytes copied once.
 * The generic protobuf writer copies every `raw_output_contents` entry into a growing
 * buffer (re-copying it each time the buffer doubles) and then slices the result: for a
 * 16 MiB tensor that is several copies and zero-filled allocations per reply. Here the
 * small fields are encoded by the generated code and the tensor bytes are placed once,
 * into one buffer of the exact size. The bytes are the generated encoder's, byte for byte
 * (raw_output_contents is the last field it writes). A reply passed through from an
 * upstream is already encoded: it goes out as it is (inside a stream reply, copied once).
 */

/** ModelStreamInfer's reply, whose response may be passed on from an upstream. */
export interface StreamInferReply {
  readonly errorMessage: string;
  readonly inferResponse: InferReply | undefined;
}

/** ModelInferResponse.raw_output_contents: field 6, length-delimited. */
const RAW_OUTPUT_TAG = (6 << 3) | 2;
/** ModelStreamInferResponse.infer_response: field 2, length-delimited. */
const STREAM_REPLY_TAG = (2 << 3) | 2;

const varintSize = (value: number): number =>
  value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5;

function writeVarint(out: Buffer, offset: number, value: number): number {
  let rest = value;
  while (rest > 0x7f) {
    out[offset++] = (rest & 0x7f) | 0x80;
    rest >>>= 7;
  }
  out[offset++] = rest;
  return offset;
}

/** A reply's encoding before assembly: the generated head, then the tensors. */
interface Parts {
  readonly head: Uint8Array;
  readonly raw: readonly Uint8Array[];
  readonly size: number;
}

function partsOf(response: InferReply): Parts {
  if ("encoded" in response) return { head: response.encoded, raw: [], size: response.encoded.byteLength };
  const head = ModelInferResponse.encode({ ...response, rawOutputContents: [] }).finish();
  let size = head.byteLength;
  for (const raw of response.rawOutputContents) size += 1 + varintSize(raw.byteLength) + raw.byteLength;
  return { head, raw: response.rawOutputContents, size };
}

function writeParts(out: Buffer, start: number, parts: Parts): number {
  out.set(parts.head, start);
  let offset = start + parts.head.byteLength;
  for (const raw of parts.raw) {
    out[offset++] = RAW_OUTPUT_TAG;
    offset = writeVarint(out, offset, raw.byteLength);
    out.set(raw, offset);
    offset += raw.byteLength;
  }
  return offset;
}

/** ModelInfer's reply. */
export function encodeInferResponse(response: InferReply): Buffer {
  if ("encoded" in response) return asBuffer(response.encoded);
  const parts = partsOf(response);
  const out = Buffer.allocUnsafe(parts.size);
  writeParts(out, 0, parts);
  return out;
}

/** ModelStreamInfer's reply: an error message, or a ModelInferResponse. */
export function encodeStreamInferResponse(reply: StreamInferReply): Buffer {
  const head = ModelStreamInferResponse.encode({ errorMessage: reply.errorMessage, inferResponse: undefined }).finish();
  if (reply.inferResponse === undefined) return Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  const inner = partsOf(reply.inferResponse);
  const out = Buffer.allocUnsafe(head.byteLength + 1 + varintSize(inner.size) + inner.size);
  out.set(head, 0);
  let offset = head.byteLength;
  out[offset++] = STREAM_REPLY_TAG;
  offset = writeVarint(out, offset, inner.size);
  writeParts(out, offset, inner);
  return out;
}

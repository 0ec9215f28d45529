import { ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import {
  asBuffer,
  tensorMessage,
  varintSize,
  writeTensorMessage,
  writeVarint,
  type InferReply,
  type TensorMessage,
} from "../tensors/wire.js";

/**
 * Inference replies as grpc-js sends them, with each output tensor's bytes copied once
 * (tensors/wire.ts: the generic protobuf writer would copy a 16 MiB tensor several times).
 * A reply passed through from an upstream is already encoded: it goes out as it is
 * (inside a stream reply, copied once).
 */

/** ModelStreamInfer's reply, whose response may be passed on from an upstream. */
export interface StreamInferReply {
  readonly errorMessage: string;
  readonly inferResponse: InferReply | undefined;
}

/** ModelInferResponse.raw_output_contents: field 6. */
const RAW_OUTPUT_FIELD = 6;
/** ModelStreamInferResponse.infer_response: field 2, length-delimited. */
const STREAM_REPLY_TAG = (2 << 3) | 2;

function partsOf(response: InferReply): TensorMessage {
  if ("encoded" in response) return tensorMessage(response.encoded, RAW_OUTPUT_FIELD, []);
  const head = ModelInferResponse.encode({ ...response, rawOutputContents: [] }).finish();
  return tensorMessage(head, RAW_OUTPUT_FIELD, response.rawOutputContents);
}

/** ModelInfer's reply. */
export function encodeInferResponse(response: InferReply): Buffer {
  if ("encoded" in response) return asBuffer(response.encoded);
  const parts = partsOf(response);
  const out = Buffer.allocUnsafe(parts.size);
  writeTensorMessage(out, 0, parts);
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
  writeTensorMessage(out, offset, inner);
  return out;
}

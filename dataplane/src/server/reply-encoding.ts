import { ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import {
  asBuffer,
  EMPTY,
  tensorMessage,
  tensorMessageParts,
  varintSize,
  writeVarint,
  type InferResponseOrEncoded,
  type TensorMessage,
} from "../tensors/wire.js";

/**
 * Inference replies as grpc-js sends them. Large output tensors are not copied at all: the
 * reply is a list of parts, the tensors views of their own bytes, that the patched grpc-js
 * (patches/@grpc+grpc-js+1.14.7.patch) frames and writes in one vectored write; the rest
 * of the message is encoded into one buffer (tensors/wire.ts). A reply passed through from
 * an upstream is already encoded: it goes out as it is.
 */

/** A message as the server's serializers hand it to grpc-js: one buffer, or parts sent as one message. */
export type SerializedMessage = Buffer | Buffer[];

/**
 * ModelStreamInfer's reply, whose response may be passed on from an upstream; or an
 * upstream's whole ModelStreamInferResponse, passed on as it came (inference/forward.ts).
 */
export type StreamInferReply =
  | { readonly errorMessage: string; readonly inferResponse: InferResponseOrEncoded | undefined }
  | { readonly encodedStreamReply: Uint8Array };

/** ModelInferResponse.raw_output_contents: field 6. */
const RAW_OUTPUT_FIELD = 6;
/** ModelStreamInferResponse.infer_response: field 2, length-delimited. */
const STREAM_REPLY_TAG = (2 << 3) | 2;

function partsOf(response: InferResponseOrEncoded): TensorMessage {
  if ("encoded" in response) return tensorMessage(response.encoded, RAW_OUTPUT_FIELD, []);
  const head = ModelInferResponse.encode({ ...response, rawOutputContents: [] }).finish();
  return tensorMessage(head, RAW_OUTPUT_FIELD, response.rawOutputContents);
}

/** ModelInfer's reply. */
export function encodeInferResponse(response: InferResponseOrEncoded): SerializedMessage {
  if ("encoded" in response) return asBuffer(response.encoded);
  return oneOrParts(tensorMessageParts(EMPTY, partsOf(response)));
}

/** ModelStreamInfer's reply: an error message, or a ModelInferResponse. */
export function encodeStreamInferResponse(reply: StreamInferReply): SerializedMessage {
  if ("encodedStreamReply" in reply) return asBuffer(reply.encodedStreamReply);
  const head = ModelStreamInferResponse.encode({ errorMessage: reply.errorMessage, inferResponse: undefined }).finish();
  if (reply.inferResponse === undefined) return asBuffer(head);
  const inner = partsOf(reply.inferResponse);
  const prefix = Buffer.allocUnsafe(head.byteLength + 1 + varintSize(inner.size));
  prefix.set(head, 0);
  prefix[head.byteLength] = STREAM_REPLY_TAG;
  writeVarint(prefix, head.byteLength + 1, inner.size);
  return oneOrParts(tensorMessageParts(prefix, inner));
}

const oneOrParts = (parts: Buffer[]): SerializedMessage => (parts.length === 1 ? parts[0]! : parts);

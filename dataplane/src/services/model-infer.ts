import { Metadata, type handleUnaryCall, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import { internal } from "../../../lib/errors.js";
import type { ForwardMetadataEntry, ForwardStatus } from "../engines/engine.js";
import { forwardInference, passesThrough } from "../inference/forward.js";
import { runInference, type Entry, type InferenceContext } from "../inference/pipeline.js";
import {
  decodedRequest,
  isPassThrough,
  receivedBytesOf,
  type PassThroughRequest,
  type ReceivedInferRequest,
} from "../server/request-decoding.js";
import { asBuffer, type InferResponseOrEncoded } from "../tensors/wire.js";
import { toServiceError } from "../server/status.js";
import { callLifetime } from "./call-lifetime.js";
import { unary } from "./unary.js";

/** A decoupled model's responses come as one reply only if the model opts in; Triton refuses them. */
const MODEL_INFER: Entry = {
  endpoint: "ModelInfer",
  requestType: "unary",
  protocol: "grpc",
  gathersResponses: "if-the-model-opts-in",
};

type ModelInferCall = ServerUnaryCall<ReceivedInferRequest, InferResponseOrEncoded>;

/** ModelInfer: one request, one response; a request that passes through is forwarded as it came. */
export function modelInferHandler(
  context: InferenceContext,
): handleUnaryCall<ReceivedInferRequest, InferResponseOrEncoded> {
  const decoded = decodedHandler(context);
  return (call, callback) => {
    const { request } = call;
    if (isPassThrough(request) && passesThrough(context, request, MODEL_INFER))
      forwardUnary(context, request, call, callback);
    else decoded(call, callback);
  };
}

/** The pipeline's ModelInfer (a request that passed through until its model was reloaded is decoded first). */
function decodedHandler(context: InferenceContext): handleUnaryCall<ReceivedInferRequest, InferResponseOrEncoded> {
  return unary(async (received, call: ModelInferCall) => {
    const request = decodedRequest(received);
    const lifetime = callLifetime(call);
    // Run the pipeline to its end (it checks there is exactly one response and records
    // statistics after it); returning from inside the loop would cut it short.
    let reply: InferResponseOrEncoded | undefined;
    try {
      for await (const response of runInference(context, request, MODEL_INFER, lifetime, receivedBytesOf(request)))
        reply = response;
    } finally {
      lifetime.finished();
    }
    if (reply === undefined) throw internal(`model '${request.modelName}' produced no response`);
    return reply;
  });
}

/**
 * The upstream's answer relayed: its initial metadata sent as the call's, its message as the
 * reply (as it came), its status and trailers as the call's.
 */
function forwardUnary(
  context: InferenceContext,
  request: PassThroughRequest,
  call: ModelInferCall,
  callback: sendUnaryData<InferResponseOrEncoded>,
): void {
  const lifetime = callLifetime(call);
  let reply: Uint8Array | undefined;
  forwardInference(context, request, MODEL_INFER, lifetime, call.metadata, {
    metadata: (entries) => call.sendMetadata(toMetadata(entries)),
    message: (bytes) => {
      reply = bytes;
      return undefined;
    },
    end: (status: ForwardStatus) => {
      lifetime.finished();
      const metadata = toMetadata(status.metadata);
      if (status.code !== 0 || reply === undefined) callback({ code: status.code, details: status.details, metadata });
      else callback(null, { encoded: reply }, metadata);
    },
    fail: (error) => {
      lifetime.finished();
      callback(toServiceError(error));
    },
  });
}

/**
 * Metadata entries as grpc-js's Metadata (`-bin` values as Buffers, as it requires). An entry
 * grpc-js refuses to send (a name or value HTTP/2 metadata cannot carry) is left out rather
 * than failing the call.
 */
export function toMetadata(entries: readonly ForwardMetadataEntry[]): Metadata {
  const metadata = new Metadata();
  for (const [name, value] of entries) {
    try {
      metadata.add(name, typeof value === "string" ? value : asBuffer(value));
    } catch {
      continue;
    }
  }
  return metadata;
}

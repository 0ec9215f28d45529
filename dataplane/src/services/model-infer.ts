import { Metadata, type handleUnaryCall, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import type { ForwardMetadataEntry, ForwardStatus } from "../engines/engine.js";
import { forwardInference, passesThrough } from "../inference/forward.js";
import { inferUnary, type Entry, type InferenceContext } from "../inference/pipeline.js";
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
    try {
      return await inferUnary(context, request, MODEL_INFER, lifetime, receivedBytesOf(request));
    } finally {
      lifetime.finished();
    }
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
  const headers = new RelayedHeaders(call);
  let reply: Uint8Array | undefined;
  forwardInference(context, request, MODEL_INFER, lifetime, call.metadata, {
    metadata: headers.received,
    message: (bytes) => {
      reply = bytes;
      return undefined;
    },
    end: (status: ForwardStatus) => {
      lifetime.finished();
      const metadata = toMetadata(status.metadata);
      if (status.code === 0 && reply !== undefined) return callback(null, { encoded: reply }, metadata);
      headers.beforeError();
      callback({ code: status.code, details: status.details, metadata });
    },
    fail: (error) => {
      lifetime.finished();
      callback(toServiceError(error));
    },
  });
}

/**
 * An upstream's response headers relayed as the call's. grpc-js sends a call's headers with its
 * first message anyway, so headers without custom metadata (the usual case) are not sent on
 * their own, which costs a write; only before an error they are, so that an upstream's
 * headers-then-trailers answer does not become a Trailers-Only one.
 */
export class RelayedHeaders {
  private pending = false;

  constructor(private readonly call: { sendMetadata(metadata: Metadata): void }) {}

  readonly received = (entries: readonly ForwardMetadataEntry[]): void => {
    if (entries.length === 0) this.pending = true;
    else this.call.sendMetadata(toMetadata(entries));
  };

  /** The call ends in an error: headers the upstream sent go first. */
  beforeError(): void {
    if (this.pending) this.call.sendMetadata(new Metadata());
    this.pending = false;
  }
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

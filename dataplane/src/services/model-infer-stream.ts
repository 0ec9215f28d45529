import {
  Metadata,
  status as grpcStatus,
  type handleServerStreamingCall,
  type ServerWritableStream,
} from "@grpc/grpc-js";
import type { ExtensionsImplementation } from "../server/grpc.js";
import {
  decodedRequest,
  isPassThrough,
  receivedBytesOf,
  type PassThroughRequest,
  type ReceivedInferRequest,
} from "../server/request-decoding.js";
import { streamReplyParts, type InferResponseOrEncoded } from "../tensors/wire.js";
import { toServiceError } from "../server/status.js";
import { forwardInference, passesThrough } from "../inference/forward.js";
import { runInference, type Entry, type InferenceContext } from "../inference/pipeline.js";
import { StreamWriter } from "./stream-writer.js";
import { callLifetime, type CallLifetime } from "./call-lifetime.js";
import { RelayedHeaders, toMetadata } from "./model-infer.js";

const MODEL_INFER_STREAM: Entry = { endpoint: "ModelInferStream", requestType: "stream", protocol: "grpc" };

type InferStreamCall = ServerWritableStream<ReceivedInferRequest, InferResponseOrEncoded>;

/**
 * dynamokserve.v1.InferenceExtensions/ModelInferStream: one request, every response the
 * model produces, then OK; a failure ends the stream with its gRPC status. A request to a
 * decoupled model that passes through is forwarded as it came (to the upstream's
 * ModelStreamInfer), each of its responses written as it came.
 */
export function modelInferStreamHandlers(context: InferenceContext): ExtensionsImplementation {
  const modelInferStream: handleServerStreamingCall<ReceivedInferRequest, InferResponseOrEncoded> = (call) => {
    const lifetime = callLifetime(call);
    const { request } = call;
    if (isPassThrough(request) && passesThrough(context, request, MODEL_INFER_STREAM))
      forwardStream(context, request, call, lifetime);
    else void serveDecoded(context, call, lifetime);
  };
  return { modelInferStream };
}

async function serveDecoded(context: InferenceContext, call: InferStreamCall, lifetime: CallLifetime): Promise<void> {
  const { signal } = lifetime;
  const writer = new StreamWriter(call, signal);
  try {
    // Inside the try: a request read as passing through whose model was reloaded as a checked one is decoded here.
    const request = decodedRequest(call.request);
    for await (const response of runInference(context, request, MODEL_INFER_STREAM, lifetime, receivedBytesOf(request)))
      await writer.write(response);
    lifetime.finished();
    if (!signal.aborted) call.end();
  } catch (error) {
    lifetime.finished();
    // grpc-js turns an emitted error into the call's status and ends the stream.
    if (!signal.aborted) call.emit("error", toServiceError(error));
  }
}

/**
 * The upstream's stream relayed: its initial metadata as the call's, the response of each of
 * its replies as it came, its status and trailers as the call's. An upstream reply carrying
 * `error_message` ends the call with it at once (INTERNAL, the upstream's text), as a failure
 * does on this RPC, and cancels the upstream's stream: its later replies have nowhere to go,
 * and waiting for its end would hold the client as long as the upstream kept streaming.
 */
function forwardStream(
  context: InferenceContext,
  request: PassThroughRequest,
  call: InferStreamCall,
  lifetime: CallLifetime,
): void {
  const { signal } = lifetime;
  const writer = new StreamWriter(call, signal);
  const headers = new RelayedHeaders(call);
  let failed: string | undefined;
  forwardInference(context, request, MODEL_INFER_STREAM, lifetime, call.metadata, {
    metadata: headers.received,
    message: (bytes) => {
      if (failed !== undefined) return undefined;
      const { errorMessage, inferResponse } = streamReplyParts(bytes);
      if (errorMessage === "")
        return inferResponse === undefined
          ? undefined
          : writer.writeNow({ encoded: inferResponse }, inferResponse.byteLength);
      failed = errorMessage;
      if (!signal.aborted) {
        headers.beforeError();
        call.emit("error", { code: grpcStatus.INTERNAL, details: failed, metadata: new Metadata() });
      }
      lifetime.cancel();
      return undefined;
    },
    // The request failed with the error_message (the upstream's status is then that of its stream cancelled here).
    outcome: (status) => (failed === undefined ? status : { code: grpcStatus.INTERNAL, details: failed, metadata: [] }),
    end: (status) => {
      lifetime.finished();
      if (signal.aborted || failed !== undefined) return;
      const metadata = toMetadata(status.metadata);
      if (status.code === grpcStatus.OK) return void call.end(metadata);
      headers.beforeError();
      call.emit("error", { code: status.code, details: status.details, metadata });
    },
    fail: (error) => {
      lifetime.finished();
      if (!signal.aborted) call.emit("error", toServiceError(error));
    },
  });
}

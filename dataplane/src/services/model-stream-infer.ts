import type { handleBidiStreamingCall } from "@grpc/grpc-js";
import type { ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { StreamInferReply } from "../server/reply-encoding.js";
import { receivedBytesOf } from "../server/request-decoding.js";
import { errorDetail } from "../limits.js";
import { DEFAULT_STREAM_MAX_PENDING } from "../../../lib/contract/dataplane.js";
import { StreamRequests, type RequestLifetime } from "../inference/lifetime.js";
import { runInference, type InferenceContext } from "../inference/pipeline.js";
import { StreamWriter } from "./stream-writer.js";
import { callLifetime } from "./call-lifetime.js";

/**
 * ModelStreamInfer: requests on one stream run concurrently and their responses
 * interleave as they are produced. A failing request is answered with `error_message`
 * (and its id) while the stream stays open; the stream ends after the client has
 * half-closed and every request has finished. At most `maxPending` requests of a stream
 * run at once: at the cap the stream is not read further, so HTTP/2 flow control holds
 * the client back until one finishes.
 */
export function modelStreamInferHandler(
  context: InferenceContext,
  maxPending = DEFAULT_STREAM_MAX_PENDING,
): handleBidiStreamingCall<ModelInferRequest, StreamInferReply> {
  return (call) => {
    const lifetime = callLifetime(call);
    const { signal } = lifetime;
    const requests = new StreamRequests(lifetime);
    const writer = new StreamWriter(call, signal);
    let clientDone = false;
    let paused = false;
    const requestDone = (): void => {
      if (paused && requests.size < maxPending) {
        paused = false;
        call.resume();
      }
      if (clientDone && requests.size === 0 && !signal.aborted) {
        lifetime.finished();
        call.end();
      }
    };
    call.on("error", lifetime.cancel);
    call.on("data", (request: ModelInferRequest) => {
      const scope = requests.begin();
      void serveRequest(context, writer, request, scope).finally(() => {
        scope.end();
        requestDone();
      });
      if (requests.size >= maxPending && !paused) {
        paused = true;
        call.pause();
      }
    });
    call.on("end", () => {
      clientDone = true;
      requestDone();
    });
  };
}

async function serveRequest(
  context: InferenceContext,
  writer: StreamWriter<StreamInferReply>,
  request: ModelInferRequest,
  lifetime: RequestLifetime,
): Promise<void> {
  try {
    for await (const response of runInference(
      context,
      request,
      { endpoint: "ModelStreamInfer", requestType: "stream", protocol: "grpc" },
      lifetime,
      receivedBytesOf(request),
    )) {
      await writer.write({ errorMessage: "", inferResponse: response });
    }
  } catch (error) {
    if (lifetime.signal.aborted) return;
    await writer.write({ errorMessage: errorDetail(error), inferResponse: errorReply(request) });
  }
}

/** The reply that carries a failed request's identity next to its error_message. */
function errorReply(request: ModelInferRequest): ModelInferResponse {
  return {
    modelName: request.modelName,
    modelVersion: request.modelVersion,
    id: request.id,
    parameters: {},
    outputs: [],
    rawOutputContents: [],
  };
}

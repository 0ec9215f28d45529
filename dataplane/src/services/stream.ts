import type { handleBidiStreamingCall, ServerDuplexStream } from "@grpc/grpc-js";
import type {
  ModelInferRequest,
  ModelInferResponse,
  ModelStreamInferResponse,
} from "../../../proto/gen/ts/grpc_service.js";
import { errorMessage } from "../errors.js";
import { runInference, type InferenceContext } from "./inference.js";
import { send } from "./send.js";
import { callLifetime, type CallLifetime } from "./signal.js";

type StreamCall = ServerDuplexStream<ModelInferRequest, ModelStreamInferResponse>;

/**
 * ModelStreamInfer: requests on one stream run concurrently and their responses
 * interleave as they are produced. A failing request is answered with `error_message`
 * (and its id) while the stream stays open; the stream ends after the client has
 * half-closed and every request has finished.
 */
export function modelStreamInferHandler(
  context: InferenceContext,
): handleBidiStreamingCall<ModelInferRequest, ModelStreamInferResponse> {
  return (call) => {
    const lifetime = callLifetime(call);
    const { signal } = lifetime;
    const pending = new Set<Promise<void>>();
    let clientDone = false;
    const finishIfDone = (): void => {
      if (clientDone && pending.size === 0 && !signal.aborted) {
        lifetime.finished();
        call.end();
      }
    };
    call.on("error", lifetime.cancel);
    call.on("data", (request: ModelInferRequest) => {
      const task = serveRequest(context, call, request, lifetime).finally(() => {
        pending.delete(task);
        finishIfDone();
      });
      pending.add(task);
    });
    call.on("end", () => {
      clientDone = true;
      finishIfDone();
    });
  };
}

async function serveRequest(
  context: InferenceContext,
  call: StreamCall,
  request: ModelInferRequest,
  lifetime: CallLifetime,
): Promise<void> {
  const { signal } = lifetime;
  try {
    for await (const response of runInference(context, request, "ModelStreamInfer", lifetime)) {
      await send(call, { errorMessage: "", inferResponse: response }, signal);
    }
  } catch (error) {
    if (signal.aborted) return;
    await send(call, { errorMessage: errorMessage(error), inferResponse: errorReply(request) }, signal);
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

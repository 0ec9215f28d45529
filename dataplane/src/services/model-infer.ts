import type { handleUnaryCall, ServerUnaryCall } from "@grpc/grpc-js";
import type { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { internal } from "../../../lib/errors.js";
import { runInference, type Entry, type InferenceContext } from "../inference/pipeline.js";
import { receivedBytesOf } from "../server/request-decoding.js";
import type { InferResponseOrEncoded } from "../tensors/wire.js";
import { callLifetime } from "./call-lifetime.js";
import { unary } from "./unary.js";

/** A decoupled model's responses come as one reply only if the model opts in; Triton refuses them. */
const MODEL_INFER: Entry = {
  endpoint: "ModelInfer",
  requestType: "unary",
  protocol: "grpc",
  gathersResponses: "if-the-model-opts-in",
};

/** ModelInfer: one request, one response. */
export function modelInferHandler(
  context: InferenceContext,
): handleUnaryCall<ModelInferRequest, InferResponseOrEncoded> {
  return unary(async (request, call: ServerUnaryCall<ModelInferRequest, InferResponseOrEncoded>) => {
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

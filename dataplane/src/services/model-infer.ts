import type { handleUnaryCall, ServerUnaryCall } from "@grpc/grpc-js";
import type { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { inferUnary, type Entry, type InferenceContext } from "../inference/pipeline.js";
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
    try {
      return await inferUnary(context, request, MODEL_INFER, lifetime, receivedBytesOf(request));
    } finally {
      lifetime.finished();
    }
  });
}

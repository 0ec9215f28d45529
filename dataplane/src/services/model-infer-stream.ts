import type { handleServerStreamingCall } from "@grpc/grpc-js";
import type { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import type { ExtensionsImplementation } from "../server/grpc.js";
import { receivedBytesOf } from "../server/request-decoding.js";
import type { InferResponseOrEncoded } from "../tensors/wire.js";
import { toServiceError } from "../server/status.js";
import { runInference, type InferenceContext } from "../inference/pipeline.js";
import { StreamWriter } from "./stream-writer.js";
import { callLifetime } from "./call-lifetime.js";

/**
 * dynamokserve.v1.InferenceExtensions/ModelInferStream: one request, every response the
 * model produces, then OK; a failure ends the stream with its gRPC status.
 */
export function modelInferStreamHandlers(context: InferenceContext): ExtensionsImplementation {
  const modelInferStream: handleServerStreamingCall<ModelInferRequest, InferResponseOrEncoded> = (call) => {
    const lifetime = callLifetime(call);
    const { signal } = lifetime;
    const writer = new StreamWriter(call, signal);
    void (async () => {
      try {
        for await (const response of runInference(
          context,
          call.request,
          { endpoint: "ModelInferStream", requestType: "stream", protocol: "grpc" },
          lifetime,
          receivedBytesOf(call.request),
        )) {
          await writer.write(response);
        }
        lifetime.finished();
        if (!signal.aborted) call.end();
      } catch (error) {
        lifetime.finished();
        // grpc-js turns an emitted error into the call's status and ends the stream.
        if (!signal.aborted) call.emit("error", toServiceError(error));
      }
    })();
  };
  return { modelInferStream };
}

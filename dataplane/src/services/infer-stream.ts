import type { handleServerStreamingCall } from "@grpc/grpc-js";
import type { InferenceExtensionsServer } from "../../../proto/gen/ts/extensions.js";
import type { ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { ModelRegistry } from "../models/registry.js";
import { toServiceError } from "../server/status.js";
import { runInference } from "./inference.js";
import { send } from "./send.js";

/**
 * dynamokserve.v1.InferenceExtensions/ModelInferStream: one request, every response the
 * model produces, then OK; a failure ends the stream with its gRPC status.
 */
export function inferStreamHandlers(registry: ModelRegistry): InferenceExtensionsServer {
  const modelInferStream: handleServerStreamingCall<ModelInferRequest, ModelInferResponse> = (call) => {
    const controller = new AbortController();
    call.once("cancelled", () => controller.abort());
    void (async () => {
      try {
        for await (const response of runInference(registry, call.request, "stream", controller.signal)) {
          await send(call, response, controller.signal);
        }
        if (!controller.signal.aborted) call.end();
      } catch (error) {
        // grpc-js turns an emitted error into the call's status and ends the stream.
        if (!controller.signal.aborted) call.emit("error", toServiceError(error));
      }
    })();
  };
  return { modelInferStream };
}

import type { GRPCInferenceServiceServer } from "../../../proto/gen/ts/grpc_service.js";
import type { ModelRegistry } from "../models/registry.js";
import type { Operations } from "./unary.js";

type HealthOperations = Operations<Pick<GRPCInferenceServiceServer, "serverLive" | "serverReady" | "modelReady">>;

/** ServerLive, ServerReady (start-up loads done, a model ready: ModelRegistry.serving) and ModelReady. */
export function healthOperations(registry: ModelRegistry, isShuttingDown: () => boolean): HealthOperations {
  return {
    serverLive: () => ({ live: true }),
    serverReady: () => ({ ready: !isShuttingDown() && registry.serving() }),
    modelReady: async (request) => {
      if (!registry.isReady(request.name, request.version)) return { ready: false };
      // A model served by an upstream is ready when the upstream says its model is.
      const { engine } = registry.resolve(request.name, request.version).model;
      return { ready: (await engine.modelReady?.()) ?? true };
    },
  };
}

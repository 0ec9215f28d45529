import type { GRPCInferenceServiceServer } from "../../../proto/gen/ts/grpc_service.js";
import type { ModelRegistry } from "../models/registry.js";
import { unary } from "./unary.js";

type HealthHandlers = Pick<GRPCInferenceServiceServer, "serverLive" | "serverReady" | "modelReady">;

/** ServerLive, ServerReady (at least one model ready) and ModelReady. */
export function healthHandlers(registry: ModelRegistry, isShuttingDown: () => boolean): HealthHandlers {
  return {
    serverLive: unary(() => ({ live: true })),
    serverReady: unary(() => ({ ready: !isShuttingDown() && registry.readyCount() > 0 })),
    modelReady: unary(async (request) => {
      if (!registry.isReady(request.name, request.version)) return { ready: false };
      // A model served by an upstream is ready when the upstream says its model is.
      const { engine } = registry.resolve(request.name, request.version).model;
      return { ready: (await engine.modelReady?.()) ?? true };
    }),
  };
}

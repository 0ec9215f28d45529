import { GRPCInferenceServiceService } from "../../proto/gen/ts/grpc_service.js";

/**
 * The calls that change which models are served — loading and unloading, over gRPC and HTTP —
 * declared once: the HTTP routes are registered from here, and --model-control-token-file's
 * tokens guard exactly these (a call added to one transport and not the other's check would
 * be a way around them).
 */
export const MODEL_CONTROL_CALLS = {
  load: {
    grpcPath: GRPCInferenceServiceService.repositoryModelLoad.path,
    httpRoute: "/v2/repository/models/:model/load",
  },
  unload: {
    grpcPath: GRPCInferenceServiceService.repositoryModelUnload.path,
    httpRoute: "/v2/repository/models/:model/unload",
  },
} as const;

const GRPC_PATHS: ReadonlySet<string> = new Set(Object.values(MODEL_CONTROL_CALLS).map((call) => call.grpcPath));
const HTTP_ROUTES: ReadonlySet<string> = new Set(Object.values(MODEL_CONTROL_CALLS).map((call) => call.httpRoute));

/** Whether a gRPC method path is model control. */
export const isModelControlRpc = (path: string): boolean => GRPC_PATHS.has(path);

/** Whether an HTTP route (as the router matched it, never the path as sent) is model control. */
export const isModelControlRoute = (route: string): boolean => HTTP_ROUTES.has(route);

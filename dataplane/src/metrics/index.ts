import { collectDefaultMetrics, Registry } from "prom-client";
import type { ModelRegistry } from "../models/registry.js";
import { ComponentMetrics } from "./component.js";
import { FrontendMetrics } from "./frontend.js";
import { GrpcServerMetrics } from "./grpc.js";
import { HttpServerMetrics } from "./http.js";
import { loadSignals } from "./load.js";
import { tritonMetrics } from "./triton.js";

/** Everything /metrics on the metrics port shows, in one prom-client registry per data plane. */
export interface DataPlaneMetrics {
  readonly register: Registry;
  readonly frontend: FrontendMetrics;
  /** Every RPC of the gRPC server (grpc_server_*), counted by its call interceptor. */
  readonly grpc: GrpcServerMetrics;
  /** Counts every request of the HTTP front door (http_server_*). */
  readonly http: HttpServerMetrics;
}

/** `serverName`: --server-name, the dynamo_namespace of the dynamo_component_* families. */
export function createMetrics(models: ModelRegistry, serverName: string): DataPlaneMetrics {
  const register = new Registry();
  collectDefaultMetrics({ register });
  tritonMetrics(
    register,
    () => models.statistics("", "").map(({ name, version, statistics }) => statistics.toProto(name, version)),
    () => models.pendingRequests(),
  );
  loadSignals(register, () => models.loads());
  return {
    register,
    frontend: new FrontendMetrics(
      register,
      () => new Set(models.statistics("", "").map(({ name }) => name)),
      new ComponentMetrics(register, serverName),
    ),
    grpc: new GrpcServerMetrics(register),
    http: new HttpServerMetrics(register),
  };
}

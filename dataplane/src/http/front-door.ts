import type { InferenceContext } from "../inference/pipeline.js";
import type { InferenceServiceOperations } from "../services/unary.js";

/**
 * What the front door's routes serve from: the same operations and pipeline as gRPC, and
 * the server's state. server.ts starts the server and registers the routes; the routes
 * import this, never server.ts.
 */
export interface FrontDoor {
  readonly inference: InferenceContext;
  readonly operations: InferenceServiceOperations;
  /** The server is live / ready (the readiness a load balancer sees on every port). */
  readonly live: () => boolean;
  readonly ready: () => boolean;
  /** True once the data plane drains (SIGTERM): requests are still served, connections are not kept. */
  readonly draining: () => boolean;
}

import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { unaryCall, type UnarySend } from "../../../lib/grpc/unary-call.js";
import {
  GRPCInferenceServiceClient,
  type ModelReadyResponse,
  type RepositoryIndexResponse,
} from "../../../proto/gen/ts/grpc_service.js";
import type { RepositoryModelStatus } from "../api/v1alpha1.js";

/**
 * Asks a data-plane pod which models it serves: the operator's one look inside the data
 * plane, for what it cannot read itself (configs on a claim, upstream readiness).
 */
export interface RepositoryIndexReader {
  /** Every model and version at `address` (host:port), in name order, with state and reason. */
  read(address: string): Promise<RepositoryModelStatus[]>;
}

/** Long enough for a busy pod, short enough not to hold a reconcile worker. */
const CALL_DEADLINE_MS = 5_000;

const NOT_READY_REASON =
  "loaded, but ModelReady says not ready (a forwarded model: the upstream does not have it ready or cannot be reached)";

/**
 * Over the KServe v2 gRPC API: RepositoryIndex for the list, then ModelReady for every
 * entry the index calls READY, since a forwarded model is only as ready as the upstream
 * says (the data plane asks it). One connection per read, closed after.
 */
export class GrpcRepositoryIndex implements RepositoryIndexReader {
  async read(address: string): Promise<RepositoryModelStatus[]> {
    const client = new GRPCInferenceServiceClient(address, credentials.createInsecure());
    try {
      const index = await ask<RepositoryIndexResponse>((options, done) =>
        client.repositoryIndex({ repositoryName: "", ready: false }, new Metadata(), options, done),
      );
      return await Promise.all(
        index.models.map(async ({ name, version, state, reason }): Promise<RepositoryModelStatus> => {
          const entry = { name, ...(version ? { version } : {}) };
          if (state !== "READY") return { ...entry, state: state || "UNAVAILABLE", ...(reason ? { reason } : {}) };
          const { ready } = await ask<ModelReadyResponse>((options, done) =>
            client.modelReady({ name, version }, new Metadata(), options, done),
          );
          return ready ? { ...entry, state } : { ...entry, state: "UNAVAILABLE", reason: NOT_READY_REASON };
        }),
      );
    } finally {
      client.close();
    }
  }
}

/** One call with the probe's deadline; a failure is an Error with the server's detail. */
function ask<Reply>(send: UnarySend<Reply>): Promise<Reply> {
  return unaryCall(send, { deadline: Date.now() + CALL_DEADLINE_MS }).catch((error: ServiceError) => {
    throw new Error(error.details || error.message);
  });
}

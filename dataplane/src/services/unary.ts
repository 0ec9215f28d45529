import type { handleUnaryCall, ServerUnaryCall } from "@grpc/grpc-js";
import type { GRPCInferenceServiceServer } from "../../../proto/gen/ts/grpc_service.js";
import { unimplemented } from "../../../lib/errors.js";
import { toServiceError } from "../server/status.js";

/**
 * Adapts a handler to grpc-js: its result (or what its promise resolves to) is the reply,
 * what it throws (or its promise rejects with) the status. A result that is not a promise
 * is answered at once, without a promise of its own.
 */
export function unary<Request, Response>(
  handler: (request: Request, call: ServerUnaryCall<Request, Response>) => Promise<Response> | Response,
): handleUnaryCall<Request, Response> {
  return (call, callback) => {
    let result: Promise<Response> | Response;
    try {
      result = handler(call.request, call);
    } catch (error) {
      return callback(toServiceError(error));
    }
    if (!(result instanceof Promise)) return callback(null, result);
    result.then(
      (response) => callback(null, response),
      (error: unknown) => callback(toServiceError(error)),
    );
  };
}

/**
 * Protocol-neutral operations for a set of unary RPCs: each takes the RPC's request message
 * and returns its response. The gRPC server adapts them with `unaryHandlers`; the HTTP front
 * door calls the same functions with requests it builds from URLs and JSON.
 */
export type Operations<Handlers> = {
  [Name in keyof Handlers]: Handlers[Name] extends handleUnaryCall<infer Request, infer Response>
    ? (request: Request) => Promise<Response> | Response
    : never;
};

/** The unary RPCs of inference.GRPCInferenceService other than ModelInfer. */
export type UnaryRpcs = Pick<
  GRPCInferenceServiceServer,
  | "serverLive"
  | "serverReady"
  | "modelReady"
  | "serverMetadata"
  | "modelMetadata"
  | "modelConfig"
  | "modelStatistics"
  | "repositoryIndex"
  | "repositoryModelLoad"
  | "repositoryModelUnload"
  | "systemSharedMemoryStatus"
  | "systemSharedMemoryRegister"
  | "systemSharedMemoryUnregister"
  | "cudaSharedMemoryStatus"
  | "cudaSharedMemoryRegister"
  | "cudaSharedMemoryUnregister"
  | "traceSetting"
  | "logSettings"
>;

/** Those RPCs as operations, shared by the gRPC server and the HTTP front door. */
export type InferenceServiceOperations = Operations<UnaryRpcs>;

/** grpc-js handlers for operations. */
export function unaryHandlers<Handlers>(operations: Operations<Handlers>): Handlers {
  const entries = Object.entries(operations as Record<string, (request: unknown) => unknown>);
  return Object.fromEntries(entries.map(([name, operation]) => [name, unary(operation)])) as Handlers;
}

/** An operation this data plane does not implement: UNIMPLEMENTED with a reason. */
export function notImplemented(rpc: string, reason: string): () => never {
  return () => {
    throw unimplemented(`${rpc} is not implemented by this data plane: ${reason}`);
  };
}

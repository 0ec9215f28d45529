import { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";

/**
 * Inference requests as grpc-js hands them to the services: decoded by the generated code
 * (tensor bytes stay views of the received message), with the message's own bytes kept
 * beside it so a forwarded model can send it on as it came. Nothing is copied: the decoded
 * tensors already hold the received buffer.
 */
const received = new WeakMap<ModelInferRequest, Uint8Array>();

export function decodeInferRequest(bytes: Buffer): ModelInferRequest {
  const request = ModelInferRequest.decode(bytes);
  received.set(request, bytes);
  return request;
}

/** The bytes a request decoded here came in (undefined for a request built in-process, e.g. from HTTP). */
export function receivedBytesOf(request: ModelInferRequest): Uint8Array | undefined {
  return received.get(request);
}

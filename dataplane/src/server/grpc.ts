import {
  Server,
  type ServerCredentials,
  type ServerInterceptor,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import type { HealthImplementation } from "grpc-health-check";
import { addReflection } from "./reflection.js";
import { InferenceExtensionsService, type InferenceExtensionsServer } from "../../../proto/gen/ts/extensions.js";
import {
  GRPCInferenceServiceService,
  ModelInferResponse,
  ModelStreamInferResponse,
  type GRPCInferenceServiceServer,
} from "../../../proto/gen/ts/grpc_service.js";

export interface GrpcServerOptions {
  readonly host: string;
  readonly port: number;
  /** Largest message accepted or sent, in bytes. */
  readonly maxMessageSize: number;
  readonly credentials: ServerCredentials;
  /** Run around every call; the first is the innermost (metrics, then authentication). */
  readonly interceptors: readonly ServerInterceptor[];
}

/** A Buffer over the encoder's output, without copying tensor bytes once more. */
const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/**
 * The generated service definition, with inference replies serialized without the extra
 * copy the generated serializer makes (Buffer.from(Uint8Array) copies every byte).
 */
const inferenceService: ServiceDefinition = {
  ...GRPCInferenceServiceService,
  modelInfer: {
    ...GRPCInferenceServiceService.modelInfer,
    responseSerialize: (value: ModelInferResponse): Buffer => asBuffer(ModelInferResponse.encode(value).finish()),
  },
  modelStreamInfer: {
    ...GRPCInferenceServiceService.modelStreamInfer,
    responseSerialize: (value: ModelStreamInferResponse): Buffer =>
      asBuffer(ModelStreamInferResponse.encode(value).finish()),
  },
};

const extensionsService: ServiceDefinition = {
  ...InferenceExtensionsService,
  modelInferStream: {
    ...InferenceExtensionsService.modelInferStream,
    responseSerialize: (value: ModelInferResponse): Buffer => asBuffer(ModelInferResponse.encode(value).finish()),
  },
};

/** Starts the gRPC server and resolves with it and the port it is bound to. */
export async function startGrpcServer(
  implementation: GRPCInferenceServiceServer,
  extensions: InferenceExtensionsServer,
  health: HealthImplementation,
  options: GrpcServerOptions,
): Promise<{ server: Server; port: number }> {
  const server = new Server({
    "grpc.max_receive_message_length": options.maxMessageSize,
    "grpc.max_send_message_length": options.maxMessageSize,
    interceptors: [...options.interceptors],
  });
  server.addService(inferenceService, implementation as unknown as UntypedServiceImplementation);
  server.addService(extensionsService, extensions);
  health.addToServer(server);
  addReflection(server);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${options.host}:${options.port}`, options.credentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
  return { server, port };
}

/** Lets in-flight calls finish for up to `graceMs`, then cancels what is left. */
export async function stopGrpcServer(server: Server, graceMs: number): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

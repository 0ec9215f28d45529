import {
  Server,
  type handleBidiStreamingCall,
  type handleServerStreamingCall,
  type handleUnaryCall,
  type ServerCredentials,
  type ServerInterceptor,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import type { HealthImplementation } from "grpc-health-check";
import { applyPingPolicies, type PingPolicies } from "./http2-pings.js";
import { addReflection } from "./reflection.js";
import { InferenceExtensionsService } from "../../../proto/gen/ts/extensions.js";
import { GRPCInferenceServiceService, type GRPCInferenceServiceServer } from "../../../proto/gen/ts/grpc_service.js";
import type { InferResponseOrEncoded } from "../tensors/wire.js";
import {
  encodeInferResponse,
  encodeStreamInferResponse,
  type SerializedMessage,
  type StreamInferReply,
} from "./reply-encoding.js";
import { decodeInferRequest, type ReceivedInferRequest } from "./request-decoding.js";

export interface GrpcServerOptions {
  readonly host: string;
  readonly port: number;
  /** Largest message accepted or sent, in bytes. */
  readonly maxMessageSize: number;
  readonly credentials: ServerCredentials;
  /** Run around every call (the data plane's: server/call-interceptor.ts). */
  readonly interceptors: readonly ServerInterceptor[];
  readonly tuning: GrpcTuning;
  /** The inference methods' request deserializers (absent: every request decoded). */
  readonly requestDecoders?: InferRequestDecoders;
}

/**
 * How inference requests are read, per kind of method (request-decoding.ts: a request to a
 * model that passes through on it stays encoded): ModelInfer's, and the streams'
 * (ModelStreamInfer, ModelInferStream).
 */
export interface InferRequestDecoders {
  readonly unary: (bytes: Buffer) => ReceivedInferRequest;
  readonly stream: (bytes: Buffer) => ReceivedInferRequest;
}

const DECODE_ALL: InferRequestDecoders = { unary: decodeInferRequest, stream: decodeInferRequest };

/** The service with the given methods' request deserializers replaced. */
function withDecoders(
  service: ServiceDefinition,
  decoders: Readonly<Record<string, (bytes: Buffer) => ReceivedInferRequest>>,
): ServiceDefinition {
  const methods = Object.entries(decoders).map(([name, decode]) => [
    name,
    { ...service[name]!, requestDeserialize: decode },
  ]);
  return { ...service, ...Object.fromEntries(methods) };
}

/**
 * Connection settings grpc-js honours on the server side (unset: grpc-js's defaults).
 * A maximum connection age makes clients reconnect now and then, so an L4 load balancer
 * spreads long-lived HTTP/2 connections over new replicas.
 */
export interface GrpcTuning {
  readonly maxConnectionAgeMs?: number;
  readonly maxConnectionAgeGraceMs?: number;
  readonly maxConnectionIdleMs?: number;
  readonly maxConcurrentStreams?: number;
  /**
   * The server's HTTP/2 receive windows, per call and per connection. grpc-js has no option
   * for them: patches/@grpc+grpc-js+1.14.7.patch adds one (after grpc-node PR #3058).
   */
  readonly streamWindowBytes?: number;
  readonly connectionWindowBytes?: number;
  /** Keepalive pings sent and client pings policed, as gRPC core does (http2-pings.ts). */
  readonly pings: PingPolicies;
}

type ChannelArgument = Exclude<keyof GrpcTuning, "pings">;

const TUNING_OPTIONS: Readonly<Record<ChannelArgument, string>> = {
  maxConnectionAgeMs: "grpc.max_connection_age_ms",
  maxConnectionAgeGraceMs: "grpc.max_connection_age_grace_ms",
  maxConnectionIdleMs: "grpc.max_connection_idle_ms",
  maxConcurrentStreams: "grpc.max_concurrent_streams",
  streamWindowBytes: "grpc-node.flow_control_window",
  connectionWindowBytes: "grpc-node.connection_flow_control_window",
};

/**
 * grpc-js types a response serializer as returning one Buffer; patched
 * (patches/@grpc+grpc-js+1.14.7.patch), its server also sends an array of parts as one
 * message, without copying them.
 */
const inParts = <T>(serialize: (value: T) => SerializedMessage): ((value: T) => Buffer) =>
  serialize as (value: T) => Buffer;

/**
 * The generated service definitions, with inference requests decoded keeping the bytes
 * they came in (request-decoding.ts: a forwarded model sends them on as they are) and
 * replies serialized so that large tensors are not copied at all (reply-encoding.ts), where
 * the generated serializer copies them several times; a reply passed through from an
 * upstream is sent as it is.
 */
const inferenceService: ServiceDefinition = {
  ...GRPCInferenceServiceService,
  modelInfer: {
    ...GRPCInferenceServiceService.modelInfer,
    requestDeserialize: decodeInferRequest,
    responseSerialize: inParts(encodeInferResponse),
  },
  modelStreamInfer: {
    ...GRPCInferenceServiceService.modelStreamInfer,
    requestDeserialize: decodeInferRequest,
    responseSerialize: inParts(encodeStreamInferResponse),
  },
};

const extensionsService: ServiceDefinition = {
  ...InferenceExtensionsService,
  modelInferStream: {
    ...InferenceExtensionsService.modelInferStream,
    requestDeserialize: decodeInferRequest,
    responseSerialize: inParts(encodeInferResponse),
  },
};

/**
 * The same server-streaming method at the path Modular MAX's clients call: their copy of
 * the KServe proto declares ModelInferStream inside inference.GRPCInferenceService. Only
 * the path is added; proto/grpc_service.proto stays the standard one.
 */
const maxStreamPath: ServiceDefinition = {
  modelInferStream: {
    ...extensionsService["modelInferStream"]!,
    path: "/inference.GRPCInferenceService/ModelInferStream",
  },
};

/** The inference service as this server serializes it: replies may be passed on from an upstream as they came. */
export type InferenceServiceImplementation = Omit<GRPCInferenceServiceServer, "modelInfer" | "modelStreamInfer"> & {
  readonly modelInfer: handleUnaryCall<ReceivedInferRequest, InferResponseOrEncoded>;
  readonly modelStreamInfer: handleBidiStreamingCall<ReceivedInferRequest, StreamInferReply>;
};

export interface ExtensionsImplementation {
  readonly modelInferStream: handleServerStreamingCall<ReceivedInferRequest, InferResponseOrEncoded>;
}

/**
 * Large replies leave in slices of this size (patches/@grpc+grpc-js+1.14.7.patch). Node 24's
 * nghttp2 (1.65 on) sends a connection's DATA oldest stream first, each stream until it has
 * nothing queued: a small reply (a model unload's, a health check's) sharing a connection
 * with large ModelInfer replies waited for all of them, seconds when the client's receive
 * window is grpc-js's 64 KiB. Between two slices a large reply has nothing queued, so the
 * others get their turn. One default HTTP/2 window: 256 KiB slices still let an unload wait
 * up to 1.5 s; a write per slice costs a few percent of 1 MiB throughput (patches/README.md
 * has the numbers).
 */
const WRITE_SLICE_BYTES = 64 * 1024;
const WRITE_SLICE_OPTION = "dynamo-kserve.write_slice_bytes";

/** Starts the gRPC server and resolves with it and the port it is bound to. */
export async function startGrpcServer(
  implementation: InferenceServiceImplementation,
  extensions: ExtensionsImplementation,
  health: HealthImplementation,
  options: GrpcServerOptions,
): Promise<{ server: Server; port: number }> {
  const { pings, ...channelArguments } = options.tuning;
  const tuning = Object.entries(channelArguments)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => [TUNING_OPTIONS[key as ChannelArgument], value as number]);
  const server = new Server({
    "grpc.max_receive_message_length": options.maxMessageSize,
    "grpc.max_send_message_length": options.maxMessageSize,
    [WRITE_SLICE_OPTION]: WRITE_SLICE_BYTES,
    // Nothing here reads channelz, and grpc-js's channelz handler times and counts every
    // call and message (Date.now() per message): off, it serves calls through its plain handler.
    "grpc.enable_channelz": 0,
    ...Object.fromEntries(tuning),
    interceptors: [...options.interceptors],
  });
  const { unary, stream } = options.requestDecoders ?? DECODE_ALL;
  const inference = withDecoders(inferenceService, { modelInfer: unary, modelStreamInfer: stream });
  server.addService(inference, implementation as unknown as UntypedServiceImplementation);
  server.addService(
    withDecoders(extensionsService, { modelInferStream: stream }),
    extensions as unknown as UntypedServiceImplementation,
  );
  server.addService(
    withDecoders(maxStreamPath, { modelInferStream: stream }),
    extensions as unknown as UntypedServiceImplementation,
  );
  health.addToServer(server);
  addReflection(server);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${options.host}:${options.port}`, options.credentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
  applyPingPolicies(server, pings);
  return { server, port };
}

/** After the last request's response, how long its final frames get to leave before the cut. */
const FLUSH_MS = 200;

/**
 * Stops taking new calls and lets the calls in flight finish: once `workDone` resolves
 * (no inference request is running, plus a moment for the last responses to be flushed)
 * or `graceMs` has passed, whatever is still open (health Watch streams, idle
 * ModelStreamInfer streams, or work past the grace) is cancelled.
 */
export async function stopGrpcServer(server: Server, workDone: Promise<void>, graceMs: number): Promise<void> {
  await new Promise<void>((resolve) => {
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(graceTimer);
      server.forceShutdown();
      resolve();
    };
    const graceTimer = setTimeout(finish, graceMs);
    server.tryShutdown(finish);
    void workDone.then(() => setTimeout(finish, FLUSH_MS));
  });
}

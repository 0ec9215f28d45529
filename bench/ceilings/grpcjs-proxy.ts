import {
  Client,
  credentials,
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { GRPCInferenceServiceService } from "../../proto/gen/ts/grpc_service.js";
import { DEFAULT_CONNECTION_WINDOW, DEFAULT_STREAM_WINDOW } from "../../lib/contract/dataplane.js";
import { countExternalMemoryInHeapLimit } from "../../lib/external-memory.js";

/**
 * A grpc-js server in front of a grpc-js client, bytes only: what forwarding costs on grpc-js
 * alone, with nothing of the data plane's around it (no decoding, metrics, admission). Every
 * unary method of the KServe v2 service is relayed to the upstream: the request's bytes and
 * metadata, the deadline and a cancel go up; the initial metadata, the reply's bytes, the
 * status and its trailers come back. The data plane's windows (8 MiB per stream, 16 MiB per
 * connection on the server; 8 MiB on the upstream channel, as --upstream-flow-control-window).
 *
 * Usage: node dist/bench/ceilings/grpcjs-proxy.js <port> <upstream host:port>
 * Prints "listening <port>".
 */

countExternalMemoryInHeapLimit();
const [portArgument = "0", upstream = "127.0.0.1:8001"] = process.argv.slice(2);
const asIs = (bytes: Buffer): Buffer => bytes;
// No size bound, and no channelz (nothing reads it; the data plane turns it off too).
const common = { "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1, "grpc.enable_channelz": 0 };

const client = new Client(upstream, credentials.createInsecure(), {
  ...common,
  "grpc-node.flow_control_window": DEFAULT_STREAM_WINDOW,
});

function relay(path: string) {
  return (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>): void => {
    let reply: Buffer | undefined;
    const upstreamCall = client.makeUnaryRequest(
      path,
      asIs,
      asIs,
      call.request,
      call.metadata,
      { deadline: call.getDeadline() },
      (_error, value) => (reply = value),
    );
    call.on("cancelled", () => upstreamCall.cancel());
    upstreamCall.on("metadata", (headers) => call.sendMetadata(headers));
    // The status comes after the callback, with the trailers.
    upstreamCall.on("status", ({ code, details, metadata }) =>
      code === status.OK ? callback(null, reply, metadata) : callback({ code, details, metadata }),
    );
  };
}

const unary = Object.entries(GRPCInferenceServiceService).filter(
  ([, method]) => !method.requestStream && !method.responseStream,
);
const bytesOnly = (method: { path: string }) => ({
  path: method.path,
  requestStream: false,
  responseStream: false,
  requestSerialize: asIs,
  requestDeserialize: asIs,
  responseSerialize: asIs,
  responseDeserialize: asIs,
});
const server = new Server({
  ...common,
  "grpc-node.flow_control_window": DEFAULT_STREAM_WINDOW,
  "grpc-node.connection_flow_control_window": DEFAULT_CONNECTION_WINDOW,
});
server.addService(
  Object.fromEntries(unary.map(([name, method]) => [name, bytesOnly(method)])),
  Object.fromEntries(unary.map(([name, method]) => [name, relay(method.path)])) as UntypedServiceImplementation,
);
server.bindAsync(`127.0.0.1:${portArgument}`, ServerCredentials.createInsecure(), (error, port) => {
  if (error) throw error;
  console.log(`listening ${port}`);
});

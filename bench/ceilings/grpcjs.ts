import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import { ModelInferResponse } from "../../proto/gen/ts/grpc_service.js";
import { DEFAULT_CONNECTION_WINDOW, DEFAULT_STREAM_WINDOW } from "../../lib/contract/dataplane.js";
import { countExternalMemoryInHeapLimit } from "../../lib/external-memory.js";

/**
 * A bare grpc-js server: the best Node can do for ModelInfer on this machine. It decodes
 * nothing and answers every request with a response encoded once at start, the one whose
 * payload matches the request's size, so only grpc-js and HTTP/2 work remain.
 *
 * Usage: node dist/bench/ceilings/grpcjs.js <port> <FP32 element counts, e.g. 256,262144>
 * Prints "listening <port>".
 */

function encodedResponse(elements: number): Buffer {
  const values = Float32Array.from({ length: elements }, (_, i) => i);
  return Buffer.from(
    ModelInferResponse.encode({
      modelName: "identity_fp32",
      modelVersion: "",
      id: "",
      parameters: {},
      outputs: [
        { name: "OUTPUT0", datatype: "FP32", shape: [1n, BigInt(elements)], parameters: {}, contents: undefined },
      ],
      rawOutputContents: [new Uint8Array(values.buffer)],
    }).finish(),
  );
}

countExternalMemoryInHeapLimit();
const [portArgument = "0", sizes = "256"] = process.argv.slice(2);
const responses = sizes
  .split(",")
  .map(Number)
  .sort((a, b) => a - b)
  .map((elements) => ({ payload: 4 * elements, response: encodedResponse(elements) }));

/** The largest response whose payload fits in the request: the echo of an identity model. */
function pick(requestSize: number): Buffer {
  let chosen = responses[0]!.response;
  for (const candidate of responses) if (candidate.payload <= requestSize) chosen = candidate.response;
  return chosen;
}

const passThrough = (bytes: Buffer): Buffer => bytes;
// The data plane's receive windows (patches/@grpc+grpc-js+1.14.7.patch), so the ceiling moves
// large tensors under the same HTTP/2 flow control.
const server = new Server({
  "grpc.max_receive_message_length": -1,
  "grpc.max_send_message_length": -1,
  "grpc-node.flow_control_window": DEFAULT_STREAM_WINDOW,
  "grpc-node.connection_flow_control_window": DEFAULT_CONNECTION_WINDOW,
});
server.addService(
  {
    modelInfer: {
      path: "/inference.GRPCInferenceService/ModelInfer",
      requestStream: false,
      responseStream: false,
      requestSerialize: passThrough,
      requestDeserialize: passThrough,
      responseSerialize: passThrough,
      responseDeserialize: passThrough,
    },
  },
  {
    modelInfer: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) =>
      callback(null, pick(call.request.length)),
  },
);
server.bindAsync(`127.0.0.1:${portArgument}`, ServerCredentials.createInsecure(), (error, port) => {
  if (error) throw error;
  console.log(`listening ${port}`);
});

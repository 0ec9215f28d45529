import { credentials } from "@grpc/grpc-js";
import {
  GRPCInferenceServiceClient,
  type ModelInferRequest,
  type ModelStreamInferResponse,
} from "../../proto/gen/ts/grpc_service.js";
import { joinBytesElements } from "../../dataplane/src/tensors/bytes.js";
import { StreamTally } from "./stream-tally.js";

/**
 * The streaming load generator: ghz runs a bidi stream as one request with a fixed list of
 * messages and reports per-stream latency, not responses per second nor the gaps between
 * them, so this generator (a separate process, pinned like ghz) keeps `streams`
 * ModelStreamInfer streams busy: each sends a prompt, reads its `tokens` responses, sends
 * the next. It prints one JSON line: responses, errors, and the p50/p99 gap between a
 * stream's consecutive responses (inter-token latency as a client sees it).
 *
 * Usage: node stream-load.js <host:port> <model> <streams> <tokens> <warmup s> <duration s> <connections>
 */

const [
  address = "",
  model = "",
  streamArg = "1",
  tokenArg = "16",
  warmupArg = "1",
  durationArg = "5",
  connectionArg = "8",
] = process.argv.slice(2);
const [streams, tokens, warmupSeconds, durationSeconds, connections] = [
  streamArg,
  tokenArg,
  warmupArg,
  durationArg,
  connectionArg,
].map(Number) as [number, number, number, number, number];

const request: ModelInferRequest = {
  modelName: model,
  modelVersion: "",
  id: "",
  parameters: { max_tokens: { parameterChoice: { $case: "int64Param", value: BigInt(tokens) } } },
  inputs: [{ name: "text_input", datatype: "BYTES", shape: [1n], parameters: {}, contents: undefined }],
  outputs: [],
  rawInputContents: [joinBytesElements([new TextEncoder().encode("hello")])],
};

// Distinct options give each client its own connection (grpc-js shares equal subchannels).
const clients = Array.from(
  { length: Math.max(1, Math.min(connections, streams)) },
  (_, i) =>
    new GRPCInferenceServiceClient(address, credentials.createInsecure(), { "grpc.primary_user_agent": `bench-${i}` }),
);
const tally = new StreamTally();

for (let i = 0; i < streams; i++) {
  const call = clients[i % clients.length]!.modelStreamInfer();
  let received = 0;
  let last = 0;
  call.on("data", (reply: ModelStreamInferResponse) => {
    const now = performance.now();
    if (reply.errorMessage !== "") tally.error();
    else tally.response(received > 0 ? now - last : undefined);
    last = now;
    if (++received === tokens || reply.errorMessage !== "") {
      received = 0;
      call.write(request);
    }
  });
  call.on("error", () => tally.error());
  call.write(request);
}

tally.measure(warmupSeconds, durationSeconds);

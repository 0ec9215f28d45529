import {
  Client,
  credentials,
  Server,
  ServerCredentials,
  status,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type sendUnaryData,
  type ServiceError,
} from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { ModelInferRequest, ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { TestRepository } from "../fixtures/repository.js";
import { callError, inferRequest, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * Forwarded models that declare no tensors pass requests and replies through as bytes.
 * Observed with what the generated code cannot keep: a field it does not know (field 99)
 * survives the trip both ways only if nobody decoded and re-encoded the message.
 */

const UNKNOWN_FIELD = Buffer.from([0x9a, 0x06, 3, 0x61, 0x62, 0x63]); // field 99, "abc"
const hasUnknownField = (bytes: Buffer): boolean => bytes.subarray(-UNKNOWN_FIELD.length).equals(UNKNOWN_FIELD);
const asIs = (bytes: Buffer): Buffer => bytes;
const method = (name: string, streams: boolean) => ({
  path: `/inference.GRPCInferenceService/${name}`,
  requestStream: streams,
  responseStream: streams,
  requestSerialize: asIs,
  requestDeserialize: asIs,
  responseSerialize: asIs,
  responseDeserialize: asIs,
});

const upstreamReply = (request: ModelInferRequest, index: number, final?: boolean): Buffer => {
  const reply: ModelInferResponse = {
    modelName: request.modelName,
    modelVersion: "7",
    id: request.id,
    parameters:
      final === undefined ? {} : { triton_final_response: { parameterChoice: { $case: "boolParam", value: final } } },
    outputs: [{ name: "OUT", datatype: "INT32", shape: [1n], parameters: {}, contents: undefined }],
    rawOutputContents: [new Uint8Array(Int32Array.of(index).buffer)],
  };
  return Buffer.concat([ModelInferResponse.encode(reply).finish(), UNKNOWN_FIELD]);
};

/** A KServe upstream that keeps every request's bytes and answers with bytes carrying the unknown field. */
async function rawUpstream(): Promise<{ server: Server; address: string; received: Buffer[] }> {
  const received: Buffer[] = [];
  const server = new Server();
  server.addService(
    { modelInfer: method("ModelInfer", false), modelStreamInfer: method("ModelStreamInfer", true) },
    {
      modelInfer: (call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => {
        received.push(call.request);
        done(null, upstreamReply(ModelInferRequest.decode(call.request), 1));
      },
      modelStreamInfer: (call: ServerDuplexStream<Buffer, Buffer>) => {
        call.on("data", (bytes: Buffer) => {
          received.push(bytes);
          const request = ModelInferRequest.decode(bytes);
          for (const [index, final] of [
            [1, false],
            [2, true],
          ] as const) {
            const inner = upstreamReply(request, index, final);
            const outer = ModelStreamInferResponse.encode({ errorMessage: "", inferResponse: undefined }).finish();
            call.write(Buffer.concat([outer, Buffer.from([0x12]), varint(inner.length), inner]));
          }
        });
        call.on("end", () => call.end());
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return { server, address: `127.0.0.1:${port}`, received };
}

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest > 0x7f) {
    bytes.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

const forwarded = (name: string, upstream: string, extra = "") => `
name: "${name}"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${upstream}" } }
parameters { key: "upstream_model" value { string_value: "theirs" } }
${extra}
`;

const request = (modelName: string): Buffer =>
  Buffer.concat([
    ModelInferRequest.encode(
      inferRequest({
        modelName,
        id: "r1",
        inputs: [{ name: "IN", datatype: "INT32", shape: [2n], parameters: {}, contents: undefined }],
        rawInputContents: [new Uint8Array(Int32Array.of(4, 5).buffer)],
      }),
    ).finish(),
    UNKNOWN_FIELD,
  ]);

describe("kserve-grpc engine: requests and replies passed through as bytes", function () {
  this.timeout(60_000);
  let upstream: Awaited<ReturnType<typeof rawUpstream>>;
  let repository: TestRepository;
  let server: ServerProcess;
  let raw: Client;

  before(async () => {
    upstream = await rawUpstream();
    repository = new TestRepository({
      open: forwarded("open", upstream.address),
      open_stream: forwarded("open_stream", upstream.address, "model_transaction_policy { decoupled: true }"),
      declared: forwarded(
        "declared",
        upstream.address,
        `input [ { name: "IN" data_type: TYPE_INT32 dims: [ 2 ] } ]
         output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]`,
      ),
    });
    server = await startServer(["--model-repository", repository.dir]);
    raw = new Client(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
  });

  after(async () => {
    raw?.close();
    await server?.stop();
    repository?.remove();
    upstream?.server.forceShutdown();
  });

  const rawInfer = (bytes: Buffer): Promise<Buffer> =>
    new Promise((resolve, reject) =>
      raw.makeUnaryRequest("/inference.GRPCInferenceService/ModelInfer", asIs, asIs, bytes, (error, reply) =>
        error ? reject(error) : resolve(reply!),
      ),
    );

  it("ModelInfer: the client's bytes go upstream as they came, only the model renamed; the reply comes back as it left the upstream", async () => {
    upstream.received.length = 0;
    const reply = await rawInfer(request("open"));
    const sent = upstream.received[0]!;
    assert.ok(hasUnknownField(sent), "the request's unknown field reached the upstream");
    assert.equal(ModelInferRequest.decode(sent).modelName, "theirs");
    assert.ok(hasUnknownField(reply), "the upstream's unknown field reached the client");
    const decoded = ModelInferResponse.decode(reply);
    assert.deepEqual([decoded.modelName, decoded.modelVersion, decoded.id], ["open", "1", "r1"]);
    assert.deepEqual([...new Int32Array(new Uint8Array(decoded.rawOutputContents[0]!).slice().buffer)], [1]);
  });

  it("ModelStreamInfer to a decoupled model: each upstream response passed on, its final flags its own", async () => {
    upstream.received.length = 0;
    const stream = raw.makeBidiStreamRequest("/inference.GRPCInferenceService/ModelStreamInfer", asIs, asIs);
    const replies: Buffer[] = [];
    await new Promise<void>((resolve, reject) => {
      stream.on("data", (reply: Buffer) => replies.push(reply));
      stream.on("end", resolve);
      stream.on("error", reject);
      stream.write(request("open_stream"));
      stream.end();
    });
    assert.ok(hasUnknownField(upstream.received[0]!));
    assert.equal(replies.length, 2);
    for (const [index, bytes] of replies.entries()) {
      const { errorMessage, inferResponse } = ModelStreamInferResponse.decode(bytes);
      assert.equal(errorMessage, "");
      assert.equal(inferResponse?.modelName, "open_stream");
      const flag = inferResponse?.parameters["triton_final_response"]?.parameterChoice;
      assert.deepEqual(flag, { $case: "boolParam", value: index === 1 });
      assert.ok(hasUnknownField(bytes), "the inner reply is the upstream's, unknown field and all");
    }
  });

  it("a model that declares tensors still has its requests checked and re-encoded", async () => {
    upstream.received.length = 0;
    const reply = await rawInfer(request("declared"));
    assert.ok(!hasUnknownField(upstream.received[0]!), "decoded and re-encoded for the upstream");
    assert.ok(!hasUnknownField(reply));
    assert.equal(ModelInferResponse.decode(reply).modelName, "declared");
    const wrongShape = ModelInferRequest.decode(request("declared"));
    wrongShape.inputs[0]!.shape = [3n];
    wrongShape.rawInputContents = [new Uint8Array(12)];
    const refused: ServiceError = await callError(server.client, "modelInfer", wrongShape);
    assert.equal(refused.code, status.INVALID_ARGUMENT);
    assert.match(refused.details, /IN/);
    assert.equal(upstream.received.length, 1, "the refused request never went upstream");
  });
});

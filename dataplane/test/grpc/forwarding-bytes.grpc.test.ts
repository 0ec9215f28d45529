import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { decodeGrpcMessage } from "../../../lib/grpc/frames.js";
import { cutAt, framed, record, type RecordedCall, type Recording } from "../fixtures/h2-recorder.js";
import {
  MODELS_PYTHON,
  requireTritonPeers,
  requireTritonServer,
  startTritonServer,
  type Peer,
} from "../fixtures/peers.js";
import { TestRepository } from "../fixtures/repository.js";
import { scriptedRequest, type Script } from "../fixtures/scripted-upstream.js";
import { forwardedConfig, useScriptedForwarding } from "../fixtures/forwarding.js";
import { inferRequest, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * Forwarded byte for byte (design/issue-39.md §2): each call is recorded as HTTP/2 carried it
 * (fixtures/h2-recorder.ts) once against an upstream directly and once through the data
 * plane's pass-through model of the same name, and the two recordings must be equal — every
 * DATA byte, the status, its text, the custom metadata and trailers — but for the headers
 * below, which the spec lets each hop write for itself.
 */

/**
 * Response headers a proxy may write differently: compression is negotiated per hop
 * (`grpc-encoding`, `grpc-accept-encoding`, `accept-encoding`), and `application/grpc` and
 * `application/grpc+proto` name the same codec. (`date` the recorder leaves out.)
 */
const PER_HOP = ["grpc-encoding", "grpc-accept-encoding", "accept-encoding", "content-type"];

/**
 * A recording as the comparison sees it: the per-hop headers left out, and `grpc-message` as
 * the text it carries. Its encoding is the sender's (Triton leaves spaces as they are, grpc-js
 * percent-encodes them; both are what the spec allows), and with status OK it says nothing
 * (grpc-js always sends "OK", Triton nothing).
 */
function comparable(recording: Recording): unknown {
  const normal = (headers: Readonly<Record<string, string | string[]>> | undefined) => {
    if (headers === undefined) return undefined;
    const kept = Object.entries(headers).filter(([name]) => !PER_HOP.includes(name));
    const ok = headers["grpc-status"] === "0";
    return Object.fromEntries(
      kept
        .filter(([name]) => !(ok && name === "grpc-message"))
        .map(([name, value]) => [name, name === "grpc-message" ? decodeGrpcMessage(String(value)) : value]),
    );
  };
  return {
    headers: normal(recording.headers),
    data: recording.data.toString("hex"),
    trailers: normal(recording.trailers),
    rstCode: recording.rstCode,
  };
}

const INFER = "/inference.GRPCInferenceService/ModelInfer";
const STREAM_INFER = "/inference.GRPCInferenceService/ModelStreamInfer";

const encoded = (request: ModelInferRequest): Buffer => Buffer.from(ModelInferRequest.encode(request).finish());

/** A call of one message, in one DATA chunk or cut at `cuts` (offsets in the framed message). */
const call = (path: string, request: ModelInferRequest, cuts: number[] = [], headers = {}): RecordedCall => ({
  path,
  headers,
  chunks: cutAt(framed(encoded(request)), ...cuts),
});

const DECOUPLED = "model_transaction_policy { decoupled: true }";

/** Records `recorded` directly against `upstream` and through the data plane, and holds them equal. */
async function sameBothWays(upstream: string, server: ServerProcess, recorded: RecordedCall): Promise<Recording> {
  const direct = await record(upstream, recorded);
  const through = await record(`127.0.0.1:${server.grpcPort}`, recorded);
  assert.deepEqual(comparable(through), comparable(direct));
  return through;
}

describe("forwarded byte for byte: a scripted grpc-js peer, directly and through a pass-through model", function () {
  this.timeout(60_000);
  const forwarding = useScriptedForwarding((upstream) => ({
    scripted: forwardedConfig("scripted", upstream),
    scripted_stream: forwardedConfig("scripted_stream", upstream, DECOUPLED),
  }));

  const same = (recorded: RecordedCall): Promise<Recording> =>
    sameBothWays(forwarding.upstream.address, forwarding.server, recorded);
  const unary = (script: Script, cuts: number[] = []): Promise<Recording> =>
    same(call(INFER, scriptedRequest("scripted", script, { id: "r1" }), cuts));

  it("ModelInfer: an echo", async () => {
    const recording = await unary({});
    assert.equal(recording.trailers?.["grpc-status"], "0");
  });

  it("ModelInfer: custom initial metadata and trailers, text and -bin", async () => {
    const recording = await unary({
      metadata: { "x-upstream": "hello", "x-blob-bin": Buffer.from([0, 1, 2, 250]).toString("base64") },
      trailers: { "x-trailer": "t", "x-trailer-bin": Buffer.from([9, 8]).toString("base64") },
    });
    assert.equal(recording.headers["x-upstream"], "hello");
    assert.equal(recording.trailers?.["x-trailer"], "t");
  });

  it("ModelInfer: a non-OK status after headers, its message percent-encoded, grpc-status-details-bin", async () => {
    const recording = await unary({
      status: 5,
      details: "not found: 100% ünïcode\r\nand a newline",
      statusDetailsBin: Buffer.from("details of the status").toString("base64"),
      metadata: { "x-upstream": "before" },
      trailers: { "x-why": "because" },
    });
    assert.equal(recording.trailers?.["grpc-status"], "5");
  });

  it("ModelInfer: an error after headers that carry no custom metadata stays headers then trailers", async () => {
    const recording = await unary({ status: 9, details: "not now" });
    assert.equal(recording.trailers?.["grpc-status"], "9");
  });

  it("ModelInfer: a Trailers-Only error", async () => {
    const recording = await unary({
      status: 8,
      details: "too busy",
      trailersOnly: true,
      trailers: { "x-why": "load" },
    });
    assert.equal(recording.headers["grpc-status"], "8");
    assert.equal(recording.trailers, undefined);
  });

  it("ModelInfer: the request's message cut across DATA frames (inside the prefix, inside the body)", async () => {
    await unary({}, [2, 9, 40]);
    await unary({}, [5]);
    await unary({}, [1, 2, 3, 4]);
  });

  it("ModelStreamInfer: a decoupled model's replies, error_message ones between them, and the stream's trailers", async () => {
    const request = scriptedRequest("scripted_stream", { streamReplies: [null, "first went wrong", null, "again"] });
    const recording = await same(call(STREAM_INFER, { ...request, id: "s1" }, [3]));
    assert.equal(recording.trailers?.["grpc-status"], "0");
  });

  it("ModelStreamInfer: initial metadata comes from this server, not from a request of the stream", async () => {
    // One stream carries many requests, each of which may go to another upstream: only the
    // stream's own headers reach the client. The messages are still the upstream's, byte for byte.
    const request = scriptedRequest("scripted_stream", { metadata: { "x-upstream": "per request" } }, { id: "s2" });
    const recorded = call(STREAM_INFER, request);
    const direct = await record(forwarding.upstream.address, recorded);
    const through = await record(`127.0.0.1:${forwarding.server.grpcPort}`, recorded);
    assert.equal(direct.headers["x-upstream"], "per request");
    assert.equal(through.headers["x-upstream"], undefined);
    assert.ok(through.data.equals(direct.data));
  });
});

const IDENTITY_PY = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests
        ]
`;

/** A Python identity model's config: INPUT0 and OUTPUT0 of `type`, batched. */
const identityConfig = (name: string, type: string): string => `
name: "${name}"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: ${type} dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: ${type} dims: [ -1 ] } ]
`;

/** A Python model for Triton: `identity` echoes INPUT0 as OUTPUT0; `repeat` (decoupled) sends it back three times. */
const PYTHON_MODELS: Record<string, { config: string; code: string }> = {
  identity_fp32: { config: identityConfig("identity_fp32", "TYPE_FP32"), code: IDENTITY_PY },
  identity_bytes: { config: identityConfig("identity_bytes", "TYPE_STRING"), code: IDENTITY_PY },
  repeat_fp32: {
    config: `
name: "repeat_fp32"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`,
    code: `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            value = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            for _ in range(3):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", value)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`,
  },
};

describe("forwarded byte for byte: Triton, directly and through pass-through models", function () {
  this.timeout(180_000);
  let triton: Peer;
  let tritonRoot: string;
  let repository: TestRepository;
  let server: ServerProcess;

  before(async function () {
    requireTritonServer(this);
    requireTritonPeers(this);
    tritonRoot = mkdtempSync(join(tmpdir(), "dynamo-kserve-bytes-"));
    for (const [name, { config, code }] of Object.entries(PYTHON_MODELS)) {
      mkdirSync(join(tritonRoot, name, "1"), { recursive: true });
      writeFileSync(join(tritonRoot, name, "config.pbtxt"), config);
      writeFileSync(join(tritonRoot, name, "1", "model.py"), code);
    }
    triton = await startTritonServer([tritonRoot]);
    repository = new TestRepository({
      identity_fp32: forwardedConfig("identity_fp32", triton.address),
      identity_bytes: forwardedConfig("identity_bytes", triton.address),
      repeat_fp32: forwardedConfig("repeat_fp32", triton.address, DECOUPLED),
      // Not on the upstream: its NOT_FOUND comes back as Triton words it.
      absent: forwardedConfig("absent", triton.address),
    });
    server = await startServer(["--model-repository", repository.dir, "--python", MODELS_PYTHON]);
  });

  after(async () => {
    await server?.stop();
    repository?.remove();
    await triton?.kill();
    if (tritonRoot !== undefined) rmSync(tritonRoot, { recursive: true, force: true });
  });

  const same = (recorded: RecordedCall): Promise<Recording> => sameBothWays(triton.address, server, recorded);
  const fp32 = (modelName: string, shape: bigint[], values: number[], id = "t1") =>
    inferRequest({
      modelName,
      id,
      inputs: [{ name: "INPUT0", datatype: "FP32", shape, parameters: {}, contents: undefined }],
      rawInputContents: [new Uint8Array(Float32Array.from(values).buffer)],
    });

  it("identity_fp32 on ModelInfer", async () => {
    const recording = await same(call(INFER, fp32("identity_fp32", [1n, 3n], [1, 2, 3])));
    assert.equal(recording.trailers?.["grpc-status"], "0");
  });

  it("identity_bytes on ModelInfer", async () => {
    const element = Buffer.from("héllo");
    const length = Buffer.alloc(4);
    length.writeUInt32LE(element.length);
    const request = inferRequest({
      modelName: "identity_bytes",
      id: "b1",
      inputs: [{ name: "INPUT0", datatype: "BYTES", shape: [1n, 1n], parameters: {}, contents: undefined }],
      rawInputContents: [Buffer.concat([length, element])],
    });
    await same(call(INFER, request, [7]));
  });

  it("an unknown model upstream: Triton's NOT_FOUND as it came", async () => {
    const recording = await same(call(INFER, fp32("absent", [1n, 3n], [1, 2, 3])));
    assert.notEqual(recording.trailers?.["grpc-status"] ?? recording.headers["grpc-status"], "0");
  });

  it("a bad shape: Triton's INVALID_ARGUMENT as it came", async () => {
    const recording = await same(call(INFER, fp32("identity_fp32", [1n, 4n], [1, 2, 3])));
    assert.notEqual(recording.trailers?.["grpc-status"] ?? recording.headers["grpc-status"], "0");
  });

  it("a decoupled Python model streamed on ModelStreamInfer", async () => {
    const recording = await same(call(STREAM_INFER, fp32("repeat_fp32", [3n], [4, 5, 6], "d1")));
    assert.ok(recording.data.length > 0);
  });
});

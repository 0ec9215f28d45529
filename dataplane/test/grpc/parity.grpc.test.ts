import { credentials, Server, ServerCredentials, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import {
  GRPCInferenceServiceClient,
  GRPCInferenceServiceService,
  type GRPCInferenceServiceServer,
  type InferParameter,
  type ModelInferRequest,
  type ModelInferResponse,
} from "../../../proto/gen/ts/grpc_service.js";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { MODELS_PYTHON, requireTritonPeers } from "../fixtures/peers.js";
import { identityRequest } from "../fixtures/requests.js";
import { TestRepository } from "../fixtures/repository.js";
import { eventually, infer, inferRequest, startServer, streamAll, type ServerProcess } from "../fixtures/server.js";

/**
 * What NVIDIA Dynamo's KServe gRPC frontend does that users of it rely on, and that no other
 * test pins: options set by environment variable alone, uint64 parameters, and its echo of
 * request and tensor parameters through a tensor model.
 */

/** The one RPC a test makes fail, its error. */
const inferError = (client: GRPCInferenceServiceClient, request: ModelInferRequest): Promise<ServiceError | null> =>
  new Promise((resolve) => client.modelInfer(request, (error) => resolve(error)));

describe("DYNAMO_GRPC_WORKERS and DYNAMO_MAX_MESSAGE_SIZE, set in the environment only", function () {
  this.timeout(30_000);

  describe("DYNAMO_GRPC_WORKERS=2", () => {
    let server: ServerProcess;
    // Request lines are logged at debug: they say which process served each request.
    before(async () => (server = await startServer([], { DYNAMO_GRPC_WORKERS: "2", DYNAMO_LOG_LEVEL: "debug" })));
    after(async () => server?.stop());

    it("serves gRPC from two worker processes on one port, their metrics summed", async () => {
      const workers = (): Set<unknown> =>
        new Set(server.logs.filter((entry) => entry["msg"] === "worker listening").map((entry) => entry["pid"]));
      await eventually(() => assert.equal(workers().size, 2, "two workers started"));
      for (let i = 0; i < 12; i++) {
        // A connection of its own each time: the primary hands connections to the workers.
        const client = new GRPCInferenceServiceClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure(), {
          "grpc.use_local_subchannel_pool": 1,
        });
        await infer(client, identityRequest({ id: `env-worker-${i}` }));
        client.close();
      }
      await eventually(() => {
        const served = server.logs.filter((entry) => String(entry["requestId"]).startsWith("env-worker-"));
        assert.equal(served.length, 12);
        assert.deepEqual(new Set(served.map((entry) => entry["pid"])), workers(), "both workers served");
      });
      const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
      assert.equal(valueOf(samples, "nv_inference_exec_count", { model: "identity_fp32", version: "1" }), 12);
    });
  });

  describe("DYNAMO_MAX_MESSAGE_SIZE=65536", () => {
    let server: ServerProcess;
    before(async () => (server = await startServer([], { DYNAMO_MAX_MESSAGE_SIZE: String(64 * 1024) })));
    after(async () => server?.stop());

    const request = (elements: number): ModelInferRequest =>
      inferRequest({
        modelName: "identity_fp32",
        inputs: [
          { name: "INPUT0", datatype: "FP32", shape: [1n, BigInt(elements)], parameters: {}, contents: undefined },
        ],
        rawInputContents: [new Uint8Array(4 * elements)],
      });

    it("refuses a request over 64 KiB with RESOURCE_EXHAUSTED (the default allows 64 MiB), and serves one under it", async () => {
      const error = await inferError(server.client, request(32 * 1024));
      assert.equal(error?.code, status.RESOURCE_EXHAUSTED);
      assert.equal(await inferError(server.client, request(8 * 1024)), null);
    });
  });
});

/** 2^64 - 1: only a uint64 parameter holds it. */
const UINT64_MAX = 18446744073709551615n;
const uint64 = (value: bigint): InferParameter => ({ parameterChoice: { $case: "uint64Param", value } });
const int64 = (value: bigint): InferParameter => ({ parameterChoice: { $case: "int64Param", value } });
const text = (value: string): InferParameter => ({ parameterChoice: { $case: "stringParam", value } });
const flag = (value: boolean): InferParameter => ({ parameterChoice: { $case: "boolParam", value } });
const real = (value: number): InferParameter => ({ parameterChoice: { $case: "doubleParam", value } });

/**
 * The reference's echo tensor worker (its tests' tests/frontend/grpc/echo_tensor_worker.py),
 * as a KServe upstream: each input comes back as an output of the same name, datatype, shape,
 * data and parameters; the response's parameters are the request's plus `processed: true`.
 */
async function echoUpstream(): Promise<{ server: Server; address: string; received: ModelInferRequest[] }> {
  const received: ModelInferRequest[] = [];
  const echo = (request: ModelInferRequest): ModelInferResponse => {
    received.push(request);
    return {
      modelName: request.modelName,
      modelVersion: "1",
      id: request.id,
      parameters: { ...request.parameters, processed: flag(true) },
      outputs: request.inputs.map(({ name, datatype, shape, parameters }) => ({
        name,
        datatype,
        shape,
        parameters,
        contents: undefined,
      })),
      rawOutputContents: request.rawInputContents,
    };
  };
  const server = new Server();
  const implementation: Partial<GRPCInferenceServiceServer> = {
    serverLive: (_call, callback) => callback(null, { live: true }),
    modelReady: (_call, callback) => callback(null, { ready: true }),
    modelInfer: (call, callback) => callback(null, echo(call.request)),
    modelStreamInfer: (call) => {
      call.on("data", (request: ModelInferRequest) => call.write({ errorMessage: "", inferResponse: echo(request) }));
      call.on("end", () => call.end());
    },
  };
  server.addService(GRPCInferenceServiceService, implementation as GRPCInferenceServiceServer);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return { server, address: `127.0.0.1:${port}`, received };
}

const forwarded = (name: string, upstream: string, tensors: string) => `
name: "${name}"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${upstream}" } }
parameters { key: "upstream_model" value { string_value: "echo" } }
${tensors}
`;

describe("request and tensor parameters, uint64 included, through a tensor model: the reference's echo", function () {
  this.timeout(30_000);
  let upstream: Awaited<ReturnType<typeof echoUpstream>>;
  let repository: TestRepository;
  let server: ServerProcess;

  before(async () => {
    upstream = await echoUpstream();
    repository = new TestRepository({
      // Declared tensors: the request is decoded, checked and re-encoded here, the reply too.
      echo: forwarded(
        "echo",
        upstream.address,
        `input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
         output [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 4 ] } ]`,
      ),
      // No tensors declared: passed through as bytes.
      echo_open: forwarded("echo_open", upstream.address, ""),
    });
    server = await startServer(["--model-repository", repository.dir]);
  });

  after(async () => {
    await server?.stop();
    repository?.remove();
    upstream?.server.forceShutdown();
  });

  const requestParameters = {
    big: uint64(UINT64_MAX),
    int_param: int64(8n),
    str_param: text("custom"),
    bool_param: flag(true),
    ratio: real(0.25),
  };
  const tensorParameters = { scale: uint64(1n << 63n), unit: text("m/s") };
  const data = Float32Array.of(1, 2, 3, 4);

  const echoRequest = (model: string, id: string): ModelInferRequest =>
    inferRequest({
      modelName: model,
      id,
      parameters: requestParameters,
      inputs: [{ name: "INPUT", datatype: "FP32", shape: [4n], parameters: tensorParameters, contents: undefined }],
      rawInputContents: [new Uint8Array(data.buffer)],
    });

  const assertEchoed = (reply: ModelInferResponse, extra: Record<string, InferParameter> = {}): void => {
    assert.deepEqual(reply.parameters, { ...requestParameters, processed: flag(true), ...extra });
    assert.equal(reply.outputs.length, 1);
    const [output] = reply.outputs;
    assert.deepEqual([output!.name, output!.datatype, output!.shape], ["INPUT", "FP32", [4n]]);
    assert.deepEqual(output!.parameters, tensorParameters, "the input tensor's parameters, on its output");
    const raw = reply.rawOutputContents[0]!;
    assert.deepEqual([...new Float32Array(new Uint8Array(raw).buffer)], [...data]);
  };

  for (const model of ["echo", "echo_open"]) {
    it(`${model}: ModelInfer passes uint64 and every other request and tensor parameter on unchanged, and echoes them back`, async () => {
      upstream.received.length = 0;
      const reply = await infer(server.client, echoRequest(model, `unary-${model}`));
      const [sent] = upstream.received;
      assert.deepEqual(sent!.parameters, requestParameters, "the upstream got the request's parameters, uint64 exact");
      assert.deepEqual(sent!.inputs[0]!.parameters, tensorParameters, "and the tensor's");
      assertEchoed(reply);
      assert.equal(reply.id, `unary-${model}`);
    });
  }

  it("echo: ModelStreamInfer echoes them the same, with the stream's final flag", async () => {
    const [reply] = await streamAll(server.client, [echoRequest("echo", "streamed")]);
    assert.equal(reply?.errorMessage, "");
    assertEchoed(reply!.inferResponse!, { triton_final_response: flag(true) });
  });
});

/**
 * The reference's echo worker as a Triton Python model: it answers with the request's
 * parameters as it read them (request.parameters(), JSON), plus processed = true, and says
 * how it read `big` (as text, which no JSON reader can round).
 */
const ECHO_PY = `import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            parameters = json.loads(request.parameters())
            answer = dict(parameters)
            answer["processed"] = True
            answer["big_as_read"] = repr(parameters.get("big"))
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT")
            output = pb_utils.Tensor("INPUT", tensor.as_numpy())
            responses.append(pb_utils.InferenceResponse(output_tensors=[output], parameters=answer))
        return responses
`;

describe("uint64 request parameters reach a Python model exact, as Triton's and the reference's workers read them", function () {
  this.timeout(60_000);
  const repository = new TestRepository();
  let server: ServerProcess;

  before(async function () {
    requireTritonPeers(this);
    repository.writeModel(
      "echo_py",
      `backend: "python"
       input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
       output [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 4 ] } ]`,
    );
    writeFileSync(repository.path("echo_py", "1", "model.py"), ECHO_PY);
    server = await startServer(["--model-repository", repository.dir, "--python", MODELS_PYTHON]);
  });

  after(async () => {
    await server?.stop();
    repository.remove();
  });

  it("reads 2^64 - 1 as 18446744073709551615, and every parameter it echoes comes back exact", async () => {
    const reply = await infer(
      server.client,
      inferRequest({
        modelName: "echo_py",
        parameters: {
          big: uint64(UINT64_MAX),
          count: uint64(7n),
          huge_int: int64(-(1n << 62n) - 1n),
          str_param: text("x"),
        },
        inputs: [{ name: "INPUT", datatype: "FP32", shape: [4n], parameters: {}, contents: undefined }],
        rawInputContents: [new Uint8Array(16)],
      }),
    );
    assert.deepEqual(reply.parameters, {
      big_as_read: text("18446744073709551615"),
      // Python ints come back as int64 parameters, as from Triton's Python backend; one
      // beyond int64's range only fits a uint64.
      big: uint64(UINT64_MAX),
      count: int64(7n),
      huge_int: int64(-(1n << 62n) - 1n),
      str_param: text("x"),
      processed: flag(true),
    });
  });
});

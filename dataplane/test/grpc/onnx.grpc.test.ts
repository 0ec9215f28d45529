import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DataType } from "../../../proto/gen/ts/model_config.js";
import { ModelInferRequest, type ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { ONNX_TEST_MODELS, oneInOneOut, raggedSumConfig } from "../fixtures/onnx-models.js";
import { addSubRequest } from "../fixtures/requests.js";
import { TestRepository } from "../fixtures/repository.js";
import { call, callError, infer, startServer, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

const MISSING_FILE = `
name: "onnx_missing"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`;

const valuesOf = (reply: ModelInferResponse, name: string): number[] => {
  const index = reply.outputs.findIndex((output) => output.name === name);
  return [...new Float32Array(new Uint8Array(reply.rawOutputContents[index]!).buffer)];
};

/** Only `platform` and `max_batch_size`: inputs and outputs come from the model file. */
const PARTIAL_BATCHED = `platform: "onnxruntime_onnx"\nmax_batch_size: 8\n`;

/** Outputs declared without batching: the inputs are filled in with their full shape. */
const PARTIAL_OUTPUTS = `
backend: "onnxruntime"
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
`;

/** Model folders with the add_sub model file and the given config.pbtxt (undefined: none). */
function addSubModels(models: Record<string, string | undefined>): (repository: TestRepository) => void {
  return (repository) => {
    for (const [name, config] of Object.entries(models)) {
      mkdirSync(repository.path(name, "1"), { recursive: true });
      copyFileSync(repository.path("add_sub_onnx", "1", "model.onnx"), repository.path(name, "1", "model.onnx"));
      if (config !== undefined) writeFileSync(repository.path(name, "config.pbtxt"), config);
    }
    mkdirSync(repository.path("onnx_garbage", "1"), { recursive: true });
    writeFileSync(repository.path("onnx_garbage", "1", "model.onnx"), "not an onnx model");
  };
}

/** Clients send [batch, 2, 2]; the model takes [batch, 4] (Triton's reshape). */
const RESHAPED_BATCHED = `
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 4 ] } },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ -1 ] } }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 4 ] } },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
`;

/** Unbatched: clients send [8], the model runs it as [2, 4] and answers [8]. */
const RESHAPED_UNBATCHED = `
platform: "onnxruntime_onnx"
max_batch_size: 0
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8 ] reshape { shape: [ 2, 4 ] } },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 8 ] reshape { shape: [ 2, 4 ] } }
]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 8 ] reshape { shape: [ 2, 4 ] } } ]
`;

/** add_sub on a GPU instance: refused at load where onnxruntime has no GPU provider. */
const GPU_INSTANCE = `${PARTIAL_BATCHED}
instance_group [ { count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_GPU } ]
`;

/** A batch_output the engine does not make: refused, naming the field. */
const BATCH_OUTPUT = `${PARTIAL_BATCHED}
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
batch_output [ { target_name: "OUTPUT0" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT0" } ]
`;

const AUTO_COMPLETE_MODELS = {
  onnx_no_config: undefined,
  onnx_partial_batched: PARTIAL_BATCHED,
  onnx_partial_outputs: PARTIAL_OUTPUTS,
};

describe("onnx engine (onnxruntime-node, in-process)", function () {
  this.timeout(20_000);
  const serving = useServer(
    { onnx_missing: MISSING_FILE },
    [],
    addSubModels({
      ...AUTO_COMPLETE_MODELS,
      onnx_reshaped: RESHAPED_BATCHED,
      onnx_reshaped_unbatched: RESHAPED_UNBATCHED,
      onnx_gpu: GPU_INSTANCE,
      onnx_batch_output: BATCH_OUTPUT,
    }),
  );
  let server: ServerProcess;
  before(() => ({ server } = serving));

  const request = (batch: number, outputs: string[] = []) =>
    addSubRequest("add_sub_onnx", [BigInt(batch), 4n], outputs);

  it("runs the bundled add_sub_onnx model, batched", async () => {
    const reply = await infer(server.client, request(2));
    assert.deepEqual(valuesOf(reply, "OUTPUT0"), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(valuesOf(reply, "OUTPUT1"), [-1, 0, 1, 2, 3, 4, 5, 6]);
    assert.deepEqual(reply.outputs[0]?.shape, [2n, 4n]);
  });

  it("computes only the requested outputs", async () => {
    const reply = await infer(server.client, request(1, ["OUTPUT1"]));
    assert.deepEqual(
      reply.outputs.map((output) => output.name),
      ["OUTPUT1"],
    );
    assert.deepEqual(valuesOf(reply, "OUTPUT1"), [-1, 0, 1, 2]);
  });

  it("applies reshape: clients see the config's dims, the model its reshape, with or without batching", async () => {
    const batched = await infer(server.client, addSubRequest("onnx_reshaped", [2n, 2n, 2n]));
    assert.deepEqual(batched.outputs[0]?.shape, [2n, 2n, 2n]);
    assert.deepEqual(valuesOf(batched, "OUTPUT0"), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(batched.outputs[1]?.shape, [2n, 4n], "OUTPUT1 has no reshape");
    const unbatched = await infer(server.client, addSubRequest("onnx_reshaped_unbatched", [8n]));
    assert.deepEqual(unbatched.outputs[0]?.shape, [8n]);
    assert.deepEqual(valuesOf(unbatched, "OUTPUT0"), [1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("serves the bundled mlp_onnx example (dynamic_batching, an instance group)", async () => {
    const reply = await infer(
      server.client,
      ModelInferRequest.fromPartial({
        modelName: "mlp_onnx",
        inputs: [{ name: "INPUT", datatype: "FP32", shape: [3n, 64n] }],
        rawInputContents: [new Uint8Array(new Float32Array(3 * 64).fill(0.5).buffer)],
      }),
    );
    assert.deepEqual(reply.outputs[0]?.shape, [3n, 16n]);
    const rows = valuesOf(reply, "OUTPUT");
    assert.deepEqual(rows.slice(16, 32), rows.slice(0, 16), "equal rows, equal answers");
  });

  it("keeps a KIND_GPU model unavailable where onnxruntime has no GPU, saying which field and what to set", async () => {
    const { models } = await call(server.client, "repositoryIndex", { repositoryName: "", ready: false });
    const gpu = models.find((model) => model.name === "onnx_gpu");
    assert.equal(gpu?.state, "UNAVAILABLE");
    assert.match(
      gpu?.reason ?? "",
      /instance_group\[1\]\.kind: KIND_GPU needs onnxruntime's CUDA execution provider on GPU 0, which this data plane cannot use .*; set kind: KIND_CPU \(or KIND_AUTO\)/,
    );
    const refused = models.find((model) => model.name === "onnx_batch_output");
    assert.equal(refused?.state, "UNAVAILABLE");
    assert.match(refused?.reason ?? "", /batch_output\[0\]\.kind: BATCH_SCATTER_WITH_INPUT_SHAPE is not supported/);
  });

  it("never reports a model READY whose model file is missing (as Triton's load), and answers UNAVAILABLE naming the file", async () => {
    const [entry] = (await call(server.client, "repositoryIndex", { repositoryName: "", ready: false })).models.filter(
      ({ name }) => name === "onnx_missing",
    );
    assert.equal(entry?.state, "UNAVAILABLE");
    assert.match(entry?.reason ?? "", /version 1 has no model file: .*onnx_missing\/1\/model\.onnx does not exist/);
    const error = await callError(server.client, "modelInfer", {
      ...request(1),
      modelName: "onnx_missing",
      inputs: request(1).inputs.slice(0, 1),
      rawInputContents: request(1).rawInputContents.slice(0, 1),
    });
    assert.equal(error.code, status.UNAVAILABLE);
    assert.match(error.details, /not ready: version 1 has no model file: .*onnx_missing\/1\/model\.onnx/);
  });
});

describe("onnx auto-complete (config derived from the model file, as Triton)", function () {
  this.timeout(20_000);
  const serving = useServer({}, [], addSubModels(AUTO_COMPLETE_MODELS));
  let server: ServerProcess;
  before(() => ({ server } = serving));

  const configOf = async (name: string) => (await call(server.client, "modelConfig", { name, version: "" })).config!;

  it("serves a model folder with no config.pbtxt: platform, tensors, default max_batch_size 4 and a dynamic batcher", async () => {
    const config = await configOf("onnx_no_config");
    assert.equal(config.platform, "onnxruntime_onnx");
    assert.equal(config.backend, "onnxruntime");
    assert.equal(config.maxBatchSize, 4);
    assert.equal(config.schedulingChoice?.$case, "dynamicBatching");
    assert.deepEqual(
      config.input.map((input) => [input.name, input.dataType, input.dims]),
      [
        ["INPUT0", DataType.TYPE_FP32, [4n]],
        ["INPUT1", DataType.TYPE_FP32, [4n]],
      ],
    );
    assert.deepEqual(
      config.output.map((output) => output.name),
      ["OUTPUT0", "OUTPUT1"],
    );
    const metadata = await call(server.client, "modelMetadata", { name: "onnx_no_config", version: "" });
    assert.equal(metadata.platform, "onnxruntime_onnx");
    assert.deepEqual(metadata.inputs[0]?.shape, [-1n, 4n]);
    const reply = await infer(server.client, addSubRequest("onnx_no_config", [2n, 4n]));
    assert.deepEqual(valuesOf(reply, "OUTPUT0"), [1, 2, 3, 4, 5, 6, 7, 8]);
    const tooBig = await callError(server.client, "modelInfer", addSubRequest("onnx_no_config", [5n, 4n]));
    assert.equal(tooBig.code, status.INVALID_ARGUMENT);
    assert.match(tooBig.details, /batch size 5 is outside 1\.\.4/);
  });

  it("completes a partial config: keeps its max_batch_size and adds no batcher it did not ask for", async () => {
    const config = await configOf("onnx_partial_batched");
    assert.equal(config.maxBatchSize, 8);
    assert.equal(config.schedulingChoice, undefined);
    assert.deepEqual(config.input[1]?.dims, [4n]);
    const reply = await infer(server.client, addSubRequest("onnx_partial_batched", [8n, 4n], ["OUTPUT1"]));
    assert.equal(valuesOf(reply, "OUTPUT1").length, 32);
  });

  it("keeps declared tensors and fills in only the missing list, unbatched when max_batch_size is 0", async () => {
    const config = await configOf("onnx_partial_outputs");
    assert.equal(config.maxBatchSize, 0);
    assert.equal(config.platform, "onnxruntime_onnx");
    assert.deepEqual(
      config.output.map((output) => output.name),
      ["OUTPUT0"],
    );
    assert.deepEqual(config.input[0]?.dims, [-1n, 4n]);
    const reply = await infer(server.client, addSubRequest("onnx_partial_outputs", [3n, 4n]));
    assert.deepEqual(
      reply.outputs.map((output) => output.name),
      ["OUTPUT0"],
    );
  });

  it("reports a model file onnxruntime cannot read as the model's reason, and serves the rest", async () => {
    const { models } = await call(server.client, "repositoryIndex", { repositoryName: "", ready: false });
    const garbage = models.find((model) => model.name === "onnx_garbage");
    assert.equal(garbage?.state, "UNAVAILABLE");
    assert.match(garbage?.reason ?? "", /onnx_garbage\/1\/model\.onnx: cannot read the ONNX model to auto-complete/);
    assert.equal(models.find((model) => model.name === "onnx_no_config")?.state, "READY");
  });
});

describe("onnx auto-complete turned off (--disable-auto-complete-config)", function () {
  this.timeout(20_000);
  const serving = useServer({}, ["--disable-auto-complete-config"], addSubModels(AUTO_COMPLETE_MODELS));

  it("needs a config.pbtxt again, and does not fill in a partial one", async () => {
    const { client } = serving.server;
    const { models } = await call(client, "repositoryIndex", { repositoryName: "", ready: false });
    const noConfig = models.find((model) => model.name === "onnx_no_config");
    assert.equal(noConfig?.state, "UNAVAILABLE");
    assert.match(noConfig?.reason ?? "", /no config\.pbtxt/);
    const { config } = await call(client, "modelConfig", { name: "onnx_partial_batched", version: "" });
    assert.deepEqual(config?.input, []);
  });
});

describe("a ConfigMap of configs beside a volume of model files (--model-files-root)", function () {
  this.timeout(20_000);
  let repository: TestRepository;
  let server: ServerProcess;

  before(async () => {
    repository = new TestRepository({});
    const configs = repository.path("..configmap");
    const files = repository.path("..model-files");
    mkdirSync(configs);
    mkdirSync(join(files, "add-sub", "1"), { recursive: true });
    copyFileSync(repository.path("add_sub_onnx", "1", "model.onnx"), join(files, "add-sub", "1", "model.onnx"));
    // As the operator writes it: the ConfigMap key names the model; the config declares no tensors.
    writeFileSync(join(configs, "add-sub.pbtxt"), PARTIAL_BATCHED);
    writeFileSync(join(configs, "no-files.pbtxt"), PARTIAL_BATCHED);
    server = await startServer(["--model-repository", configs, "--model-files-root", files]);
  });
  after(async () => {
    await server?.stop();
    repository?.remove();
  });

  it("finds the single-file config's version folders there, auto-completes and runs the model", async () => {
    const { config } = await call(server.client, "modelConfig", { name: "add-sub", version: "" });
    assert.deepEqual(
      config?.input.map((input) => input.name),
      ["INPUT0", "INPUT1"],
    );
    const reply = await infer(server.client, addSubRequest("add-sub", [1n, 4n]));
    assert.deepEqual(valuesOf(reply, "OUTPUT0"), [1, 2, 3, 4]);
  });

  it("reports a model whose files are missing, naming the folder it looked in", async () => {
    const { models } = await call(server.client, "repositoryIndex", { repositoryName: "", ready: false });
    const missing = models.find((model) => model.name === "no-files");
    assert.equal(missing?.state, "UNAVAILABLE");
    assert.match(missing?.reason ?? "", /no-files/);
  });
});

const BATCHED_LONG = "max_queue_delay_microseconds: 5000000";
/** The example MLP, batched by the scheduler: one execution once 10 rows wait (or after a long delay). */
const MLP_JOINED = `${oneInOneOut("mlp_joined", 64, 16)}dynamic_batching { preferred_batch_size: [ 10 ] ${BATCHED_LONG} }\n`;
/** Ragged requests joined three at a time. */
const RAGGED_JOINED = `${raggedSumConfig("ragged_joined")}dynamic_batching { preferred_batch_size: [ 3 ] ${BATCHED_LONG} }\n`;

describe("onnx under the scheduler (dynamic batching over gRPC)", function () {
  this.timeout(30_000);
  const serving = useServer({}, [], (repository) => {
    for (const [name, config, file] of [
      ["mlp_joined", MLP_JOINED, repository.path("mlp_onnx", "1", "model.onnx")],
      ["ragged_joined", RAGGED_JOINED, join(ONNX_TEST_MODELS, "ragged_sum.onnx")],
    ] as const) {
      mkdirSync(repository.path(name, "1"), { recursive: true });
      copyFileSync(file, repository.path(name, "1", "model.onnx"));
      writeFileSync(repository.path(name, "config.pbtxt"), config);
    }
  });

  const fp32Request = (model: string, shape: bigint[], values: number[]): ModelInferRequest =>
    ModelInferRequest.fromPartial({
      modelName: model,
      inputs: [{ name: "INPUT", datatype: "FP32", shape }],
      rawInputContents: [new Uint8Array(Float32Array.from(values).buffer)],
    });
  const executions = async (model: string) => {
    const { modelStats } = await call(serving.server.client, "modelStatistics", { name: model, version: "" });
    return modelStats[0]!;
  };

  it("joins requests of batch sizes 1, 3, 2 and 4 into one run; each answer equals the request run alone", async () => {
    const { client } = serving.server;
    const sizes = [1, 3, 2, 4];
    const requests = sizes.map((size, index) =>
      fp32Request(
        "mlp_joined",
        [BigInt(size), 64n],
        Array.from({ length: size * 64 }, (_, at) => Math.cos(index * 100 + at)),
      ),
    );
    const before = await executions("mlp_joined");
    const joined = await Promise.all(requests.map((request) => infer(client, request)));
    const after = await executions("mlp_joined");
    assert.equal(after.executionCount - before.executionCount, 1n, "one execution");
    assert.deepEqual(
      after.batchStats.map(({ batchSize }) => batchSize),
      [10n],
    );
    for (const [index, request] of requests.entries()) {
      const alone = await infer(client, { ...request, modelName: "mlp_onnx" });
      assert.deepEqual(joined[index]!.outputs[0]?.shape, [BigInt(sizes[index]!), 16n]);
      const expected = valuesOf(alone, "OUTPUT");
      valuesOf(joined[index]!, "OUTPUT").forEach((value, at) => assert.ok(Math.abs(value - expected[at]!) < 1e-4));
    }
  });

  it("joins ragged requests whatever their lengths, the model told where each one's elements are", async () => {
    const { client } = serving.server;
    const replies = await Promise.all(
      [2, 5, 3].map((length) =>
        infer(
          client,
          fp32Request(
            "ragged_joined",
            [1n, BigInt(length)],
            Array.from({ length }, () => 2),
          ),
        ),
      ),
    );
    assert.deepEqual(
      replies.map((reply) => [valuesOf(reply, "SUM"), valuesOf(reply, "COUNT")]),
      [
        [[4], [2]],
        [[10], [5]],
        [[6], [3]],
      ],
    );
    const stats = await executions("ragged_joined");
    assert.equal(stats.executionCount, 1n);
  });
});

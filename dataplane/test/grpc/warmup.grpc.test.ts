import assert from "node:assert/strict";
import { status, type ServiceError } from "@grpc/grpc-js";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EXAMPLES, REPO_ROOT } from "../fixtures/paths.js";
import { MODELS_PYTHON, requireTritonPeers } from "../fixtures/peers.js";
import { call, callError, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * model_warmup end to end: a Python model (dataplane/test/conformance/scheduling_model.py)
 * that writes down every execute call it gets, loaded over gRPC. Its warmup runs on each of
 * its instances before it is READY; a failing one leaves it UNAVAILABLE saying why.
 */

const MODEL_PY = join(REPO_ROOT, "dataplane", "test", "conformance", "scheduling_model.py");

const config = (name: string, rest: string): string => `
name: "${name}"
backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { }
parameters { key: "log" value: { string_value: "${name}.jsonl" } }
parameters { key: "sleep_ms" value: { string_value: "50" } }
${rest}
model_warmup [
  { name: "zeros" batch_size: 2 count: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } },
  { name: "from file" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 1 ] input_data_file: "value.bin" } } }
]
`;

const MODELS: Readonly<Record<string, { readonly config: string; readonly file: Uint8Array }>> = {
  warm: {
    config: config("warm", "instance_group [ { kind: KIND_CPU count: 2 } ]"),
    file: new Uint8Array(new Float32Array([7]).buffer),
  },
  cold: {
    config: config("cold", 'parameters { key: "fail" value: { string_value: "yes" } }'),
    file: new Uint8Array(new Float32Array([7]).buffer),
  },
  // 12 bytes where the sample's [1, 1] FP32 takes 4.
  misfit: { config: config("misfit", ""), file: new Uint8Array(12) },
};

interface Call {
  readonly instance: string;
  readonly values: number[][][];
}

describe("model warmup (gRPC): the samples run on every instance before the model is READY", function () {
  this.timeout(120_000);
  let root: string;
  let server: ServerProcess;
  /** The execute calls the model has written down so far (a line being written is not one yet). */
  const calls = (model: string): Call[] => {
    const log = join(root, `${model}.jsonl`);
    if (!existsSync(log)) return [];
    const lines = readFileSync(log, "utf8").split("\n");
    return lines.slice(0, -1).map((line) => JSON.parse(line) as Call);
  };
  /** Loads a model whose load must fail INVALID_ARGUMENT (as Triton's); the error. */
  const refusedLoad = async (modelName: string): Promise<ServiceError> => {
    const error = await callError(server.client, "repositoryModelLoad", {
      repositoryName: "",
      modelName,
      parameters: {},
    });
    assert.equal(error.code, status.INVALID_ARGUMENT, error.details);
    return error;
  };
  const ready = async (name: string): Promise<boolean> =>
    (await call(server.client, "modelReady", { name, version: "" })).ready;

  before(async function () {
    requireTritonPeers(this);
    root = mkdtempSync(join(tmpdir(), "dynamo-kserve-warmup-"));
    for (const [name, model] of Object.entries(MODELS)) {
      const folder = join(root, "repository", name);
      mkdirSync(join(folder, "1"), { recursive: true });
      mkdirSync(join(folder, "warmup"));
      writeFileSync(join(folder, "config.pbtxt"), model.config);
      writeFileSync(join(folder, "warmup", "value.bin"), model.file);
      copyFileSync(MODEL_PY, join(folder, "1", "model.py"));
    }
    server = await startServer([
      ...["--model-repository", join(root, "repository"), "--python", MODELS_PYTHON],
      ...["--model-control-mode", "explicit"],
    ]);
  });
  after(async () => {
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("is READY only once every sample ran count times on each instance, with zero and file data", async () => {
    const loading = call(server.client, "repositoryModelLoad", {
      repositoryName: "",
      modelName: "warm",
      parameters: {},
    });
    const seenBeforeReady: number[] = [];
    while (!(await ready("warm"))) {
      seenBeforeReady.push(calls("warm").length);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // The first moment it is READY, every warmup call has been made.
    const made = calls("warm");
    await loading;
    const instances = [...new Set(made.map((entry) => entry.instance))].sort();
    assert.equal(instances.length, 2, JSON.stringify(made));
    for (const instance of instances) {
      assert.deepEqual(
        made.filter((entry) => entry.instance === instance).map((entry) => entry.values),
        // zeros: twice one execute call of 2 requests of [1, 1]; from file: once, the value 7.
        [[[[0]], [[0]]], [[[0]], [[0]]], [[[7]]]],
        instance,
      );
    }
    assert.ok(seenBeforeReady.length > 0, "the model was not READY while it loaded");
    // Counted as Triton counts them: per instance 5 requests in 3 executions (2 of 2, 1 of 1).
    const { modelStats } = await call(server.client, "modelStatistics", { name: "warm", version: "" });
    const stats = modelStats[0]!;
    assert.deepEqual([stats.inferenceCount, stats.executionCount], [10n, 6n]);
    assert.deepEqual(
      stats.batchStats.map((batch) => [batch.batchSize, batch.computeInfer?.count]),
      [
        [1n, 2n],
        [2n, 4n],
      ],
    );
  });

  it("a failing warmup leaves the model UNAVAILABLE, the load error and the index naming the sample", async () => {
    const error = await refusedLoad("cold");
    assert.equal(
      error.details,
      "load failed for model 'cold': model_warmup 'zeros': failed on instance 0 of version 1: this model fails",
    );
    assert.equal(await ready("cold"), false);
    const { models } = await call(server.client, "repositoryIndex", { repositoryName: "", ready: false });
    const entry = models.find((model) => model.name === "cold");
    assert.equal(entry?.state, "UNAVAILABLE");
    assert.equal(entry?.reason, "model_warmup 'zeros': failed on instance 0 of version 1: this model fails");
    assert.equal(calls("cold").length, 1, "the first failing run ends the warmup");
  });

  it("a warmup data file that does not fit the sample's input fails the load before any run", async () => {
    const error = await refusedLoad("misfit");
    assert.match(
      error.details,
      /model_warmup 'from file': input 'INPUT0': input_data_file 'value.bin': .*raw data is 12 bytes, but shape \[1,1\] of FP32 needs 4/,
    );
    assert.deepEqual(calls("misfit"), []);
  });
});

describe("model warmup (gRPC): an ONNX model warms each of its sessions with batched runs", function () {
  this.timeout(120_000);
  let root: string;
  let server: ServerProcess | undefined;
  after(async () => {
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("runs a batch of batch_size requests on each instance as one execution, before READY", async () => {
    root = mkdtempSync(join(tmpdir(), "dynamo-kserve-warmup-onnx-"));
    const folder = join(root, "mlp_onnx");
    cpSync(join(EXAMPLES, "mlp_onnx"), folder, { recursive: true });
    const config = readFileSync(join(folder, "config.pbtxt"), "utf8").replace(
      /instance_group \[[^\]]*\]/,
      "instance_group [ { count: 2 kind: KIND_CPU } ]",
    );
    writeFileSync(
      join(folder, "config.pbtxt"),
      `${config}\nmodel_warmup [ { name: "random" batch_size: 4 count: 2 inputs { key: "INPUT" value: { data_type: TYPE_FP32 dims: [ 64 ] random_data: true } } } ]\n`,
    );
    server = await startServer(["--model-repository", root, "--model-control-mode", "none"]);
    const { ready } = await call(server.client, "modelReady", { name: "mlp_onnx", version: "" });
    assert.equal(ready, true);
    // 2 sessions x 2 runs, each one execution of 4 requests of batch 1.
    const stats = (await call(server.client, "modelStatistics", { name: "mlp_onnx", version: "" })).modelStats[0]!;
    assert.deepEqual([stats.inferenceCount, stats.executionCount], [16n, 4n]);
    assert.deepEqual(
      stats.batchStats.map((batch) => [batch.batchSize, batch.computeInfer?.count]),
      [[4n, 4n]],
    );
  });
});

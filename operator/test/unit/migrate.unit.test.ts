import assert from "node:assert/strict";
import { InvalidArgumentError } from "commander";
import { parseModelFiles, summaryTable } from "../../../cli/migrate.js";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kubernetesName, migratedObjects } from "../../src/migrate/manifests.js";
import { tritonRepositoryCorpus } from "../fixtures/triton-repository.js";
import { planMigration } from "../../src/migrate/plan.js";
import { ModelInstanceGroup_Kind } from "../../../proto/gen/ts/model_config.js";

describe("migrate helpers", () => {
  it("makes Triton model names DNS labels", () => {
    assert.equal(kubernetesName("densenet_onnx"), "densenet-onnx");
    assert.equal(kubernetesName("ResNet50.v1"), "resnet50-v1");
    assert.equal(kubernetesName("__"), "model");
    assert.equal(kubernetesName("m".repeat(80)).length, 63);
  });

  it("reads --model-files as configmap, pvc:<claim> or a repository in object storage, and names what it expected", () => {
    assert.deepEqual(parseModelFiles("configmap"), { kind: "configMap" });
    assert.deepEqual(parseModelFiles("pvc:triton-repo"), { kind: "persistentVolumeClaim", claimName: "triton-repo" });
    assert.deepEqual(parseModelFiles("s3://127.0.0.1:8333/models/triton/"), {
      kind: "storage",
      uri: "s3://127.0.0.1:8333/models/triton",
    });
    assert.deepEqual(parseModelFiles("as://account1/models"), { kind: "storage", uri: "as://account1/models" });
    assert.throws(() => parseModelFiles("pvc:Bad_Name"), InvalidArgumentError);
    assert.throws(() => parseModelFiles("gs://bucket/a/../b"), /'\.\.' segment/);
    assert.throws(
      () => parseModelFiles("http://bucket"),
      /expected configmap, pvc:<claim name> or s3:\/\/, gs:\/\/, as:\/\/.*got 'http:\/\/bucket'/,
    );
  });

  it("points each model that reads files at its folder in the bucket, with the Secret, copying nothing", async () => {
    const repository = tritonRepositoryCorpus();
    try {
      const source = { kind: "storage" as const, uri: "s3://minio.storage:9000/models/triton", secretName: "bucket" };
      const plans = await planMigration(repository, { modelFiles: source, tritonEndpoint: "triton:8001" });
      const byName = (name: string) => {
        const plan = plans.find((candidate) => candidate.model === name);
        assert.ok(plan?.ok, plan?.ok === false ? plan.error : `no ${name}`);
        return plan;
      };
      const onnx = byName("add_sub_versions");
      assert.equal(onnx.modelFiles?.files, undefined);
      assert.ok(onnx.notes.includes("files from s3://minio.storage:9000/models/triton/add_sub_versions/"));
      const objects = migratedObjects(onnx, "ml", source);
      assert.deepEqual(
        objects.map((object) => object.kind),
        ["ConfigMap", "DynamoKserveModel"],
      );
      const model = objects[1] as Extract<(typeof objects)[number], { kind: "DynamoKserveModel" }>;
      assert.deepEqual(model.spec.modelFiles, {
        storageUri: "s3://minio.storage:9000/models/triton/add_sub_versions",
      });
      assert.deepEqual(model.spec.storage, { secretName: "bucket" });
      // A forwarded model reads no files: neither a location nor the Secret.
      const forwarded = migratedObjects(byName("simple"), "ml", source)[1] as typeof model;
      assert.equal(forwarded.spec.modelFiles, undefined);
      assert.equal(forwarded.spec.storage, undefined);
    } finally {
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("ships an ONNX model's dynamic batching as it is, and its KIND_GPU instances as KIND_CPU ones, saying so", async () => {
    const repository = tritonRepositoryCorpus();
    try {
      const plans = await planMigration(repository, {
        modelFiles: { kind: "persistentVolumeClaim", claimName: "triton-repo" },
        tritonEndpoint: "triton:8001",
      });
      const densenet = plans.find((plan) => plan.model === "densenet_onnx");
      assert.ok(densenet?.ok);
      assert.deepEqual(densenet.notes.slice(0, 2), [
        "instance_group KIND_GPU set to KIND_CPU: the image's onnxruntime has no GPU provider",
        "label_filename not applied: outputs are raw tensors",
      ]);
      assert.equal(densenet.config.schedulingChoice?.$case, "dynamicBatching");
      assert.deepEqual(
        densenet.config.instanceGroup.map(({ kind, count, gpus }) => ({ kind, count, gpus })),
        [{ kind: ModelInstanceGroup_Kind.KIND_CPU, count: 1, gpus: [] }],
      );
    } finally {
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("runs an ensemble here when its steps run here, and forwards it with a step that must be", async () => {
    const repository = tritonRepositoryCorpus();
    try {
      const plan = async (forwardPython: boolean) =>
        (
          await planMigration(repository, {
            modelFiles: { kind: "configMap" },
            tritonEndpoint: "triton:8001",
            forwardPython,
          })
        ).find((candidate) => candidate.model === "ensemble_add_sub");
      const local = await plan(false);
      assert.ok(local?.ok);
      assert.equal(local.engine, "ensemble");
      assert.equal(local.config.parameters["engine"], undefined);
      const forwarded = await plan(true);
      assert.ok(forwarded?.ok);
      assert.equal(forwarded.engine, "kserve-grpc");
      assert.deepEqual(forwarded.notes.slice(0, 2), [
        "its step model 'add_sub_python' is forwarded: --forward-python forwards every Python-backend model",
        "forwarded to triton:8001",
      ]);
    } finally {
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("puts why a model is forwarded first in its notes: the platform, or the feature the engine lacks", async () => {
    const repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-reasons-"));
    try {
      const sequence = (state: string) => `backend: "python"
max_batch_size: 2
sequence_batching {
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
  ${state}
}
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
`;
      const models: Record<string, string> = {
        stateful: sequence('state [ { input_name: "S_IN" output_name: "S_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]'),
        sequences: sequence(""),
        graphdef: 'platform: "tensorflow_graphdef"\n',
      };
      for (const [model, config] of Object.entries(models)) {
        mkdirSync(join(repository, model, "1"), { recursive: true });
        writeFileSync(join(repository, model, "1", "model.py"), "# the model\n");
        writeFileSync(join(repository, model, "config.pbtxt"), config);
      }
      const plans = async (tritonEndpoint?: string) =>
        new Map(
          (
            await planMigration(repository, {
              modelFiles: { kind: "configMap" },
              ...(tritonEndpoint !== undefined ? { tritonEndpoint } : {}),
            })
          ).map((plan) => [plan.model, plan]),
        );
      const planned = await plans("triton:8001");
      const stateful = planned.get("stateful");
      assert.ok(stateful?.ok);
      assert.equal(stateful.engine, "kserve-grpc");
      assert.deepEqual(stateful.notes.slice(0, 2), [
        "sequence_batching.state: Triton's Python backend does not support implicit state (Triton's docs: the onnxruntime, TensorRT and PyTorch backends only); keep the state in the model, keyed by request.correlation_id()",
        "forwarded to triton:8001",
      ]);
      assert.ok(stateful.notes.includes("sequences stay on one upstream (sequence_id)"));
      const sequences = planned.get("sequences");
      assert.ok(sequences?.ok);
      assert.equal(sequences.engine, "python", "a sequence model without state runs in the python engine");
      const graphdef = planned.get("graphdef");
      assert.ok(graphdef?.ok);
      assert.deepEqual(graphdef.notes.slice(0, 2), [
        "'tensorflow_graphdef' does not run in this data plane",
        "forwarded to triton:8001",
      ]);
      const unplanned = (await plans()).get("stateful");
      assert.equal(unplanned?.ok, false);
      assert.match(
        unplanned.ok ? "" : unplanned.error,
        /^sequence_batching\.state: Triton's Python backend does not support implicit state .*; pass --triton-endpoint host:port/,
      );
    } finally {
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("aligns the summary table and shows failures in place of the engine", () => {
    const table = summaryTable([
      { ok: false, model: "broken", platform: "", error: "config.pbtxt:3: unknown field" },
      {
        ok: true,
        model: "simple",
        versions: ["1", "2"],
        platform: "tensorflow_graphdef",
        engine: "kserve-grpc",
        notes: ["forwarded to triton:8001"],
        config: {} as never,
      },
    ]);
    assert.equal(
      table,
      [
        "MODEL   VERSIONS  PLATFORM/BACKEND     ENGINE       NOTES",
        "broken  -         -                    FAILED       config.pbtxt:3: unknown field",
        "simple  1,2       tensorflow_graphdef  kserve-grpc  forwarded to triton:8001",
        "",
      ].join("\n"),
    );
  });

  it("ships a Python model's model.py that is a symbolic link (as in the bench's repository) with its target's content, as Triton reads it", async () => {
    const repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-links-"));
    try {
      for (const model of ["first", "second"]) {
        mkdirSync(join(repository, model, "1", "__pycache__"), { recursive: true });
        writeFileSync(join(repository, model, "config.pbtxt"), `name: "${model}"\nbackend: "python"\n`);
      }
      writeFileSync(join(repository, "first", "1", "model.py"), "# the model\n");
      symlinkSync("../../first/1/model.py", join(repository, "second", "1", "model.py"));
      symlinkSync("missing.py", join(repository, "second", "1", "dangling.py"));
      const planned = await planMigration(repository, { modelFiles: { kind: "configMap" } });
      const second = planned.find((model) => model.model === "second");
      assert.ok(second?.ok, JSON.stringify(second));
      assert.equal(second.engine, "python");
      assert.deepEqual(
        second.modelFiles?.files?.map((file) => [file.path, Buffer.from(file.content).toString()]),
        [["1/model.py", "# the model\n"]],
      );
    } finally {
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("notes a model's warmup, and the warmup/ data files a ConfigMap of model files would not carry", async () => {
    const repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-warmup-"));
    try {
      const sample = (name: string, data: string, batchSize = 1) =>
        `{ name: "${name}" batch_size: ${batchSize} inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 1 ] ${data} } } }`;
      const models: Record<string, string> = {
        zeros: sample("z", "zero_data: true"),
        files: [sample("a", 'input_data_file: "a.bin"'), sample("b", 'input_data_file: "a.bin"')].join(", "),
        skipped: sample("s", "zero_data: true", 0),
      };
      for (const [model, warmup] of Object.entries(models)) {
        mkdirSync(join(repository, model, "1"), { recursive: true });
        writeFileSync(join(repository, model, "1", "model.py"), "# the model\n");
        writeFileSync(
          join(repository, model, "config.pbtxt"),
          `backend: "python"\nmax_batch_size: 2\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]\nmodel_warmup [ ${warmup} ]\n`,
        );
      }
      const planned = await planMigration(repository, { modelFiles: { kind: "configMap" } });
      const notesOf = (name: string) => {
        const plan = planned.find((model) => model.model === name);
        assert.ok(plan?.ok, plan?.ok === false ? plan.error : `no ${name}`);
        return plan.notes.filter((note) => note.startsWith("model_warmup"));
      };
      assert.deepEqual(notesOf("zeros"), ["model_warmup: 1 sample(s) run on each instance before READY"]);
      assert.deepEqual(notesOf("files"), [
        "model_warmup: 2 sample(s) run on each instance before READY",
        "model_warmup reads warmup/a.bin: ship the model folder whole (--model-files pvc:<claim> or a bucket), a ConfigMap carries the version folders only",
      ]);
      assert.deepEqual(notesOf("skipped"), [], "a sample of batch_size 0 is skipped, as Triton skips it");
    } finally {
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("says what a Triton vLLM model needs: --vllm-url, an http(s) URL, a model.json naming the model", async () => {
    const repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-vllm-"));
    try {
      mkdirSync(join(repository, "opt", "1"), { recursive: true });
      writeFileSync(join(repository, "opt", "config.pbtxt"), 'backend: "vllm"\n');
      const plan = async (vllmUrl?: string) =>
        (await planMigration(repository, { modelFiles: { kind: "configMap" }, ...(vllmUrl ? { vllmUrl } : {}) }))[0]!;
      const error = async (vllmUrl?: string) => {
        const planned = await plan(vllmUrl);
        assert.equal(planned.ok, false);
        return planned.ok ? "" : planned.error;
      };
      assert.match(await error(), /pass --vllm-url http:\/\/<vllm>:8000\/v1/);
      assert.match(await error("vllm:8000"), /--vllm-url 'vllm:8000' is not an http\(s\) URL/);
      assert.match(await error("http://vllm:8000/v1"), /opt\/1\/model\.json: ENOENT/);
      writeFileSync(join(repository, "opt", "1", "model.json"), '{"gpu_memory_utilization": 0.5}');
      assert.match(await error("http://vllm:8000/v1"), /"model" must name the model vLLM serves/);
      writeFileSync(join(repository, "opt", "1", "model.json"), '{"model": "facebook/opt-125m"}');
      const planned = await plan("http://vllm:8000/v1");
      assert.ok(planned.ok);
      assert.equal(planned.engine, "openai");
      assert.deepEqual(planned.config.input.map((input) => input.name).slice(0, 4), [
        "text_input",
        "stream",
        "sampling_parameters",
        "exclude_input_in_output",
      ]);
      assert.equal(planned.config.parameters["upstream_model"]?.stringValue, "facebook/opt-125m");
    } finally {
      rmSync(repository, { recursive: true, force: true });
    }
  });
});

import assert from "node:assert/strict";
import { InvalidArgumentError } from "commander";
import { parseModelFiles, summaryTable } from "../../../cli/migrate.js";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kubernetesName } from "../../src/migrate/manifests.js";
import { planMigration } from "../../src/migrate/plan.js";

describe("migrate helpers", () => {
  it("makes Triton model names DNS labels", () => {
    assert.equal(kubernetesName("densenet_onnx"), "densenet-onnx");
    assert.equal(kubernetesName("ResNet50.v1"), "resnet50-v1");
    assert.equal(kubernetesName("__"), "model");
    assert.equal(kubernetesName("m".repeat(80)).length, 63);
  });

  it("reads --model-files as configmap or pvc:<claim> and names what it expected", () => {
    assert.deepEqual(parseModelFiles("configmap"), { kind: "configMap" });
    assert.deepEqual(parseModelFiles("pvc:triton-repo"), { kind: "persistentVolumeClaim", claimName: "triton-repo" });
    assert.throws(() => parseModelFiles("pvc:Bad_Name"), InvalidArgumentError);
    assert.throws(() => parseModelFiles("s3://bucket"), /expected configmap or pvc:<claim name>, got 's3:\/\/bucket'/);
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

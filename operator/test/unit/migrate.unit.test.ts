import assert from "node:assert/strict";
import { InvalidArgumentError } from "commander";
import { parseModelFiles, summaryTable } from "../../../cli/migrate.js";
import { kubernetesName } from "../../src/migrate/manifests.js";

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
});

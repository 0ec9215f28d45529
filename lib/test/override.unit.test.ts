import assert from "node:assert/strict";
import { parseText } from "../model-repository/config.js";
import { applyConfigOverride } from "../model-repository/override.js";

const SOURCE = 'RepositoryModelLoad(m).parameters["config"]';
const BASE = parseText(
  `
backend: "python"
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 100 }
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }
`,
  "config.pbtxt",
);
const apply = (json: unknown) => applyConfigOverride("m", BASE, JSON.stringify(json), SOURCE);

describe("a load request's config override (lib/model-repository/override.ts)", () => {
  it("takes what it leaves out from the repository's config, by proto or JSON field names", () => {
    for (const json of [{ max_batch_size: 2 }, { maxBatchSize: 2 }]) {
      const config = apply(json);
      assert.equal(config.maxBatchSize, 2);
      assert.equal(config.backend, "python");
      assert.deepEqual(
        config.input.map((input) => input.name),
        ["IN"],
      );
      assert.equal(config.schedulingChoice?.$case, "dynamicBatching");
    }
  });

  it("counts a field set to its default as set (max_batch_size 0 turns batching off)", () => {
    assert.equal(apply({ max_batch_size: 0 }).maxBatchSize, 0);
  });

  it("replaces the base's scheduling choice with the override's (a oneof)", () => {
    const config = apply({ sequence_batching: { max_sequence_idle_microseconds: 5 } });
    assert.equal(config.schedulingChoice?.$case, "sequenceBatching");
  });

  it("accepts the repository-only fields when they are unchanged (the whole config sent back)", () => {
    const config = apply({
      name: "m",
      backend: "python",
      parameters: { EXECUTION_ENV_PATH: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } },
      max_batch_size: 4,
    });
    assert.equal(config.maxBatchSize, 4);
  });

  it("refuses a change to a repository-only field, a parameter added or removed included, naming the field", () => {
    for (const [field, json] of [
      ["parameters", { parameters: {} }],
      ["parameters", { parameters: { EXECUTION_ENV_PATH: { string_value: "/tmp/evil.tar.gz" } } }],
      ["backend", { backend: "onnxruntime" }],
      ["default_model_filename", { default_model_filename: "../other.py" }],
      ["model_warmup", { model_warmup: [{ name: "w", inputs: { IN: { input_data_file: "../../etc/passwd" } } }] }],
    ] as const) {
      assert.throws(
        () => apply(json),
        (error: Error) => error.message.includes(`'${field}' cannot be changed by a load request`),
        field,
      );
    }
  });

  it("refuses another model's name, JSON that is not a ModelConfig, and unknown fields", () => {
    assert.throws(() => apply({ name: "other" }), /name: 'other' is not the model loaded \('m'\)/);
    assert.throws(() => applyConfigOverride("m", BASE, "[1]", SOURCE), /parameters\["config"\]/);
    assert.throws(() => apply({ max_batch_sise: 1 }), /parameters\["config"\].*max_batch_sise/);
  });
});

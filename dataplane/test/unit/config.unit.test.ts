import assert from "node:assert/strict";
import { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import {
  ConfigError,
  configFormatOf,
  parseJson,
  parseModelConfig,
  parseText,
} from "../../../lib/model-repository/config.js";
import { lineOfField, toModelSpec } from "../../../lib/model-repository/spec.js";
import { servedVersions } from "../../../lib/model-repository/versions.js";
import { checkEngine } from "../../../lib/engines/catalog.js";
import { IDENTITY_PAIR } from "../fixtures/repository.js";

const configError = (fn: () => unknown): ConfigError => {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected a ConfigError");
};

describe("model configuration parsing", () => {
  it("reads config.pbtxt with the protobuf text format", () => {
    const config = parseText(IDENTITY_PAIR, "identity_pair/config.pbtxt");
    assert.equal(config.name, "identity_pair");
    assert.equal(config.maxBatchSize, 4);
    assert.deepEqual(
      config.input.map((input) => [input.name, input.dims, input.optional]),
      [
        ["A", [2n, 3n], false],
        ["B", [-1n], true],
      ],
    );
  });

  it("accepts comments, repeated-field blocks, angle brackets and parameters", () => {
    const config = parseText(
      `# a comment
name: "m" backend: "identity"
input { name: "X" data_type: TYPE_BF16 dims: -1 }
input < name: "Y" data_type: TYPE_STRING dims: [ 1 ] >
parameters { key: "k" value { string_value: "v" } }
model_transaction_policy { decoupled: true }
version_policy: { specific: { versions: [1, 3] } }`,
      "m.pbtxt",
    );
    assert.deepEqual(
      config.input.map((input) => input.name),
      ["X", "Y"],
    );
    assert.equal(config.parameters["k"]?.stringValue, "v");
    assert.equal(config.modelTransactionPolicy?.decoupled, true);
    assert.equal(config.versionPolicy?.policyChoice?.$case, "specific");
  });

  it("names the file, line and field of an unknown field", () => {
    const error = configError(() =>
      parseText(
        'name: "m"\nbackend: "identity"\ninput [\n  {\n    name: "X"\n    dimz: [ 4 ]\n  }\n]\n',
        "m/config.pbtxt",
      ),
    );
    assert.equal(error.line, 6);
    assert.match(error.message, /^m\/config\.pbtxt:6: /);
    assert.match(error.message, /dimz/);
  });

  it("names the line of a bad enum value and of a syntax error", () => {
    const badEnum = configError(() => parseText('name: "m"\ninput { name: "X"\n data_type: TYPE_FLOAT }', "c.pbtxt"));
    assert.equal(badEnum.line, 3);
    assert.match(badEnum.message, /TYPE_FLOAT/);
    const unclosed = configError(() => parseText('name: "m"\ninput {\n  name: "X"\n', "c.pbtxt"));
    assert.match(unclosed.message, /^c\.pbtxt:\d+: /);
    const badValue = configError(() => parseText('name: "m"\nmax_batch_size: "eight"\n', "c.pbtxt"));
    assert.equal(badValue.line, 2);
    assert.match(badValue.message, /max_batch_size/);
  });

  it("reads binary ModelConfig and the JSON mapping", () => {
    const text = parseText(IDENTITY_PAIR, "text");
    const binary = parseModelConfig(ModelConfig.encode(text).finish(), "binary", "config.pb");
    assert.deepEqual(binary, text);
    const json = parseJson(
      JSON.stringify({ name: "j", backend: "identity", input: [{ name: "X", data_type: "TYPE_FP32", dims: ["4"] }] }),
      "override",
    );
    assert.equal(json.input[0]?.dims[0], 4n);
    assert.throws(() => parseModelConfig(Uint8Array.of(0xff, 0xff, 0xff), "binary", "bad.pb"), /bad\.pb/);
    assert.throws(() => parseJson("{ not json", "override"), /override/);
  });

  it("knows configuration file formats by extension", () => {
    assert.equal(configFormatOf("config.pbtxt"), "text");
    assert.equal(configFormatOf("model.pb"), "binary");
    assert.equal(configFormatOf("model.json"), "json");
    assert.equal(configFormatOf("README.md"), undefined);
  });
});

describe("model spec checks", () => {
  const spec = (text: string, expectedName?: string) =>
    toModelSpec(parseText(text, "c.pbtxt"), "c.pbtxt", expectedName);

  it("normalizes dims, datatypes and decoupling", () => {
    const model = spec(IDENTITY_PAIR);
    assert.deepEqual(model.inputs[0], { name: "A", datatype: "FP32", dims: [2, 3], optional: false });
    assert.equal(model.inputs[1]?.datatype, "INT64");
    assert.equal(model.decoupled, false);
    assert.equal(model.platform, "identity");
  });

  it("takes the folder name when the config has none, and rejects a different one", () => {
    assert.equal(spec('backend: "identity"', "folder").name, "folder");
    assert.throws(() => spec('name: "other" backend: "identity"', "folder"), /name: 'other' does not match/);
  });

  it("rejects missing data types, bad dims and duplicate tensors, naming the field", () => {
    assert.throws(() => spec('name: "m" backend: "identity" input { name: "X" dims: 1 }'), /input\[0\] 'X'\.data_type/);
    assert.throws(
      () => spec('name: "m" backend: "identity" input { name: "X" data_type: TYPE_FP32 dims: 0 }'),
      /input\[0\] 'X'\.dims: dimension 0/,
    );
    assert.throws(
      () => spec('name: "m" backend: "identity" input { name: "X" data_type: TYPE_FP32 }'),
      /input\[0\] 'X'\.dims/,
    );
    assert.throws(
      () =>
        spec(
          'name: "m" backend: "identity" output { name: "X" data_type: TYPE_FP32 dims: 1 } output { name: "X" data_type: TYPE_FP32 dims: 1 }',
        ),
      /declared twice/,
    );
    assert.throws(() => spec('name: "m" max_batch_size: -1 backend: "x"'), /max_batch_size/);
    assert.throws(() => spec('name: "m"'), /backend/);
  });

  it("reads a decoupled model's opt-in to unary ModelInfer, and refuses it where it cannot apply", () => {
    const optIn = (value: string, decoupled = true) =>
      spec(
        `name: "m" backend: "repeat" model_transaction_policy { decoupled: ${decoupled} } parameters { key: "model_infer_gathers_responses" value { string_value: "${value}" } }`,
      );
    assert.equal(optIn("true").gathersUnaryResponses, true);
    assert.equal(optIn("false").gathersUnaryResponses, false);
    assert.equal(spec('name: "m" backend: "repeat"').gathersUnaryResponses, false);
    assert.throws(() => optIn("yes"), /model_infer_gathers_responses.*"true" or "false"/);
    assert.throws(() => optIn("true", false), /model_infer_gathers_responses.*decoupled models only/);
  });

  it("gives the line of the field it names, when it has the text", () => {
    const text = [
      'name: "m"',
      'backend: "identity"',
      "max_batch_size: -2",
      'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]',
      'output [ { name: "Y" data_type: TYPE_FP32 } ]',
    ].join("\n");
    const withText = (config: string) => toModelSpec(parseText(config, "c.pbtxt"), "c.pbtxt", undefined, config);
    assert.throws(() => withText(text), /c\.pbtxt:3: max_batch_size: must be 0 or more/);
    assert.throws(() => withText(text.replace("-2", "0")), /c\.pbtxt:5: output\[0\] 'Y'\.dims/);
    assert.equal(lineOfField("", "backend"), undefined);
  });
});

describe("version policy", () => {
  it("serves the latest version by default, or as many as asked", () => {
    assert.deepEqual(servedVersions(undefined, [1, 3, 2], "s"), ["3"]);
    assert.deepEqual(servedVersions({ policyChoice: { $case: "latest", value: { numVersions: 2 } } }, [1, 2, 3], "s"), [
      "2",
      "3",
    ]);
  });

  it("serves all or specific versions and reports missing ones", () => {
    assert.deepEqual(servedVersions({ policyChoice: { $case: "all", value: {} } }, [2, 1], "s"), ["1", "2"]);
    assert.deepEqual(servedVersions({ policyChoice: { $case: "specific", value: { versions: [1n] } } }, [1, 2], "s"), [
      "1",
    ]);
    assert.throws(
      () => servedVersions({ policyChoice: { $case: "specific", value: { versions: [7n] } } }, [1], "s"),
      /version\(s\) 7 not found/,
    );
  });

  it("serves version 1 of a model without version folders", () => {
    assert.deepEqual(servedVersions(undefined, [], "s"), ["1"]);
  });
});

describe("engine settings bounds", () => {
  const pythonSpec = (extra: string) =>
    toModelSpec(parseText(`name: "p"\nbackend: "python"\nmax_batch_size: 8\n${extra}`, "config.pbtxt"), "config.pbtxt");

  it("refuses an instance count past the python engine's bound before building anything (2^31-1 exhausted memory)", () => {
    for (const groups of [
      "instance_group [ { count: 2147483647 } ]",
      "instance_group [ { count: 40 gpus: [ 0, 1 ] } ]",
      "instance_group [ { count: 60 }, { count: 60 } ]",
    ]) {
      const error = configError(() => checkEngine(pythonSpec(groups), "config.pbtxt"));
      assert.match(error.message, /instance_group: \d+ instances; a model runs at most 64/);
    }
    checkEngine(pythonSpec("instance_group [ { count: 64 } ]"), "config.pbtxt");
  });

  it("refuses a dynamic batcher's queue delay longer than a day (the Python process overflowed on every batch)", () => {
    const error = configError(() =>
      checkEngine(
        pythonSpec("dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }"),
        "config.pbtxt",
      ),
    );
    assert.match(error.message, /dynamic_batching\.max_queue_delay_microseconds: .* at most 86400000000/);
  });

  it("refuses batch_input and batch_output on a scheduled engine that does not make them, and forwards them", () => {
    const batchInput =
      'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]\n' +
      'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 source_input: "X" } ]';
    const batchOutput = 'batch_output [ { target_name: "Y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X" } ]';
    for (const [extra, field] of [
      [batchInput, "batch_input"],
      [batchOutput, "batch_output"],
    ] as const) {
      const error = configError(() => checkEngine(pythonSpec(extra), "config.pbtxt"));
      assert.match(error.message, new RegExp(`${field}: the python engine does not make batch tensors`));
      const forwarded = pythonSpec(
        `${extra}\nparameters { key: "engine" value: { string_value: "kserve-grpc" } }\nparameters { key: "upstream" value: { string_value: "triton:8001" } }`,
      );
      checkEngine(forwarded, "config.pbtxt");
    }
  });
});

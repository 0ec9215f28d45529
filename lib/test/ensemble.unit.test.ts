import assert from "node:assert/strict";
import { decoupledEnsembles, ensembleCycles } from "../engines/catalog.js";
import { checkEnsembleSteps, ensembleEngine, type EnsembleSettings, type StepModel } from "../engines/ensemble.js";
import { completeEnsembles } from "../model-repository/candidates.js";
import { ConfigError, parseText } from "../model-repository/config.js";
import type { ModelSource } from "../model-repository/sources.js";
import { toModelSpec, type TensorSpec } from "../model-repository/spec.js";
import type { ModelConfig } from "../../proto/gen/ts/model_config.js";

/** A step of the ensemble in config.pbtxt: its model, and its maps as [model tensor, ensemble tensor] pairs. */
function step(model: string, inputs: [string, string][], outputs: [string, string][], extra = ""): string {
  const maps = [
    ...inputs.map(([key, value]) => `input_map { key: "${key}" value: "${value}" }`),
    ...outputs.map(([key, value]) => `output_map { key: "${key}" value: "${value}" }`),
  ];
  return `{ model_name: "${model}" model_version: -1 ${extra} ${maps.join(" ")} }`;
}

const FP32 = (name: string): string => `{ name: "${name}" data_type: TYPE_FP32 dims: [ 4 ] }`;

/** An ensemble `e` with FP32 [4] inputs and outputs and these steps (and `extra` config text). */
function ensembleConfig(inputs: string[], outputs: string[], steps: string[], extra = ""): string {
  return [
    'name: "e"',
    'platform: "ensemble"',
    `input [ ${inputs.map(FP32).join(", ")} ]`,
    `output [ ${outputs.map(FP32).join(", ")} ]`,
    extra,
    `ensemble_scheduling { step [ ${steps.join(", ")} ] }`,
  ].join("\n");
}

const settingsOf = (text: string): EnsembleSettings =>
  ensembleEngine.settings(toModelSpec(parseText(text, "e/config.pbtxt"), "e/config.pbtxt"), "e/config.pbtxt");

function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
    return error.message;
  }
  assert.fail("expected a ConfigError");
}

/** Two parallel branches (a and b, both from the inputs) joined by c. */
const DIAMOND = ensembleConfig(
  ["X", "Y"],
  ["Z"],
  [
    step(
      "c",
      [
        ["A", "TA"],
        ["B", "TB"],
      ],
      [["OUT", "Z"]],
    ),
    step("a", [["IN", "X"]], [["OUT", "TA"]]),
    step("b", [["IN", "Y"]], [["OUT", "TB"]]),
  ],
);

describe("ensemble configs: the step graph checked at load (as Triton's ValidateEnsembleSchedulingConfig)", () => {
  it("orders the steps so each runs after the steps feeding it, whatever the config's order", () => {
    const settings = settingsOf(DIAMOND);
    assert.deepEqual(settings.order, [1, 2, 0]);
    assert.deepEqual(
      [...settings.producer],
      [
        ["Z", 0],
        ["TA", 1],
        ["TB", 2],
      ],
    );
    assert.equal(settings.steps[0]!.modelVersion, "");
  });

  const refused: [string, string, RegExp][] = [
    ["no steps", ensembleConfig(["X"], ["Z"], []), /ensemble_scheduling\.step: an ensemble needs at least one step/],
    [
      "no ensemble_scheduling",
      'name: "e"\nplatform: "ensemble"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "Z" data_type: TYPE_FP32 dims: [ 4 ] } ]',
      /ensemble_scheduling: an ensemble lists its steps/,
    ],
    [
      "sequence_batching (Triton refuses it too: the steps schedule)",
      'name: "e"\nplatform: "ensemble"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "Z" data_type: TYPE_FP32 dims: [ 4 ] } ]\nsequence_batching { }',
      /sequence_batching: an ensemble is scheduled by its step models: set sequence_batching in their configs/,
    ],
    [
      "a step without model_name",
      ensembleConfig(["X"], ["Z"], [`{ input_map { key: "IN" value: "X" } output_map { key: "OUT" value: "Z" } }`]),
      /ensemble_scheduling\.step\[0\]\.model_name: name the model/,
    ],
    [
      "a step without input_map",
      ensembleConfig(["X"], ["Z"], [step("m", [], [["OUT", "Z"]])]),
      /ensemble_scheduling\.step\[0\]\.input_map: map the step model's inputs/,
    ],
    [
      "a step without output_map",
      ensembleConfig(["X"], ["Z"], [step("m", [["IN", "X"]], [])]),
      /ensemble_scheduling\.step\[0\]\.output_map: map the step model's outputs/,
    ],
    [
      "model_version -2",
      ensembleConfig(["X"], ["Z"], [step("m", [["IN", "X"]], [["OUT", "Z"]]).replace("-1", "-2")]),
      /step\[0\]\.model_version: -2 is not a version: -1 \(the latest\) or a version number/,
    ],
    [
      "a step running the ensemble itself",
      ensembleConfig(["X"], ["Z"], [step("e", [["IN", "X"]], [["OUT", "Z"]])]),
      /step\[0\]\.model_name: a step cannot run the ensemble itself/,
    ],
    [
      "an ensemble input no step uses",
      ensembleConfig(["X", "UNUSED"], ["Z"], [step("m", [["IN", "X"]], [["OUT", "Z"]])]),
      /input 'UNUSED': no step uses this ensemble input/,
    ],
    [
      "an ensemble output no step produces",
      ensembleConfig(["X"], ["Z", "W"], [step("m", [["IN", "X"]], [["OUT", "Z"]])]),
      /output 'W': no step produces this ensemble output/,
    ],
    [
      "a tensor two steps produce",
      ensembleConfig(
        ["X"],
        ["Z"],
        [step("m", [["IN", "X"]], [["OUT", "Z"]]), step("n", [["IN", "X"]], [["OUT", "Z"]])],
      ),
      /step\[1\]\.output_map\["OUT"\]: ensemble tensor 'Z' is already produced by step 0 \(model 'm'\)/,
    ],
    [
      "a step producing an ensemble input",
      ensembleConfig(
        ["X"],
        ["Z"],
        [
          step(
            "m",
            [["IN", "X"]],
            [
              ["OUT", "Z"],
              ["OUT2", "X"],
            ],
          ),
        ],
      ),
      /step\[0\]\.output_map\["OUT2"\]: 'X' is an ensemble input; a step cannot produce it/,
    ],
    [
      "a step input nothing feeds",
      ensembleConfig(
        ["X"],
        ["Z"],
        [
          step(
            "m",
            [
              ["IN", "X"],
              ["IN2", "NOWHERE"],
            ],
            [["OUT", "Z"]],
          ),
        ],
      ),
      /step\[0\]\.input_map\["IN2"\]: ensemble tensor 'NOWHERE' is neither an ensemble input nor produced by a step/,
    ],
    [
      "a step output nothing uses",
      ensembleConfig(
        ["X"],
        ["Z"],
        [
          step(
            "m",
            [["IN", "X"]],
            [
              ["OUT", "Z"],
              ["OUT2", "LOST"],
            ],
          ),
        ],
      ),
      /step\[0\]\.output_map: ensemble tensor 'LOST' is neither an ensemble output nor used by a step/,
    ],
    [
      "a cycle",
      ensembleConfig(
        ["X"],
        ["Z"],
        [
          step("m", [["IN", "X"]], [["OUT", "Z"]]),
          step(
            "p",
            [
              ["IN", "X"],
              ["IN2", "Q"],
            ],
            [["OUT", "P"]],
          ),
          step("q", [["IN", "P"]], [["OUT", "Q"]]),
        ],
      ),
      /ensemble_scheduling\.step: the steps feed each other in a cycle: step (1 \(model 'p'\) -> step 2 \(model 'q'\) -> step 1|2 \(model 'q'\) -> step 1 \(model 'p'\) -> step 2) /,
    ],
    [
      "an instance_group",
      ensembleConfig(["X"], ["Z"], [step("m", [["IN", "X"]], [["OUT", "Z"]])], "instance_group [ { count: 2 } ]"),
      /instance_group: an ensemble has no instances/,
    ],
  ];
  for (const [what, text, expected] of refused) {
    it(`refuses ${what}, naming the field`, () => {
      assert.match(
        configError(() => settingsOf(text)),
        expected,
      );
    });
  }
});

const tensor = (name: string, datatype: TensorSpec["datatype"] = "FP32", optional = false): TensorSpec => ({
  name,
  datatype,
  dims: [4],
  optional,
});
const model = (name: string, fields: Partial<StepModel> = {}): StepModel => ({
  name,
  maxBatchSize: 0,
  inputs: [tensor("IN")],
  outputs: [tensor("OUT")],
  decoupled: false,
  ...fields,
});

describe("ensemble steps checked against their models when the ensemble starts", () => {
  const diamond = settingsOf(DIAMOND);
  const models = (c: Partial<StepModel> = {}, a: Partial<StepModel> = {}): StepModel[] => [
    model("c", { inputs: [tensor("A"), tensor("B")], ...c }),
    model("a", a),
    model("b"),
  ];

  it("accepts models whose tensors match the maps", () => {
    assert.deepEqual(checkEnsembleSteps(diamond, models(), "ensemble 'e'").decoupled, false);
  });

  it("names the step, the tensor and both datatypes when they differ", () => {
    const message = configError(() =>
      checkEnsembleSteps(diamond, models({}, { outputs: [tensor("OUT", "INT32")] }), "e"),
    );
    assert.match(
      message,
      /step\[0\]\.input_map\["A"\]: step 0 \(model 'c'\): input 'A' is FP32 but ensemble tensor 'TA' is INT32 \(output 'OUT' of step 1 \(model 'a'\)\)/,
    );
  });

  it("refuses shapes that differ, as Triton compares them (-1 fits any size; the batch dimension counted)", () => {
    const message = configError(() =>
      checkEnsembleSteps(diamond, models({ inputs: [{ ...tensor("A"), dims: [2, 2] }, tensor("B")] }), "e"),
    );
    assert.match(
      message,
      /step\[0\]\.input_map\["A"\]: step 0 \(model 'c'\): input 'A' has shape \[2, 2\] but ensemble tensor 'TA' is \[4\] \(output 'OUT' of step 1 \(model 'a'\)\)/,
    );
    // A batching step's [4] is a non-batching one's [-1, 4], and -1 fits any size.
    checkEnsembleSteps(
      diamond,
      models({ inputs: [{ ...tensor("A"), dims: [-1, 4] }, tensor("B")] }, { maxBatchSize: 8 }),
      "e",
    );
    checkEnsembleSteps(diamond, models({ inputs: [{ ...tensor("A"), dims: [-1] }, tensor("B")] }), "e");
  });

  it("refuses an ensemble output whose producer's datatype is not the declared one", () => {
    const message = configError(() => checkEnsembleSteps(diamond, models({ outputs: [tensor("OUT", "FP64")] }), "e"));
    assert.match(
      message,
      /output 'Z': the ensemble's output is FP32 but what produces it is FP64 \(output 'OUT' of step 0 \(model 'c'\)\)/,
    );
  });

  it("refuses a required input the step does not map, and a mapped tensor the model lacks", () => {
    assert.match(
      configError(() => checkEnsembleSteps(diamond, models({ inputs: [tensor("A"), tensor("B"), tensor("C")] }), "e")),
      /step\[0\]\.input_map: step 0 \(model 'c'\): the model's input 'C' is not mapped/,
    );
    assert.match(
      configError(() => checkEnsembleSteps(diamond, models({}, { outputs: [tensor("RESULT")] }), "e")),
      /step\[1\]\.output_map\["OUT"\]: step 1 \(model 'a'\) has no output 'OUT' \(it has: RESULT\)/,
    );
    // An optional input may be left out.
    checkEnsembleSteps(diamond, models({ inputs: [tensor("A"), tensor("B"), tensor("C", "FP32", true)] }), "e");
  });

  it("refuses a step that joins a decoupled step's responses with the request's tensors", () => {
    const decoupled = settingsOf(
      DIAMOND.replace('platform: "ensemble"', 'platform: "ensemble"\nmodel_transaction_policy { decoupled: true }'),
    );
    const message = configError(() => checkEnsembleSteps(decoupled, models({}, { decoupled: true }), "e"));
    assert.match(
      message,
      /step 0 \(model 'c'\) joins 'TA' from the responses of step 1 \(model 'a'\) with 'TB' from the request/,
    );
  });

  it("streams when a step is decoupled, and asks the ensemble to say so", () => {
    const chain = ensembleConfig(
      ["X"],
      ["Z"],
      [step("a", [["IN", "X"]], [["OUT", "T"]]), step("b", [["IN", "T"]], [["OUT", "Z"]])],
    );
    const steps = [model("a", { decoupled: true }), model("b")];
    assert.match(
      configError(() => checkEnsembleSteps(settingsOf(chain), steps, "e")),
      /model_transaction_policy: step 0 \(model 'a'\) is decoupled, so the ensemble streams/,
    );
    const marked = chain.replace(
      'platform: "ensemble"',
      'platform: "ensemble"\nmodel_transaction_policy { decoupled: true }',
    );
    assert.equal(checkEnsembleSteps(settingsOf(marked), steps, "e").decoupled, true);
  });

  it("refuses a step model that batches less than the ensemble", () => {
    const batched = settingsOf(DIAMOND.replace('platform: "ensemble"', 'platform: "ensemble"\nmax_batch_size: 8'));
    assert.match(
      configError(() => checkEnsembleSteps(batched, models({ maxBatchSize: 4 }), "e")),
      /step 0 \(model 'c'\) batches at most 4, less than the ensemble's max_batch_size 8/,
    );
  });
});

describe("a repository's ensembles: decoupled with their steps, refused in cycles", () => {
  const config = (text: string): ModelConfig => parseText(text, "config.pbtxt");
  const onnx = config('name: "m"\nplatform: "onnxruntime_onnx"');
  const streaming = config('name: "s"\nbackend: "python"\nmodel_transaction_policy { decoupled: true }');
  const ensembleOf = (...models: string[]): ModelConfig =>
    config(
      ensembleConfig(
        ["X"],
        ["Z"],
        models.map((name, index) => step(name, [["IN", "X"]], [["OUT", index === 0 ? "Z" : `T${index}`]])),
      ),
    );

  it("marks an ensemble with a decoupled step decoupled, as Triton does", () => {
    const marked = decoupledEnsembles(
      new Map([
        ["s", streaming],
        ["m", onnx],
        ["streams", ensembleOf("s")],
        ["outer", ensembleOf("streams")],
        ["unary", ensembleOf("m")],
      ]),
    );
    assert.deepEqual([...marked.keys()], ["streams", "outer"]);
    assert.equal(marked.get("outer")!.modelTransactionPolicy?.decoupled, true);
  });

  it("refuses ensembles that run each other in a cycle, naming it (each would wait for the other to load)", () => {
    const cycles = ensembleCycles(
      new Map([
        ["m", onnx],
        ["a", ensembleOf("b")],
        ["b", ensembleOf("c", "m")],
        ["c", ensembleOf("a")],
        ["fine", ensembleOf("a")],
      ]),
    );
    assert.deepEqual(
      [...cycles],
      [
        ["a", ["a", "b", "c", "a"]],
        ["b", ["b", "c", "a", "b"]],
        ["c", ["c", "a", "b", "c"]],
      ],
    );
    const source = { path: "a/config.pbtxt" } as ModelSource;
    const [refused] = completeEnsembles(
      [
        { name: "a", source, config: ensembleOf("b") },
        { name: "b", source, config: ensembleOf("a") },
      ],
      undefined,
    );
    assert.ok(refused!.config instanceof ConfigError);
    assert.match(
      refused!.config.message,
      /^a\/config\.pbtxt: ensemble_scheduling\.step: ensembles run each other in a cycle: a -> b -> a$/,
    );
  });
});

import assert from "node:assert/strict";
import { checkEngine } from "../engines/catalog.js";
import { ConfigError, parseText, UnsupportedFeature } from "../model-repository/config.js";
import { MAX_SEQUENCE_SLOTS, type SequenceBatching } from "../model-repository/sequence-batching.js";
import { toModelSpec, type ModelSpec } from "../model-repository/spec.js";

/**
 * sequence_batching as Triton checks and normalizes it (model_config_utils.cc): each error in
 * Triton's words, after the file, line and field ours name.
 */

const SOURCE = "seq/config.pbtxt";

/** A python model `seq` (max_batch_size 4 unless `head` says otherwise) with `sequence_batching { body }`. */
const configText = (body: string, head = "max_batch_size: 4"): string =>
  [
    'name: "seq"',
    'backend: "python"',
    head,
    `sequence_batching {\n${body}\n}`,
    'input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]',
    'output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]',
  ].join("\n");

const specOf = (text: string): ModelSpec => toModelSpec(parseText(text, SOURCE), SOURCE, "seq", text);

const sequencesOf = (body: string, head?: string): SequenceBatching => {
  const batching = specOf(configText(body, head)).scheduling.sequenceBatching;
  assert.ok(batching, "the spec has the sequence batching");
  return batching;
};

/** The line `sequence_batching {` is on in configText. */
const SEQUENCE_LINE = 4;

/** The ConfigError the config gives, asserted to name the file, the line and `field`. */
function refused(text: string, field: string, line = SEQUENCE_LINE): string {
  try {
    specOf(text);
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    assert.ok(!(error instanceof UnsupportedFeature), "a config Triton refuses too is not an unsupported feature");
    const prefix = `${SOURCE}:${line}: ${field}: `;
    assert.ok(error.message.startsWith(prefix), `'${error.message}' starts with '${prefix}'`);
    return error.message.slice(prefix.length);
  }
  assert.fail("the config was accepted");
}

const control = (name: string, kind: string, values = "int32_false_true: [ 0, 1 ]"): string =>
  `control_input [ { name: "${name}" control [ { kind: ${kind} ${values} } ] } ]`;

describe("sequence_batching: Triton's checks and defaults", () => {
  it("fills in Triton's defaults: direct, idle 1 s, one slot per batch row, no controls", () => {
    const batching = sequencesOf("");
    assert.deepEqual(batching, {
      strategy: { kind: "direct", maxQueueDelayUs: 0, minimumSlotUtilization: 0 },
      maxSequenceIdleUs: 1_000_000,
      slotsPerInstance: 4,
      controls: {},
      hasState: false,
      iterative: false,
    });
    assert.equal(sequencesOf("", "max_batch_size: 0").slotsPerInstance, 1, "a model that does not batch has one slot");
    assert.equal(specOf(configText("")).scheduling.dynamicBatching, undefined);
  });

  it("reads the direct strategy, the idle timeout, state and iterative_sequence as given", () => {
    const batching = sequencesOf(
      [
        "max_sequence_idle_microseconds: 5000000",
        "direct { max_queue_delay_microseconds: 100 minimum_slot_utilization: 0.5 }",
        'state [ { input_name: "IN_STATE" output_name: "OUT_STATE" data_type: TYPE_INT32 dims: [ 1 ] } ]',
        "iterative_sequence: true",
      ].join("\n"),
    );
    assert.deepEqual(batching.strategy, { kind: "direct", maxQueueDelayUs: 100, minimumSlotUtilization: 0.5 });
    assert.equal(batching.maxSequenceIdleUs, 5_000_000);
    assert.equal(batching.hasState, true);
    assert.equal(batching.iterative, true);
  });

  it("oldest: preferred sizes sorted, [max_batch_size] when none; max_candidate_sequences slots per instance", () => {
    const given = sequencesOf(
      "oldest { max_candidate_sequences: 6 preferred_batch_size: [ 4, 2, 2 ] max_queue_delay_microseconds: 7 preserve_ordering: true }",
    );
    assert.deepEqual(given.strategy, {
      kind: "oldest",
      maxCandidateSequences: 6,
      preferredBatchSizes: [2, 4],
      maxQueueDelayUs: 7,
      preserveOrdering: true,
    });
    assert.equal(given.slotsPerInstance, 6);
    const defaults = sequencesOf("oldest { }");
    assert.deepEqual(defaults.strategy.kind === "oldest" && defaults.strategy.preferredBatchSizes, [4]);
    assert.equal(defaults.slotsPerInstance, 4, "max_candidate_sequences 0: max_batch_size slots");
    const unbatched = sequencesOf("oldest { }", "max_batch_size: 0");
    assert.deepEqual(unbatched.strategy.kind === "oldest" && unbatched.strategy.preferredBatchSizes, []);
  });

  it("reads each control: its tensor, datatype and false/true values", () => {
    const batching = sequencesOf(
      [
        "control_input [",
        '  { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },',
        '  { name: "END" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0.5, 1.5 ] } ] },',
        '  { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },',
        '  { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] }',
        "]",
      ].join("\n"),
    );
    assert.deepEqual(batching.controls, {
      start: { name: "START", datatype: "INT32", falseValue: 0, trueValue: 1 },
      end: { name: "END", datatype: "FP32", falseValue: 0.5, trueValue: 1.5 },
      ready: { name: "READY", datatype: "BOOL", falseValue: false, trueValue: true },
      corrid: { name: "CORRID", datatype: "BYTES" },
    });
    for (const [type, datatype] of [
      ["TYPE_UINT64", "UINT64"],
      ["TYPE_INT64", "INT64"],
      ["TYPE_UINT32", "UINT32"],
      ["TYPE_INT32", "INT32"],
    ]) {
      const corrid = sequencesOf(control("ID", "CONTROL_SEQUENCE_CORRID", `data_type: ${type}`)).controls.corrid;
      assert.deepEqual(corrid, { name: "ID", datatype });
    }
  });

  it("refuses a control without a name, a name given twice, one tensor for two kinds, and a kind given twice", () => {
    const kinds = (...entries: string[]) => configText(`control_input [ ${entries.join(", ")} ]`);
    assert.equal(
      refused(
        kinds("{ control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }"),
        "sequence_batching.control_input[0].name",
      ),
      "sequence batching control tensor must have a name for seq",
    );
    assert.equal(
      refused(
        kinds(
          '{ name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }',
          '{ name: "S" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }',
        ),
        "sequence_batching.control_input[1] 'S'",
      ),
      "sequence batching control tensor 'S' is specified for multiple control kinds for seq",
    );
    // Triton lets this one through (its check is per entry); the model would get one tensor for two controls.
    assert.equal(
      refused(
        kinds(
          '{ name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }, { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }',
        ),
        "sequence_batching.control_input[0] 'S'",
      ),
      "sequence batching control tensor 'S' is specified for multiple control kinds for seq",
    );
    assert.equal(
      refused(
        kinds(
          '{ name: "A" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }',
          '{ name: "B" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }',
        ),
        "sequence_batching.control_input[1] 'B'.control[0]",
      ),
      "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for seq",
    );
  });

  it("refuses a boolean control without its values, with two kinds of values, or without exactly 2", () => {
    const field = "sequence_batching.control_input[0] 'S'.control[0]";
    assert.equal(
      refused(configText(control("S", "CONTROL_SEQUENCE_READY", "")), field),
      "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_READY for seq",
    );
    assert.equal(
      refused(
        configText(control("S", "CONTROL_SEQUENCE_END", "int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ]")),
        field,
      ),
      "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_END for seq",
    );
    for (const [list, values] of [
      ["int32_false_true", "[ 1 ]"],
      ["fp32_false_true", "[ 0, 1, 2 ]"],
      ["bool_false_true", "[ true ]"],
    ]) {
      assert.equal(
        refused(configText(control("S", "CONTROL_SEQUENCE_START", `${list}: ${values}`)), `${field}.${list}`),
        `sequence batching control '${list}' must have exactly 2 entries for CONTROL_SEQUENCE_START for seq`,
      );
    }
  });

  it("refuses a CORRID control with false/true values, or with a data type it cannot carry", () => {
    const field = "sequence_batching.control_input[0] 'ID'.control[0]";
    assert.equal(
      refused(
        configText(control("ID", "CONTROL_SEQUENCE_CORRID", "data_type: TYPE_UINT64 int32_false_true: [ 0, 1 ]")),
        field,
      ),
      "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_CORRID for seq",
    );
    for (const type of ["TYPE_FP32", "TYPE_BOOL", "TYPE_INT16", ""]) {
      const values = type === "" ? "" : `data_type: ${type}`;
      assert.equal(
        refused(configText(control("ID", "CONTROL_SEQUENCE_CORRID", values)), `${field}.data_type`),
        "unexpected data type for control CONTROL_SEQUENCE_CORRID for seq. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
      );
    }
  });

  it("refuses preferred batch sizes that are not positive or past max_batch_size", () => {
    const field = "sequence_batching.oldest.preferred_batch_size";
    assert.equal(
      refused(configText("oldest { preferred_batch_size: [ 0 ] }"), field),
      "sequence batching preferred batch size must be positive for seq",
    );
    assert.equal(
      refused(configText("oldest { preferred_batch_size: [ 2, 5 ] }"), field),
      "sequence batching preferred batch size must be <= max batch size for seq",
    );
    assert.equal(
      refused(configText("oldest { preferred_batch_size: [ 1 ] }", "max_batch_size: 0"), field),
      "sequence batching preferred batch size must be <= max batch size for seq",
    );
  });

  it("refuses a minimum slot utilization outside [0, 1] (0: not set, as Triton)", () => {
    const field = "sequence_batching.direct.minimum_slot_utilization";
    for (const value of ["-0.1", "1.5", "nan"]) {
      assert.equal(
        refused(configText(`direct { minimum_slot_utilization: ${value} }`), field),
        "sequence batching minimum slot utilization must be in range (0.0, 1.0] for seq",
      );
    }
    assert.equal(sequencesOf("direct { minimum_slot_utilization: 1 }").strategy.kind, "direct");
  });

  it("bounds the waits to a day and the slots of all instances to MAX_SEQUENCE_SLOTS", () => {
    const day = 86_400_000_000;
    assert.equal(sequencesOf(`max_sequence_idle_microseconds: ${day}`).maxSequenceIdleUs, day);
    assert.match(
      refused(
        configText(`max_sequence_idle_microseconds: ${day + 1}`),
        "sequence_batching.max_sequence_idle_microseconds",
      ),
      /longer than a day/,
    );
    for (const strategy of ["direct", "oldest"]) {
      assert.match(
        refused(
          configText(`${strategy} { max_queue_delay_microseconds: ${day + 1} }`),
          `sequence_batching.${strategy}.max_queue_delay_microseconds`,
        ),
        /at most 86400000000 \(a day\)/,
      );
    }
    assert.match(
      refused(configText("oldest { max_candidate_sequences: -1 }"), "sequence_batching.oldest.max_candidate_sequences"),
      /-1 is not a number of sequences/,
    );
    const slots = MAX_SEQUENCE_SLOTS / 4;
    assert.equal(
      sequencesOf(`oldest { max_candidate_sequences: ${slots} }`, "max_batch_size: 4\ninstance_group [ { count: 4 } ]")
        .slotsPerInstance,
      slots,
    );
    assert.match(
      refused(
        configText(
          `oldest { max_candidate_sequences: ${slots + 1} }`,
          "max_batch_size: 4\ninstance_group [ { count: 4 } ]",
        ),
        "sequence_batching",
        SEQUENCE_LINE + 1,
      ),
      new RegExp(`${slots + 1} sequence slots per instance × 4 instance\\(s\\) is past ${MAX_SEQUENCE_SLOTS}`),
    );
  });

  it("refuses the response cache with sequence batching, in Triton's words", () => {
    assert.equal(
      refused(configText("", "max_batch_size: 4\nresponse_cache { enable: true }"), "response_cache.enable", 4),
      "Response Cache does not currently support model seq with sequence batching scheduler. Please disable the response cache.",
    );
  });

  it("names the model from its folder when the config does not", () => {
    const text = configText("oldest { preferred_batch_size: [ 0 ] }").replace('name: "seq"\n', "");
    assert.throws(
      () => toModelSpec(parseText(text, SOURCE), SOURCE, "from_folder", text),
      /preferred batch size must be positive for from_folder$/,
    );
  });

  it("takes a warmup sample that feeds the control inputs (Triton adds them as override inputs), not other undeclared names", () => {
    const warmup = (input: string) =>
      `model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } inputs { key: "${input}" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } } ]`;
    const text = `${configText(control("START", "CONTROL_SEQUENCE_START"))}\n${warmup("START")}`;
    const [sample] = specOf(text).scheduling.warmup;
    assert.deepEqual(
      sample?.inputs.map((input) => input.name),
      ["INPUT", "START"],
    );
    assert.throws(
      () => specOf(`${configText(control("START", "CONTROL_SEQUENCE_START"))}\n${warmup("OTHER")}`),
      /model_warmup\[0\] 'w'.inputs\["OTHER"\]: the model has no input 'OTHER'/,
    );
  });

  it("lets a control tensor also be a declared input, as Triton does (the control's value replaces the client's)", () => {
    const spec = specOf(configText(control("INPUT", "CONTROL_SEQUENCE_START")));
    assert.deepEqual(
      spec.inputs.map((input) => input.name),
      ["INPUT"],
      "the client's inputs are the declared ones",
    );
    assert.equal(spec.scheduling.sequenceBatching?.controls.start?.name, "INPUT");
    checkEngine(spec, SOURCE);
  });
});

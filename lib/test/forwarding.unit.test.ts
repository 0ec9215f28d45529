import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { forwardedConfig, localSupport, type LocalSupportOptions } from "../engines/catalog.js";
import { completeEnsembles, parseCandidate, type Candidate } from "../model-repository/candidates.js";
import { ConfigError, parseText } from "../model-repository/config.js";
import { SEQUENCE_WORKERS_REASON } from "../model-repository/sequence-batching.js";
import { scanModelSources } from "../model-repository/sources.js";

/**
 * The forwarding rule (--forward-unsupported, `migrate`, the repository CR): what this data
 * plane cannot run goes to the Triton, with the reason; what it can, or what no server would
 * take, stays here.
 */

const UPSTREAM = "triton:8001";

/** A python model with `sequence_batching { body }`. */
const pythonSequence = (name: string, body: string): string => `
name: "${name}"
backend: "python"
max_batch_size: 2
sequence_batching {
  ${body}
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
`;

const STATE = 'state [ { input_name: "IN_STATE" output_name: "OUT_STATE" data_type: TYPE_INT32 dims: [ 1 ] } ]';

const PYTHON_STATE_REASON =
  "sequence_batching.state: Triton's Python backend does not support implicit state (Triton's docs: the onnxruntime, TensorRT and PyTorch backends only); keep the state in the model, keyed by request.correlation_id()";

/** An ensemble of one step, `step`. */
const ensembleOf = (name: string, step: string): string => `
name: "${name}"
platform: "ensemble"
input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]
ensemble_scheduling { step [ { model_name: "${step}" model_version: -1 input_map { key: "INPUT" value: "X" } output_map { key: "OUTPUT" value: "Y" } } ] }
`;

const supportOf = (text: string, options: LocalSupportOptions = {}) =>
  localSupport(parseText(text, "m/config.pbtxt"), "m/config.pbtxt", options);

describe("the forwarding rule: what runs here, and why the rest is forwarded", () => {
  it("forwards a Python model with implicit state, saying why, without --forward-python", () => {
    assert.deepEqual(supportOf(pythonSequence("m", STATE)), { runsHere: false, reason: PYTHON_STATE_REASON });
    assert.deepEqual(supportOf(pythonSequence("m", "iterative_sequence: true")), {
      runsHere: false,
      reason: "sequence_batching.iterative_sequence: request rescheduling is not supported by this data plane",
    });
  });

  it("forwards a sequence model under several --grpc-workers (a sequence stays in one process), saying why", () => {
    const model = pythonSequence("m", "");
    assert.deepEqual(supportOf(model, { grpcWorkers: 2 }), { runsHere: false, reason: SEQUENCE_WORKERS_REASON });
    assert.deepEqual(supportOf(model, { grpcWorkers: 1 }), { runsHere: true });
    const plain = model.replace(/sequence_batching \{[^]*?\n\}\n/, "");
    assert.deepEqual(supportOf(plain, { grpcWorkers: 2 }), { runsHere: true }, "no sequence_batching: runs here");
  });

  it("runs a Python sequence model without state here", () => {
    assert.deepEqual(supportOf(pythonSequence("m", "oldest { max_candidate_sequences: 4 }")), { runsHere: true });
    assert.deepEqual(supportOf(pythonSequence("m", "")), { runsHere: true });
  });

  it("forwards every model the catalog lacks, and with --forward-python every Python model, saying which", () => {
    assert.deepEqual(supportOf('name: "m"\nplatform: "tensorflow_graphdef"'), {
      runsHere: false,
      reason: "'tensorflow_graphdef' does not run in this data plane",
    });
    assert.deepEqual(supportOf(pythonSequence("m", ""), { forwardPython: true }), {
      runsHere: false,
      reason: "--forward-python forwards every Python-backend model",
    });
    // A config that names its engine runs there, whatever the flags; a name not in the catalog fails its load here.
    const named = (engine: string) =>
      `${pythonSequence("m", "")}\nparameters { key: "engine" value { string_value: "${engine}" } }`;
    assert.deepEqual(supportOf(named("python"), { forwardPython: true }), { runsHere: true });
    assert.deepEqual(supportOf(named("no-such-engine")), { runsHere: true });
    // Even with a feature its engine lacks: its load then says why (the engine was chosen, not guessed).
    const namedWithState = `${pythonSequence("m", STATE)}\nparameters { key: "engine" value { string_value: "python" } }`;
    assert.deepEqual(supportOf(namedWithState), { runsHere: true });
  });

  it("forwards implicit state of the other engines that run models here, naming the engine", () => {
    const onnx = `name: "m"\nbackend: "onnxruntime"\nmax_batch_size: 2\nsequence_batching { ${STATE} }\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]`;
    assert.deepEqual(supportOf(onnx), {
      runsHere: false,
      reason:
        "sequence_batching.state: implicit state is not implemented by this data plane's onnxruntime engine yet; forward the model (--forward-unsupported)",
    });
    const identity = onnx.replace('backend: "onnxruntime"', 'backend: "identity"');
    assert.match((supportOf(identity) as { reason: string }).reason, /this data plane's identity engine yet/);
    assert.deepEqual(supportOf(identity.replace(STATE, "")), { runsHere: true }, "identity runs sequences here");
  });

  it("does not forward a config Triton would refuse too: its load reports the error here", () => {
    // Triton's own sequence_batching check, an unknown instance kind, steps on a model that is not an ensemble.
    assert.deepEqual(supportOf(pythonSequence("m", "oldest { preferred_batch_size: [ 0 ] }\n" + STATE)), {
      runsHere: true,
    });
    assert.deepEqual(
      supportOf('name: "m"\nbackend: "python"\nensemble_scheduling { step [ { model_name: "x" model_version: -1 } ] }'),
      { runsHere: true },
    );
    // The data plane's own bound: a config it would not run as it is, not a feature Triton has and it lacks.
    assert.deepEqual(supportOf(pythonSequence("m", "oldest { max_candidate_sequences: 70000 }")), { runsHere: true });
  });

  describe("a repository read with --forward-unsupported", () => {
    let root: string;
    before(() => {
      root = mkdtempSync(join(tmpdir(), "dynamo-kserve-forwarding-"));
      const models: Record<string, string> = {
        stateful: pythonSequence("stateful", STATE),
        sequences: pythonSequence("sequences", "direct { }"),
        broken_syntax: 'name: "broken_syntax"\nbackend: "python"\nmax_batch_size: [ 8',
        tensorflow: 'name: "tensorflow"\nplatform: "tensorflow_savedmodel"',
        over_stateful: ensembleOf("over_stateful", "stateful"),
        over_over: ensembleOf("over_over", "over_stateful"),
        over_sequences: ensembleOf("over_sequences", "sequences"),
      };
      for (const [name, text] of Object.entries(models)) {
        mkdirSync(join(root, name));
        writeFileSync(join(root, name, "config.pbtxt"), text);
      }
    });
    after(() => rmSync(root, { recursive: true, force: true }));

    /** The candidates as the registry reads them (parse, forward, then ensembles from their steps), by name. */
    async function candidates(options: LocalSupportOptions = {}): Promise<Map<string, Candidate>> {
      const forwarding = {
        runsHere: (config: Parameters<typeof localSupport>[0], source: string) => localSupport(config, source, options),
        forward: (config: Parameters<typeof forwardedConfig>[0]) => forwardedConfig(config, UPSTREAM),
      };
      const read: Candidate[] = [];
      for (const source of await scanModelSources([root], [])) {
        read.push(await parseCandidate(source, { forwardUnsupported: forwarding }));
      }
      return new Map(completeEnsembles(read, forwarding).map((candidate) => [candidate.name, candidate]));
    }

    const engineOf = (candidate: Candidate | undefined): string | undefined =>
      candidate === undefined || candidate.config instanceof ConfigError
        ? undefined
        : candidate.config.parameters["engine"]?.stringValue;

    it("forwards the stateful Python model with its reason, and keeps the other sequence model here", async () => {
      const read = await candidates();
      const stateful = read.get("stateful");
      assert.equal(stateful?.forwardedBecause, PYTHON_STATE_REASON);
      assert.equal(engineOf(stateful), "kserve-grpc");
      assert.equal(
        (stateful!.config as Exclude<Candidate["config"], ConfigError>).parameters["upstream"]?.stringValue,
        UPSTREAM,
      );
      assert.equal(read.get("sequences")?.forwardedBecause, undefined);
      assert.equal(engineOf(read.get("sequences")), undefined);
      assert.equal(read.get("tensorflow")?.forwardedBecause, "'tensorflow_savedmodel' does not run in this data plane");
    });

    it("does not forward a config that cannot be read: its error stays", async () => {
      const broken = (await candidates()).get("broken_syntax");
      assert.ok(broken?.config instanceof ConfigError);
      assert.match(broken.config.message, /broken_syntax\/config\.pbtxt:3: /);
      assert.equal(broken.forwardedBecause, undefined);
    });

    it("forwards an ensemble with its forwarded step, naming the step and its reason, through inner ensembles", async () => {
      const read = await candidates();
      const inner = read.get("over_stateful");
      assert.equal(engineOf(inner), "kserve-grpc");
      assert.equal(inner?.forwardedBecause, `its step model 'stateful' is forwarded: ${PYTHON_STATE_REASON}`);
      assert.equal(
        read.get("over_over")?.forwardedBecause,
        `its step model 'over_stateful' is forwarded: its step model 'stateful' is forwarded: ${PYTHON_STATE_REASON}`,
      );
      assert.equal(engineOf(read.get("over_sequences")), undefined, "an ensemble of steps that run here runs here");
      assert.equal(read.get("over_sequences")?.forwardedBecause, undefined);
    });

    it("with --forward-python, forwards every Python model and the ensembles over them", async () => {
      const read = await candidates({ forwardPython: true });
      assert.equal(read.get("sequences")?.forwardedBecause, "--forward-python forwards every Python-backend model");
      assert.equal(
        read.get("over_sequences")?.forwardedBecause,
        "its step model 'sequences' is forwarded: --forward-python forwards every Python-backend model",
      );
    });
  });
});

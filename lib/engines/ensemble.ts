import type { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { ConfigError } from "../model-repository/config.js";
import type { Datatype } from "../model-repository/datatypes.js";
import type { ModelSpec, TensorSpec } from "../model-repository/spec.js";
import type { EngineDescription } from "./description.js";

/**
 * `platform: "ensemble"`, as Triton's ensemble scheduler: `ensemble_scheduling` steps, each
 * a model of this data plane whose inputs are named ensemble tensors (`input_map`: the step
 * model's input -> the ensemble tensor) and whose outputs become ensemble tensors
 * (`output_map`: the step model's output -> the ensemble tensor). The settings are the step
 * graph, checked here without the step models (Triton's ValidateEnsembleSchedulingConfig);
 * what needs them (their tensors, types, decoupling) is checked when the ensemble starts
 * (checkEnsembleSteps).
 */

export interface EnsembleStep {
  /** Its place in `ensemble_scheduling.step`, which errors name. */
  readonly index: number;
  readonly modelName: string;
  /** The version the step calls; "" for the latest (model_version -1). */
  readonly modelVersion: string;
  /** The step model's input -> the ensemble tensor that feeds it. */
  readonly inputMap: ReadonlyMap<string, string>;
  /** The step model's output -> the ensemble tensor it becomes. */
  readonly outputMap: ReadonlyMap<string, string>;
}

export interface EnsembleSettings {
  readonly name: string;
  readonly maxBatchSize: number;
  /** As its config says (a repository's ensembles are marked so when a step is: completeEnsembles). */
  readonly decoupled: boolean;
  readonly inputs: readonly TensorSpec[];
  readonly outputs: readonly TensorSpec[];
  /** In the config's order (`index`). */
  readonly steps: readonly EnsembleStep[];
  /** The steps' indexes in an order that has each after the steps whose outputs it takes. */
  readonly order: readonly number[];
  /** Ensemble tensor -> the step that produces it (ensemble inputs are produced by none). */
  readonly producer: ReadonlyMap<string, number>;
  /**
   * max_inflight_requests: the most calls of each step running at once, over all the
   * ensemble's requests (a decoupled step's responses then wait for room downstream); 0: no bound.
   */
  readonly maxInflightRequests: number;
}

/** What a step's model is in this data plane: its spec, for the checks at start. */
export type StepModel = Pick<ModelSpec, "name" | "maxBatchSize" | "inputs" | "outputs" | "decoupled">;

export const ensembleEngine: EngineDescription<EnsembleSettings> = {
  name: "ensemble",
  // Its steps are scheduled by their own models, each call through the pipeline.
  scheduled: false,
  settings(spec, source) {
    return ensembleSettings(spec, source);
  },
};

function ensembleSettings(spec: ModelSpec, source: string): EnsembleSettings {
  const fail = (field: string, detail: string): never => {
    throw new ConfigError(source, `${field}: ${detail}`);
  };
  const { config } = spec;
  const choice = config.schedulingChoice;
  if (choice?.$case === "sequenceBatching" || choice?.$case === "dynamicBatching") {
    // Triton refuses it too: an ensemble's scheduling is its steps'.
    const field = choice.$case === "sequenceBatching" ? "sequence_batching" : "dynamic_batching";
    fail(
      field,
      `an ensemble is scheduled by its step models: set ${field} in their configs, and list the steps in ensemble_scheduling { step [...] }`,
    );
  }
  if (choice?.$case !== "ensembleScheduling") {
    fail("ensemble_scheduling", `an ensemble lists its steps in ensemble_scheduling { step [...] }`);
  }
  checkNotForEnsembles(config, fail);
  if (spec.inputs.length === 0) fail("input", "an ensemble declares its inputs");
  if (spec.outputs.length === 0) fail("output", "an ensemble declares its outputs");
  const scheduling = choice!.$case === "ensembleScheduling" ? choice!.value : undefined;
  const rawSteps = scheduling?.step ?? [];
  if (rawSteps.length === 0) fail("ensemble_scheduling.step", "an ensemble needs at least one step");
  const steps = rawSteps.map((step, index): EnsembleStep => {
    const field = `ensemble_scheduling.step[${index}]`;
    if (!step.modelName) fail(`${field}.model_name`, "name the model this step runs");
    if (step.modelName === spec.name) fail(`${field}.model_name`, `a step cannot run the ensemble itself`);
    if (step.modelNamespace) fail(`${field}.model_namespace`, "model namespaces are not supported");
    if (step.modelVersion < -1n) {
      fail(`${field}.model_version`, `${step.modelVersion} is not a version: -1 (the latest) or a version number`);
    }
    if (step.modelVersion === 0n) fail(`${field}.model_version`, "0 is not a version: -1 (the latest) or 1 and up");
    if (Object.keys(step.inputMap).length === 0) fail(`${field}.input_map`, "map the step model's inputs");
    if (Object.keys(step.outputMap).length === 0) fail(`${field}.output_map`, "map the step model's outputs");
    return {
      index,
      modelName: step.modelName,
      modelVersion: step.modelVersion === -1n ? "" : String(step.modelVersion),
      inputMap: new Map(Object.entries(step.inputMap)),
      outputMap: new Map(Object.entries(step.outputMap)),
    };
  });
  const producer = producers(spec, steps, fail);
  checkConsumed(spec, steps, producer, fail);
  return {
    name: spec.name,
    maxBatchSize: spec.maxBatchSize,
    decoupled: spec.decoupled,
    inputs: spec.inputs,
    outputs: spec.outputs,
    steps,
    order: runOrder(steps, producer, fail),
    producer,
    maxInflightRequests: scheduling?.maxInflightRequests ?? 0,
  };
}

type Fail = (field: string, detail: string) => never;

/** As Triton: an ensemble runs no instances of its own, so it has none of these. */
function checkNotForEnsembles(config: ModelConfig, fail: Fail): void {
  if (config.instanceGroup.length > 0) fail("instance_group", "an ensemble has no instances (its steps' models do)");
  if (config.modelWarmup.length > 0) fail("model_warmup", "warm up the ensemble's step models instead");
  if (config.optimization !== undefined) fail("optimization", "not for an ensemble (its steps' models have their own)");
}

/** Each ensemble tensor a step produces, by the step; no tensor produced twice, nor an ensemble input produced. */
function producers(spec: ModelSpec, steps: readonly EnsembleStep[], fail: Fail): Map<string, number> {
  const inputs = new Set(spec.inputs.map((input) => input.name));
  const producer = new Map<string, number>();
  for (const step of steps) {
    for (const [output, tensor] of step.outputMap) {
      const field = `ensemble_scheduling.step[${step.index}].output_map["${output}"]`;
      if (inputs.has(tensor)) fail(field, `'${tensor}' is an ensemble input; a step cannot produce it`);
      const earlier = producer.get(tensor);
      if (earlier !== undefined) {
        const by =
          earlier === step.index
            ? "another output of this step"
            : `step ${earlier} (model '${steps[earlier]!.modelName}')`;
        fail(field, `ensemble tensor '${tensor}' is already produced by ${by}; each tensor has one producer`);
      }
      producer.set(tensor, step.index);
    }
  }
  for (const output of spec.outputs) {
    if (!producer.has(output.name)) {
      fail(`output '${output.name}'`, "no step produces this ensemble output (name it in a step's output_map)");
    }
  }
  return producer;
}

/** Every step input fed, every ensemble input used, and (as Triton) no step output left unused. */
function checkConsumed(
  spec: ModelSpec,
  steps: readonly EnsembleStep[],
  producer: ReadonlyMap<string, number>,
  fail: Fail,
): void {
  const inputs = new Set(spec.inputs.map((input) => input.name));
  const consumed = new Set<string>();
  for (const step of steps) {
    for (const [input, tensor] of step.inputMap) {
      if (!inputs.has(tensor) && !producer.has(tensor)) {
        fail(
          `ensemble_scheduling.step[${step.index}].input_map["${input}"]`,
          `ensemble tensor '${tensor}' is neither an ensemble input nor produced by a step`,
        );
      }
      consumed.add(tensor);
    }
  }
  for (const input of spec.inputs) {
    if (!consumed.has(input.name)) fail(`input '${input.name}'`, "no step uses this ensemble input");
  }
  const outputs = new Set(spec.outputs.map((output) => output.name));
  for (const [tensor, index] of producer) {
    if (!consumed.has(tensor) && !outputs.has(tensor)) {
      fail(
        `ensemble_scheduling.step[${index}].output_map`,
        `ensemble tensor '${tensor}' is neither an ensemble output nor used by a step; drop it from the map`,
      );
    }
  }
}

/** The steps in an order where each comes after those producing its inputs (Kahn's); a cycle is named. */
function runOrder(steps: readonly EnsembleStep[], producer: ReadonlyMap<string, number>, fail: Fail): number[] {
  const needs = steps.map((step) => stepsFeeding(step, producer));
  const done = new Set<number>();
  const order: number[] = [];
  for (let progressed = true; progressed;) {
    progressed = false;
    for (const step of steps) {
      if (done.has(step.index) || [...needs[step.index]!].some((need) => !done.has(need))) continue;
      done.add(step.index);
      order.push(step.index);
      progressed = true;
    }
  }
  if (order.length < steps.length) {
    const cycle = cycleAmong(steps, needs, done);
    const path = cycle.map((index) => `step ${index} (model '${steps[index]!.modelName}')`).join(" -> ");
    fail("ensemble_scheduling.step", `the steps feed each other in a cycle: ${path}`);
  }
  return order;
}

/** The steps whose outputs a step takes (itself included, when it feeds itself). */
function stepsFeeding(step: EnsembleStep, producer: ReadonlyMap<string, number>): Set<number> {
  const feeding = new Set<number>();
  for (const tensor of step.inputMap.values()) {
    const from = producer.get(tensor);
    if (from !== undefined) feeding.add(from);
  }
  return feeding;
}

/** A cycle among the steps that could not be ordered, as a path that ends where it starts. */
function cycleAmong(
  steps: readonly EnsembleStep[],
  needs: readonly Set<number>[],
  done: ReadonlySet<number>,
): number[] {
  // Every step left needs another step left: walking back from any of them must come round.
  let at = steps.find((step) => !done.has(step.index))!.index;
  const seen: number[] = [];
  while (!seen.includes(at)) {
    seen.push(at);
    at = [...needs[at]!].find((need) => !done.has(need))!;
  }
  const loop = seen.slice(seen.indexOf(at)).reverse();
  return [...loop, loop[0]!];
}

/** What the ensemble is, its step models known: whether it streams, and where each response comes from. */
export interface CheckedEnsemble {
  /** Whether a step is decoupled: each of its responses flows on, and the ensemble is decoupled. */
  readonly decoupled: boolean;
  /** The step models, by step. */
  readonly models: readonly StepModel[];
}

/**
 * Checks the steps against their models (Triton's ValidateEnsembleConfig): every mapped
 * input and output is the model's, every required input is fed, each ensemble tensor has
 * one datatype wherever it is declared, no step batches less than the ensemble, and a step
 * takes its inputs from one decoupled step's responses at most. Throws a ConfigError.
 */
export function checkEnsembleSteps(
  settings: EnsembleSettings,
  models: readonly StepModel[],
  source: string,
): CheckedEnsemble {
  const fail = (field: string, detail: string): never => {
    throw new ConfigError(source, `${field}: ${detail}`);
  };
  const declared = new Map<string, Declared>();
  const ensembleBatches = settings.maxBatchSize > 0;
  for (const input of settings.inputs)
    declared.set(input.name, declaredAs(input, ensembleBatches, "the ensemble's input"));
  for (const index of settings.order) {
    const step = settings.steps[index]!;
    const model = models[index]!;
    const label = `step ${step.index} (model '${model.name}')`;
    const field = `ensemble_scheduling.step[${step.index}]`;
    if (model.maxBatchSize > 0 && model.maxBatchSize < settings.maxBatchSize) {
      fail(
        field,
        `${label} batches at most ${model.maxBatchSize}, less than the ensemble's max_batch_size ${settings.maxBatchSize}`,
      );
    }
    for (const input of model.inputs) {
      if (!input.optional && !step.inputMap.has(input.name)) {
        fail(`${field}.input_map`, `${label}: the model's input '${input.name}' is not mapped from an ensemble tensor`);
      }
    }
    for (const [name, tensor] of step.inputMap) {
      const input = tensorNamed(model.inputs, name, `${field}.input_map["${name}"]`, `${label} has no input`, fail);
      const mismatch = mismatchOf(declared.get(tensor)!, declaredAs(input, model.maxBatchSize > 0, ""));
      if (mismatch !== undefined) {
        fail(`${field}.input_map["${name}"]`, `${label}: input '${name}' ${mismatch(`ensemble tensor '${tensor}'`)}`);
      }
    }
    for (const [name, tensor] of step.outputMap) {
      const output = tensorNamed(model.outputs, name, `${field}.output_map["${name}"]`, `${label} has no output`, fail);
      declared.set(tensor, declaredAs(output, model.maxBatchSize > 0, `output '${name}' of ${label}`));
    }
  }
  for (const output of settings.outputs) {
    const mismatch = mismatchOf(declared.get(output.name)!, declaredAs(output, ensembleBatches, ""));
    if (mismatch !== undefined)
      fail(`output '${output.name}'`, `the ensemble's output ${mismatch("what produces it")}`);
  }
  checkDecoupledFlows(settings, models, fail);
  const decoupledStep = settings.steps.find((step) => models[step.index]!.decoupled);
  if (decoupledStep !== undefined && !settings.decoupled) {
    fail(
      "model_transaction_policy",
      `step ${decoupledStep.index} (model '${decoupledStep.modelName}') is decoupled, so the ensemble streams: set model_transaction_policy { decoupled: true }`,
    );
  }
  return { decoupled: decoupledStep !== undefined, models };
}

/** An ensemble tensor as one place declares it: datatype, shape, and the shape with the batch dimension. */
interface Declared {
  readonly datatype: Datatype;
  readonly dims: readonly number[];
  readonly fullDims: readonly number[];
  readonly where: string;
}

const declaredAs = (tensor: TensorSpec, batches: boolean, where: string): Declared => ({
  datatype: tensor.datatype,
  dims: tensor.dims,
  fullDims: batches ? [-1, ...tensor.dims] : tensor.dims,
  where,
});

/**
 * How a use of a tensor differs from what produces it, as Triton compares them: the same
 * datatype, and shapes equal where neither says -1, with or without the batch dimension
 * (a non-batching model's [-1, 4] is a batching one's [4]). Undefined when they agree.
 */
function mismatchOf(known: Declared, use: Declared): ((what: string) => string) | undefined {
  if (known.datatype !== use.datatype) {
    return (what) => `is ${use.datatype} but ${what} is ${known.datatype} (${known.where})`;
  }
  const fits = (a: readonly number[], b: readonly number[]): boolean =>
    a.length === b.length && a.every((dim, i) => dim === -1 || b[i] === -1 || dim === b[i]);
  if (fits(known.dims, use.dims) || fits(known.fullDims, use.fullDims)) return undefined;
  const shape = (dims: readonly number[]): string => `[${dims.join(", ")}]`;
  return (what) => `has shape ${shape(use.fullDims)} but ${what} is ${shape(known.fullDims)} (${known.where})`;
}

function tensorNamed(
  tensors: readonly TensorSpec[],
  name: string,
  field: string,
  missing: string,
  fail: Fail,
): TensorSpec {
  const found = tensors.find((tensor) => tensor.name === name);
  if (found === undefined) {
    fail(field, `${missing} '${name}' (it has: ${tensors.map((tensor) => tensor.name).join(", ") || "none"})`);
  }
  return found!;
}

/**
 * As Triton: each response of a decoupled step starts a flow of its own downstream, so a
 * step may not join tensors of two flows (two decoupled steps' responses, or one's and the
 * request's), and every ensemble output comes from the same flow.
 */
function checkDecoupledFlows(settings: EnsembleSettings, models: readonly StepModel[], fail: Fail): void {
  // The flow of each tensor: "" for the request's; the decoupled step whose responses carry it.
  const flow = new Map<string, string>(settings.inputs.map((input) => [input.name, ""]));
  const describe = (of: string): string => (of === "" ? "the request" : `the responses of ${of}`);
  for (const index of settings.order) {
    const step = settings.steps[index]!;
    const label = `step ${index} (model '${step.modelName}')`;
    const flows = new Map([...step.inputMap.values()].map((tensor) => [flow.get(tensor)!, tensor]));
    const [first, second] = [...flows];
    if (first !== undefined && second !== undefined) {
      fail(
        `ensemble_scheduling.step[${index}].input_map`,
        `${label} joins '${first[1]}' from ${describe(first[0])} with '${second[1]}' from ${describe(second[0])}; a step takes tensors of one decoupled flow`,
      );
    }
    const from = models[index]!.decoupled ? label : [...flows.keys()][0]!;
    for (const tensor of step.outputMap.values()) flow.set(tensor, from);
  }
  const outputs = new Map(settings.outputs.map((output) => [flow.get(output.name)!, output.name]));
  const [first, second] = [...outputs];
  if (first !== undefined && second !== undefined) {
    fail(
      "output",
      `ensemble output '${first[1]}' comes from ${describe(first[0])} and '${second[1]}' from ${describe(second[0])}`,
    );
  }
}

/** The models an ensemble config's steps run (none for another config). */
export function ensembleStepModels(config: ModelConfig): string[] {
  const choice = config.schedulingChoice;
  return choice?.$case === "ensembleScheduling" ? choice.value.step.map((step) => step.modelName) : [];
}

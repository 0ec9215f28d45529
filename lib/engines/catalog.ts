import { access } from "node:fs/promises";
import { join } from "node:path";
import type { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { ConfigError, UnsupportedFeature } from "../model-repository/config.js";
import type { ModelFiles } from "../model-repository/sources.js";
import { toModelSpec, type ModelSpec } from "../model-repository/spec.js";
import { SEQUENCE_WORKERS_REASON } from "../model-repository/sequence-batching.js";
import type { EngineDescription } from "./description.js";
import { ensembleEngine, ensembleStepModels } from "./ensemble.js";
import { identityEngine } from "./identity.js";
import { kserveGrpcEngine } from "./kserve-grpc.js";
import { mockerEngine } from "./mocker.js";
import { onnxEngine } from "./onnx.js";
import { openAiEngine } from "./openai.js";
import { pythonEngine } from "./python.js";
import { repeatEngine } from "./repeat.js";

/**
 * Every engine this data plane can run, described without running it: the one list a new
 * engine joins (its runtime then joins dataplane/src/engines/runtimes.ts, which the
 * compiler holds to this list).
 */
export const ENGINES = {
  identity: identityEngine,
  repeat: repeatEngine,
  mocker: mockerEngine,
  "kserve-grpc": kserveGrpcEngine,
  openai: openAiEngine,
  onnxruntime: onnxEngine,
  python: pythonEngine,
  ensemble: ensembleEngine,
} as const;

export type EngineName = keyof typeof ENGINES;
export type SettingsOf<Name extends EngineName> = ReturnType<(typeof ENGINES)[Name]["settings"]>;

const BY_SELECTOR: ReadonlyMap<string, EngineName> = new Map(
  (Object.entries(ENGINES) as [EngineName, EngineDescription<unknown>][]).flatMap(([name, description]) =>
    [description.name, ...(description.aliases ?? [])].map((selector) => [selector, name] as const),
  ),
);

/** Every value of `backend`, `platform` or `parameters["engine"]` that selects an engine. */
const SUPPORTED_ENGINES: readonly string[] = [...BY_SELECTOR.keys()];

/**
 * parameters["engine"] lets a Triton config keep its own backend (e.g. "python") and still
 * say how this data plane runs it (e.g. "kserve-grpc": forward to that Triton).
 */
const selectorOf = (engineParameter: string | undefined, backend: string): string => engineParameter ?? backend;

/** The engine a model's config asks for, or a ConfigError naming the choices. */
export function engineOf(spec: ModelSpec, source: string): EngineName {
  const selector = selectorOf(spec.parameters["engine"], spec.backend);
  const name = BY_SELECTOR.get(selector);
  if (name === undefined) {
    const field = spec.parameters["engine"] !== undefined ? 'parameters["engine"]' : "backend";
    throw new ConfigError(
      source,
      `${field}: '${selector}' is not supported by this data plane; supported engines: ${SUPPORTED_ENGINES.join(", ")}`,
    );
  }
  return name;
}

/**
 * Checks that a model can run on its engine without running it (the operator validates
 * configs this way; no runtime is loaded). Throws a ConfigError naming the field.
 */
export function checkEngine(spec: ModelSpec, source: string): void {
  engineSettings(engineOf(spec, source), spec, source);
}

/**
 * A model's checked settings for engine `name` (what its runtime is built from): the
 * engine's own checks, after the ones every engine the data plane schedules shares.
 */
export function engineSettings<Name extends EngineName>(name: Name, spec: ModelSpec, source: string): SettingsOf<Name> {
  const description: EngineDescription<unknown> = ENGINES[name];
  if (description.scheduled) checkScheduledModel(description, spec, source);
  // The settings ENGINES[name] returns are SettingsOf<Name>; TypeScript cannot see it through the index.
  return description.settings(spec, source) as SettingsOf<Name>;
}

/**
 * What no engine that runs models here does, refused before its own checks: the config's
 * batch tensors unless it makes them, steps (only an ensemble has them), and the sequence
 * features Triton serves and this data plane does not (UnsupportedFeature: forwarded by
 * --forward-unsupported).
 */
function checkScheduledModel(description: EngineDescription<unknown>, spec: ModelSpec, source: string): void {
  const { config } = spec;
  // batch_input/batch_output are made by the engine that batches (or by the upstream of a
  // forwarded model): a scheduled engine that cannot would run the model without them.
  if (description.makesBatchInputs !== true) {
    const field =
      config.batchInput.length > 0 ? "batch_input" : config.batchOutput.length > 0 ? "batch_output" : undefined;
    if (field !== undefined) {
      throw new ConfigError(
        source,
        `${field}: the ${description.name} engine does not make batch tensors (the onnxruntime engine does); remove it`,
      );
    }
  }
  if (config.schedulingChoice?.$case === "ensembleScheduling") {
    // Triton's words (ValidateEnsembleSchedulingConfig).
    throw new ConfigError(
      source,
      `ensemble_scheduling: ensemble scheduling cannot be set for model '${spec.name}' whose platform is not ensemble`,
    );
  }
  const sequences = spec.scheduling.sequenceBatching;
  if (sequences?.iterative === true) {
    throw new UnsupportedFeature(
      source,
      "sequence_batching.iterative_sequence: request rescheduling is not supported by this data plane",
    );
  }
  if (sequences?.hasState === true) {
    const reason =
      description.implicitState ??
      `implicit state is not implemented by this data plane's ${description.name} engine yet; forward the model (--forward-unsupported)`;
    throw new UnsupportedFeature(source, `sequence_batching.state: ${reason}`);
  }
}

/** Whether this data plane runs a model itself, and if not, why (what --forward-unsupported logs and `migrate` notes). */
export type LocalSupport = { readonly runsHere: true } | { readonly runsHere: false; readonly reason: string };

export interface LocalSupportOptions {
  /** --forward-python: Python-backend models are forwarded whatever they ask for. */
  readonly forwardPython?: boolean;
  /**
   * --grpc-workers: above 1, a model with sequence_batching on an engine that runs here is
   * forwarded (a sequence must stay in one process, and its requests may reach any worker).
   * `migrate` and the repository CR do not know the process layout: the data plane decides.
   */
  readonly grpcWorkers?: number;
}

const notInCatalog = (selector: string): string =>
  selector === ""
    ? "its config names no backend or platform, and no model file of this data plane's engines is there (Triton may complete it from its model files)"
    : `'${selector}' does not run in this data plane`;

/** What a config's spec is built under when it has no name yet (its folder gives it one later): the checks do not depend on it. */
const UNNAMED = "model";

/**
 * Whether this data plane runs a Triton config itself — the one rule of --forward-unsupported,
 * `migrate` and the repository CR. Not when no engine of ours is named (its backend or
 * platform, e.g. pytorch_libtorch, tensorflow, tensorrt, is not in the catalog), nor when
 * `forwardPython` forwards Python-backend models (--forward-python, as before the python
 * engine existed), nor when its engine refuses a feature the config asks for that Triton
 * serves (UnsupportedFeature: its detail is the reason), nor a sequence model under several
 * --grpc-workers (`grpcWorkers`). Any other ConfigError runs here,
 * so the model's load reports it (Triton would refuse the config too). A config that names
 * its engine (`parameters["engine"]`) runs here whatever it names. An ensemble runs here by
 * this rule; whether its steps do is the repository's question (ensemblesToForward).
 */
export function localSupport(config: ModelConfig, source: string, options: LocalSupportOptions = {}): LocalSupport {
  // Its engine is the config's choice: it loads there, or its load says why not.
  if (config.parameters["engine"] !== undefined) return { runsHere: true };
  const name = selectedEngine(config);
  if (name === undefined) return { runsHere: false, reason: notInCatalog(config.platform || config.backend) };
  if (options.forwardPython === true && name === "python") {
    return { runsHere: false, reason: "--forward-python forwards every Python-backend model" };
  }
  try {
    engineSettings(name, toModelSpec(config, source, config.name || UNNAMED), source);
  } catch (error) {
    // Any other error is the config's: it loads here, and its load says what is wrong.
    return error instanceof UnsupportedFeature ? { runsHere: false, reason: error.detail } : { runsHere: true };
  }
  const sequences = config.schedulingChoice?.$case === "sequenceBatching";
  if (sequences && ENGINES[name].scheduled && (options.grpcWorkers ?? 1) > 1) {
    return { runsHere: false, reason: SEQUENCE_WORKERS_REASON };
  }
  return { runsHere: true };
}

/**
 * The ensembles of a repository that are forwarded with their steps: those with a step
 * model that is (`forwardedBecause` gives its reason, undefined for a model that runs here),
 * or an inner ensemble forwarded for that reason, by name, each with its reason: the step
 * that decides it, and why that step is forwarded. A step the repository lacks leaves the
 * ensemble here (its load then says the step is missing).
 */
export function ensemblesToForward(
  configs: ReadonlyMap<string, ModelConfig>,
  forwardedBecause: (name: string) => string | undefined,
): Map<string, string> {
  const steps = ensemblesTakingFromSteps(configs, (name) => forwardedBecause(name) !== undefined);
  const reasons = new Map<string, string>();
  // An inner ensemble was taken before the ensembles that take from it: its reason is known first.
  for (const [ensemble, step] of steps) {
    reasons.set(ensemble, `its step model '${step}' is forwarded: ${reasons.get(step) ?? forwardedBecause(step)}`);
  }
  return reasons;
}

/**
 * The ensembles that take something from a step model that has it of its own (`has`), or
 * from an inner ensemble that took it, by name, each with the step model it takes it from.
 * Only steps the repository holds count.
 */
function ensemblesTakingFromSteps(
  configs: ReadonlyMap<string, ModelConfig>,
  has: (name: string) => boolean,
): Map<string, string> {
  const taken = new Map<string, string>();
  const holds = (name: string): boolean => taken.has(name) || has(name);
  // Until nothing changes: an ensemble of ensembles follows its inner ones.
  for (let changed = true; changed;) {
    changed = false;
    for (const [name, config] of configs) {
      if (holds(name)) continue;
      const step = ensembleStepModels(config).find((model) => configs.has(model) && holds(model));
      if (step === undefined) continue;
      taken.set(name, step);
      changed = true;
    }
  }
  return taken;
}

/**
 * Ensembles that run each other in a cycle (a step of `a` is `b`, a step of `b` is `a`), by
 * name, each with the cycle from it: none of them can load (each waits for the other).
 */
export function ensembleCycles(configs: ReadonlyMap<string, ModelConfig>): Map<string, string[]> {
  const cycles = new Map<string, string[]>();
  const stepsOf = (name: string): string[] => {
    const config = configs.get(name);
    return config === undefined ? [] : ensembleStepModels(config).filter((step) => configs.has(step));
  };
  for (const start of configs.keys()) {
    // Depth-first from `start`, along paths of ensembles, until it comes back to `start`.
    const search = (path: string[]): string[] | undefined => {
      for (const next of stepsOf(path[path.length - 1]!)) {
        if (next === start) return [...path, next];
        if (path.includes(next)) continue;
        const found = search([...path, next]);
        if (found !== undefined) return found;
      }
      return undefined;
    };
    const cycle = search([start]);
    if (cycle !== undefined) cycles.set(start, cycle);
  }
  return cycles;
}

/**
 * Ensembles with a decoupled step are decoupled (Triton marks them so when it loads them):
 * their configs with model_transaction_policy { decoupled: true }, by name, where a step
 * model's config (or an inner ensemble's, so marked) is decoupled.
 */
export function decoupledEnsembles(configs: ReadonlyMap<string, ModelConfig>): Map<string, ModelConfig> {
  const decoupled = ensemblesTakingFromSteps(
    configs,
    (name) => configs.get(name)?.modelTransactionPolicy?.decoupled === true,
  );
  return new Map(
    [...decoupled.keys()].map((name) => [name, { ...configs.get(name)!, modelTransactionPolicy: { decoupled: true } }]),
  );
}

/**
 * A config that forwards its model to a KServe v2 endpoint (the Triton that serves it):
 * the kserve-grpc engine with `upstream`; its own backend, tensors and decoupling are kept.
 */
export function forwardedConfig(config: ModelConfig, upstream: string): ModelConfig {
  return {
    ...config,
    parameters: {
      ...config.parameters,
      engine: { stringValue: kserveGrpcEngine.name },
      upstream: { stringValue: upstream },
    },
  };
}

/** The engine a config selects (its `engine` parameter, else its backend or platform), if any. */
export function selectedEngine(config: ModelConfig): EngineName | undefined {
  return BY_SELECTOR.get(selectorOf(config.parameters["engine"]?.stringValue, config.backend || config.platform));
}

/**
 * Triton's auto-complete: a config without backend or platform gets the engine whose
 * model file (e.g. model.onnx) is in the latest version folder, and the engine fills in
 * what it can read from that file (inputs, outputs, batching).
 */
export async function autoCompleteConfig(config: ModelConfig, files: ModelFiles): Promise<ModelConfig> {
  let completed = config;
  if (!config.backend && !config.platform) {
    const detected = await engineOfModelFile(files);
    if (detected === undefined) return config;
    completed = { ...config, backend: detected.name };
  }
  const name = selectedEngine(completed);
  const description: EngineDescription<unknown> | undefined = name === undefined ? undefined : ENGINES[name];
  return description?.completeConfig === undefined ? completed : description.completeConfig(completed, files);
}

async function engineOfModelFile(files: ModelFiles): Promise<EngineDescription<unknown> | undefined> {
  const latest = files.versions[files.versions.length - 1];
  if (latest === undefined) return undefined;
  for (const description of Object.values(ENGINES) as EngineDescription<unknown>[]) {
    if (description.modelFileName === undefined) continue;
    const found = await access(join(files.folder, String(latest), description.modelFileName)).then(
      () => true,
      () => false,
    );
    if (found) return description;
  }
  return undefined;
}

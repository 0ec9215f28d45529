import type { ModelFiles } from "../../../lib/model-repository/sources.js";
import { access } from "node:fs/promises";
import { join } from "node:path";
import type { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import { ConfigError } from "../../../lib/model-repository/config.js";
import type { ModelSpec } from "../../../lib/model-repository/spec.js";
import { DEFAULT_ENGINE_RUNTIME, type Engine, type EngineFactory, type EngineRuntime } from "./engine.js";
import { identityEngineFactory } from "./identity/identity.js";
import { kserveGrpcEngineFactory } from "./kserve-grpc/kserve-grpc.js";
import { mockerEngineFactory } from "./mocker/mocker.js";
import { onnxEngineFactories } from "./onnx/onnx.js";
import { openAiEngineFactory } from "./openai/openai.js";
import { repeatEngineFactory } from "./repeat/repeat.js";

/** Every engine this data plane can run, by the `backend` name that selects it. */
const FACTORIES: ReadonlyMap<string, EngineFactory> = new Map(
  [
    identityEngineFactory,
    repeatEngineFactory,
    mockerEngineFactory,
    kserveGrpcEngineFactory,
    openAiEngineFactory,
    ...onnxEngineFactories,
  ].map((factory) => [factory.backend, factory]),
);

export const SUPPORTED_BACKENDS: readonly string[] = [...FACTORIES.keys()];

/**
 * Checks that a model can run on its engine without running it (the operator validates
 * configs this way). Engines do no I/O when created; they connect on first use.
 */
export function checkEngine(spec: ModelSpec, source: string): void {
  void createEngine(spec, source).close();
}

/** Creates the engine a model's config asks for, or throws a ConfigError naming the choices. */
export function createEngine(
  spec: ModelSpec,
  source: string,
  files?: ModelFiles,
  runtime: EngineRuntime = DEFAULT_ENGINE_RUNTIME,
): Engine {
  const engine = engineName(spec.parameters["engine"], spec.backend);
  const factory = FACTORIES.get(engine);
  if (factory === undefined) {
    const field = spec.parameters["engine"] !== undefined ? 'parameters["engine"]' : "backend";
    throw new ConfigError(
      source,
      `${field}: '${engine}' is not supported by this data plane; supported engines: ${SUPPORTED_BACKENDS.join(", ")}`,
    );
  }
  return factory.create(spec, source, files, runtime);
}

/**
 * parameters["engine"] lets a Triton config keep its own backend (e.g. "python") and
 * still say how this data plane runs it (e.g. "kserve-grpc": forward to that Triton).
 */
const engineName = (engineParameter: string | undefined, backend: string): string => engineParameter ?? backend;

/**
 * Whether this data plane runs a Triton config itself: its `engine` parameter, or its
 * backend or platform, names one of our engines. Others (python, pytorch_libtorch,
 * tensorflow, tensorrt, ensembles, ...) are forwarded to a Triton (forwardedConfig); the
 * data plane's --forward-unsupported and `migrate` apply the same rule.
 */
export function runsLocally(config: ModelConfig): boolean {
  if (config.parameters["engine"] !== undefined) return true;
  return FACTORIES.has(config.backend) || FACTORIES.has(config.platform);
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
      engine: { stringValue: kserveGrpcEngineFactory.backend },
      upstream: { stringValue: upstream },
    },
  };
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
    completed = { ...config, backend: detected.backend };
  }
  const parameter = completed.parameters["engine"]?.stringValue;
  const factory = FACTORIES.get(engineName(parameter, completed.backend || completed.platform));
  return factory?.completeConfig === undefined ? completed : factory.completeConfig(completed, files);
}

async function engineOfModelFile(files: ModelFiles): Promise<EngineFactory | undefined> {
  const latest = files.versions[files.versions.length - 1];
  if (latest === undefined) return undefined;
  for (const factory of FACTORIES.values()) {
    if (factory.modelFileName === undefined) continue;
    const found = await access(join(files.folder, String(latest), factory.modelFileName)).then(
      () => true,
      () => false,
    );
    if (found) return factory;
  }
  return undefined;
}

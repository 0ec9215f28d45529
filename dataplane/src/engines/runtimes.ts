import { engineOf, engineSettings, type EngineName, type SettingsOf } from "../../../lib/engines/catalog.js";
import type { ModelFiles } from "../../../lib/model-repository/sources.js";
import type { ModelSpec } from "../../../lib/model-repository/spec.js";
import type { Engine, EngineRuntime } from "./engine.js";
import { EnsembleEngine } from "./ensemble/ensemble.js";
import { IdentityEngine } from "./identity/identity.js";
import { KserveGrpcEngine } from "./kserve-grpc/kserve-grpc.js";
import { MockerEngine } from "./mocker/mocker.js";
import { OnnxEngine } from "./onnx/onnx.js";
import { OpenAiEngine } from "./openai/openai.js";
import { PythonEngine } from "./python/python.js";
import { RepeatEngine } from "./repeat/repeat.js";

/** What an engine's runtime is built from: its checked settings, where its files are, the process's limits. */
type RuntimeOf<Name extends EngineName> = (
  settings: SettingsOf<Name>,
  files: ModelFiles | undefined,
  runtime: EngineRuntime,
) => Engine;

/** The runtime of every engine in the catalog (lib/engines/catalog.ts): the compiler holds the two lists together. */
const RUNTIMES: { readonly [Name in EngineName]: RuntimeOf<Name> } = {
  identity: (settings) => new IdentityEngine(settings),
  repeat: (settings) => new RepeatEngine(settings),
  mocker: (settings) => new MockerEngine(settings),
  "kserve-grpc": (settings, _files, runtime) => new KserveGrpcEngine({ ...settings, runtime }),
  openai: (settings) => new OpenAiEngine(settings),
  onnxruntime: (settings, files) => new OnnxEngine(settings, files),
  python: (settings, files, runtime) => new PythonEngine(settings, files, runtime),
  ensemble: (settings, _files, runtime) => new EnsembleEngine(settings, runtime),
};

/**
 * Creates the engine a model's config asks for, or throws a ConfigError naming the
 * choices. Creating one does no I/O: engines connect and load on first use.
 */
export function createEngine(
  spec: ModelSpec,
  source: string,
  files: ModelFiles | undefined,
  runtime: EngineRuntime,
): Engine {
  return build(engineOf(spec, source), spec, source, files, runtime);
}

function build<Name extends EngineName>(
  name: Name,
  spec: ModelSpec,
  source: string,
  files: ModelFiles | undefined,
  runtime: EngineRuntime,
): Engine {
  return RUNTIMES[name](engineSettings(name, spec, source), files, runtime);
}

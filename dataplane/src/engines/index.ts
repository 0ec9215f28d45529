import { ConfigError } from "../models/config.js";
import type { ModelSpec } from "../models/spec.js";
import type { Engine, EngineFactory } from "./engine.js";
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
export function createEngine(spec: ModelSpec, source: string): Engine {
  // parameters["engine"] lets a Triton config keep its own backend (e.g. "python") and
  // still say how this data plane runs it (e.g. "kserve-grpc": forward to that Triton).
  const engine = spec.parameters["engine"] ?? spec.backend;
  const factory = FACTORIES.get(engine);
  if (factory === undefined) {
    const field = spec.parameters["engine"] !== undefined ? 'parameters["engine"]' : "backend";
    throw new ConfigError(
      source,
      `${field}: '${engine}' is not supported by this data plane; supported engines: ${SUPPORTED_BACKENDS.join(", ")}`,
    );
  }
  return factory.create(spec, source);
}

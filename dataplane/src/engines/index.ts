import { ConfigError } from "../models/config.js";
import type { ModelSpec } from "../models/spec.js";
import type { Engine, EngineFactory } from "./engine.js";
import { identityEngineFactory } from "./identity/identity.js";
import { repeatEngineFactory } from "./repeat/repeat.js";

/** Every engine this data plane can run, by the `backend` name that selects it. */
const FACTORIES: ReadonlyMap<string, EngineFactory> = new Map(
  [identityEngineFactory, repeatEngineFactory].map((factory) => [factory.backend, factory]),
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
  const factory = FACTORIES.get(spec.backend);
  if (factory === undefined) {
    throw new ConfigError(
      source,
      `backend: '${spec.backend}' is not supported by this data plane; supported backends: ${SUPPORTED_BACKENDS.join(", ")}`,
    );
  }
  return factory.create(spec, source);
}

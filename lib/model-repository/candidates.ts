import { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { decoupledEnsembles, ensembleCycles, ensemblesToForward, type LocalSupport } from "../engines/catalog.js";
import { errorMessage } from "../errors.js";
import { ConfigError, parseModelConfig } from "./config.js";
import type { ModelFiles, ModelSource } from "./sources.js";

/** A parsed source: the model name it defines and its config, or why it could not be read. */
export interface Candidate {
  readonly name: string;
  readonly source: ModelSource;
  readonly config: ModelConfig | ConfigError;
  /**
   * What errors name as the config's place when it is not the file at `source.path` (a load
   * request's override): the source keeps its path, where engines find the model's files.
   */
  readonly origin?: string;
  /**
   * Set when its config was rewritten to forward it (--forward-unsupported): why no engine
   * here runs it (an ensemble: which step is forwarded, and why).
   */
  readonly forwardedBecause?: string;
}

/** --forward-unsupported: which configs this data plane cannot run, and the config that forwards one. */
export interface Forwarding {
  /** Whether this data plane runs the config (read from `source`), else why not (catalog.ts localSupport). */
  readonly runsHere: (config: ModelConfig, source: string) => LocalSupport;
  readonly forward: (config: ModelConfig) => ModelConfig;
}

/** How a source's config is completed and rewritten before it becomes a candidate. */
export interface CandidateOptions {
  /** Triton's auto-complete (config filled in from model files); undefined turns it off. */
  readonly completeConfig?: (config: ModelConfig, files: ModelFiles) => Promise<ModelConfig>;
  /** --forward-unsupported: the config of a model this data plane cannot run is rewritten so it is forwarded. */
  readonly forwardUnsupported?: Forwarding;
}

/**
 * Reads a model source as the registry does: parses its config (or auto-completes one from
 * the model files) and names the model; a config that cannot be read comes back as a
 * ConfigError with file, line and field. `migrate` reads repositories with it too.
 */
export async function parseCandidate(
  source: ModelSource,
  { completeConfig: complete, forwardUnsupported }: CandidateOptions,
): Promise<Candidate> {
  if (source.unreadable !== undefined) {
    return {
      name: source.nameHint,
      source,
      config: new ConfigError(source.path, `cannot be read: ${source.unreadable}`),
    };
  }
  try {
    let config: ModelConfig;
    if (source.content !== undefined && source.format !== undefined) {
      config = parseModelConfig(source.content, source.format, source.path);
    } else if (complete !== undefined && source.folder !== undefined) {
      config = ModelConfig.fromPartial({});
    } else {
      const detail = "no config.pbtxt (or config.pb) found; this data plane needs a configuration for every model";
      return { name: source.nameHint, source, config: new ConfigError(source.path, detail) };
    }
    if (complete !== undefined && source.folder !== undefined) {
      config = await complete(config, { folder: source.folder, versions: source.versions });
      if (!config.backend && !config.platform && source.content === undefined) {
        const detail =
          "no config.pbtxt (or config.pb) found, and no model file to auto-complete one from (e.g. 1/model.onnx)";
        return { name: source.nameHint, source, config: new ConfigError(source.path, detail) };
      }
    }
    const support = forwardUnsupported?.runsHere(config, source.path) ?? { runsHere: true };
    if (!support.runsHere) config = forwardUnsupported!.forward(config);
    const name = source.nameFixed ? source.nameHint : config.name || source.nameHint;
    return { name, source, config, ...(support.runsHere ? {} : { forwardedBecause: support.reason }) };
  } catch (error) {
    const config = error instanceof ConfigError ? error : new ConfigError(source.path, errorMessage(error));
    return { name: source.nameHint, source, config };
  }
}

/**
 * What a repository's ensembles take from their steps, once every candidate is read:
 * an ensemble with a forwarded step is forwarded too (--forward-unsupported: the Triton
 * runs the whole of it), one with a decoupled step is decoupled, as Triton marks it, and
 * ensembles that run each other in a cycle are refused (each would wait for the other).
 */
export function completeEnsembles(candidates: readonly Candidate[], forwarding: Forwarding | undefined): Candidate[] {
  const configs = new Map<string, ModelConfig>();
  for (const candidate of candidates)
    if (!(candidate.config instanceof ConfigError)) configs.set(candidate.name, candidate.config);
  const reasons = new Map(candidates.map(({ name, forwardedBecause }) => [name, forwardedBecause]));
  const forwarded =
    forwarding === undefined ? new Map<string, string>() : ensemblesToForward(configs, (name) => reasons.get(name));
  const decoupled = decoupledEnsembles(configs);
  const cycles = ensembleCycles(configs);
  return candidates.map((candidate) => {
    const cycle = cycles.get(candidate.name);
    if (cycle !== undefined) {
      const detail = `ensemble_scheduling.step: ensembles run each other in a cycle: ${cycle.join(" -> ")}`;
      return { ...candidate, config: new ConfigError(candidate.origin ?? candidate.source.path, detail) };
    }
    const reason = forwarded.get(candidate.name);
    if (forwarding !== undefined && reason !== undefined && !(candidate.config instanceof ConfigError)) {
      return { ...candidate, config: forwarding.forward(candidate.config), forwardedBecause: reason };
    }
    const marked = decoupled.get(candidate.name);
    return marked === undefined ? candidate : { ...candidate, config: marked };
  });
}

import { ModelConfig } from "../../proto/gen/ts/model_config.js";
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
}

/** How a source's config is completed and rewritten before it becomes a candidate. */
export interface CandidateOptions {
  /** Triton's auto-complete (config filled in from model files); undefined turns it off. */
  readonly completeConfig?: (config: ModelConfig, files: ModelFiles) => Promise<ModelConfig>;
  /** --forward-unsupported: rewrites the config of a model this data plane cannot run so it is forwarded. */
  readonly forwardUnsupported?: (config: ModelConfig) => ModelConfig;
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
    if (forwardUnsupported !== undefined) config = forwardUnsupported(config);
    const name = source.nameFixed ? source.nameHint : config.name || source.nameHint;
    return { name, source, config };
  } catch (error) {
    const config = error instanceof ConfigError ? error : new ConfigError(source.path, errorMessage(error));
    return { name: source.nameHint, source, config };
  }
}

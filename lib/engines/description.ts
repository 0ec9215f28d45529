import type { ModelConfig } from "../../proto/gen/ts/model_config.js";
import type { ModelFiles } from "../model-repository/sources.js";
import type { ModelSpec } from "../model-repository/spec.js";

/**
 * What is known of an engine without running it: the names that select it, the model file
 * it runs, and how a model's config is checked for it. The data plane's runtime for the
 * engine (dataplane/src/engines/<name>/) is built from the settings `settings` returns;
 * the operator and `migrate` use only this.
 */
export interface EngineDescription<Settings> {
  /** The `backend` value (or `parameters["engine"]`) that selects this engine. */
  readonly name: string;
  /** Other values that select it, e.g. the `platform` a Triton config uses for the same backend. */
  readonly aliases?: readonly string[];
  /**
   * Whether the data plane schedules its models' requests (Triton's dynamic batching, queue
   * policies, priorities, instance counts and warmup: lib/model-repository/scheduling.ts):
   * engines that run models here. False for engines in front of another server (which
   * schedules them itself) and for ensembles (whose steps are scheduled by their models).
   */
  readonly scheduled: boolean;
  /**
   * Whether it makes the config's `batch_input` tensors for a batch (Triton's ragged
   * batching); a scheduled engine that does not has a config naming them refused.
   */
  readonly makesBatchInputs?: boolean;
  /**
   * Why its models cannot have implicit sequence state (`sequence_batching.state`), where the
   * reason is the engine's own; else the catalog's (this data plane does not hold it yet).
   * A scheduled engine refuses such a model as UnsupportedFeature (--forward-unsupported
   * forwards it).
   */
  readonly implicitState?: string;
  /** The model file it runs (e.g. model.onnx): a config without backend gets this engine when the file is there. */
  readonly modelFileName?: string;
  /**
   * Checks a model's config for this engine, with no I/O, and returns what the runtime
   * needs. Throws a ConfigError naming the field.
   */
  settings(spec: ModelSpec, source: string): Settings;
  /** Fills in what the config leaves out from the model file (Triton's auto-complete). May read files. */
  completeConfig?(config: ModelConfig, files: ModelFiles): Promise<ModelConfig>;
}

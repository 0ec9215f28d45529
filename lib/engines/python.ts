import { dirname } from "node:path";
import { ModelInstanceGroup_Kind, type ModelConfig, type ModelVersionPolicy } from "../../proto/gen/ts/model_config.js";
import { ConfigError, tritonConfigJson } from "../model-repository/config.js";
import type { EngineDescription } from "./description.js";
import type { TensorSpec } from "../model-repository/spec.js";

/**
 * Triton's Python backend (`backend: "python"`): the model is a `model.py` with a
 * `TritonPythonModel` class in each version folder, hosted by the data plane in Python
 * processes of its own (one per instance of `instance_group`), with a
 * triton_python_backend_utils module of the same API.
 */

const PYTHON_BACKEND = "python";
const MODEL_FILE = "model.py";

/** The model's Python file in each version folder: `default_model_filename`, else model.py (as Triton). */
export const pythonModelFileName = (config: ModelConfig): string => config.defaultModelFilename || MODEL_FILE;

/** Triton's dynamic batcher, as the Python process applies it to the requests it receives. */
export interface PythonBatching {
  readonly max_batch_size: number;
  readonly preferred_batch_size: readonly number[];
  readonly max_queue_delay_microseconds: number;
}

export interface PythonSettings {
  readonly modelName: string;
  readonly fileName: string;
  /** Where the version folders are when the model has no files folder: next to its config. */
  readonly configFolder: string;
  /** Python processes per served version: the instance groups' counts added up. */
  readonly instances: readonly { readonly name: string; readonly kind: "CPU" | "GPU" | "MODEL" }[];
  readonly decoupled: boolean;
  readonly maxBatchSize: number;
  /** Set when the config has `dynamic_batching`: several requests per execute call. */
  readonly batching: PythonBatching | undefined;
  readonly versionPolicy: ModelVersionPolicy | undefined;
  /** The config as Triton gives it to initialize (`args["model_config"]`): JSON text. */
  readonly modelConfig: string;
  /** The declared outputs, what the model returns is checked against: an output with a reshape is returned in that shape. */
  readonly outputs: readonly TensorSpec[];
}

const KIND_NAME: Partial<Record<ModelInstanceGroup_Kind, "CPU" | "GPU" | "MODEL">> = {
  [ModelInstanceGroup_Kind.KIND_AUTO]: "CPU",
  [ModelInstanceGroup_Kind.KIND_CPU]: "CPU",
  // Python models run on the CPU here; a GPU group is kept (its model code may not care).
  [ModelInstanceGroup_Kind.KIND_GPU]: "GPU",
  [ModelInstanceGroup_Kind.KIND_MODEL]: "MODEL",
};

/** More Python processes than this per version is a mistake in the config, not a plan. */
const MAX_INSTANCES = 64;

/** A day: longer is a mistake, and past Python's timer range (the process overflowed on every batch). */
const MAX_QUEUE_DELAY_MICROSECONDS = 86_400_000_000n;

export const pythonEngine: EngineDescription<PythonSettings> = {
  name: PYTHON_BACKEND,
  scheduled: true,
  modelFileName: MODEL_FILE,
  settings(spec, source) {
    const { config } = spec;
    const groups = config.instanceGroup.length > 0 ? config.instanceGroup : [undefined];
    const counts = groups.map((group) => Math.max(1, group?.count ?? 1) * Math.max(1, group?.gpus.length ?? 1));
    // Added up before any is built: a count of 2^31-1 must be refused, not allocated.
    const total = counts.reduce((sum, count) => sum + count, 0);
    if (total > MAX_INSTANCES) {
      throw new ConfigError(
        source,
        `instance_group: ${total} instances; the python engine starts one process each, at most ${MAX_INSTANCES}`,
      );
    }
    const instances: { name: string; kind: "CPU" | "GPU" | "MODEL" }[] = [];
    groups.forEach((group, index) => {
      const kind = KIND_NAME[group?.kind ?? ModelInstanceGroup_Kind.KIND_AUTO];
      if (kind === undefined) throw new ConfigError(source, `instance_group[${index}].kind: not a known kind`);
      // As Triton names them: the group's name (default <model>_<index>), then _<instance> when it has several.
      const groupName = group?.name || `${spec.name}_${index}`;
      const count = counts[index]!;
      for (let instance = 0; instance < count; instance++) {
        instances.push({ name: count > 1 ? `${groupName}_${instance}` : groupName, kind });
      }
    });
    if (
      config.schedulingChoice?.$case === "sequenceBatching" ||
      config.schedulingChoice?.$case === "ensembleScheduling"
    ) {
      const field = config.schedulingChoice.$case === "sequenceBatching" ? "sequence_batching" : "ensemble_scheduling";
      throw new ConfigError(source, `${field}: not supported by the python engine`);
    }
    const dynamic = config.schedulingChoice?.$case === "dynamicBatching" ? config.schedulingChoice.value : undefined;
    if (dynamic !== undefined && dynamic.maxQueueDelayMicroseconds > MAX_QUEUE_DELAY_MICROSECONDS) {
      throw new ConfigError(
        source,
        `dynamic_batching.max_queue_delay_microseconds: ${dynamic.maxQueueDelayMicroseconds} is past what a batch may wait, at most ${MAX_QUEUE_DELAY_MICROSECONDS} (a day)`,
      );
    }
    return {
      modelName: spec.name,
      fileName: pythonModelFileName(config),
      configFolder: dirname(source),
      instances,
      decoupled: spec.decoupled,
      maxBatchSize: spec.maxBatchSize,
      batching:
        dynamic !== undefined && spec.maxBatchSize > 0
          ? {
              max_batch_size: spec.maxBatchSize,
              preferred_batch_size: dynamic.preferredBatchSize,
              max_queue_delay_microseconds: Number(dynamic.maxQueueDelayMicroseconds),
            }
          : undefined,
      versionPolicy: config.versionPolicy,
      modelConfig: JSON.stringify(tritonConfigJson({ ...config, name: spec.name })),
      outputs: spec.outputs.map((output, index) => {
        const reshape = config.output[index]?.reshape;
        return reshape === undefined ? output : { ...output, dims: reshape.shape.map(Number) };
      }),
    };
  },
};

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

export interface PythonSettings {
  readonly modelName: string;
  readonly fileName: string;
  /** Where the version folders are when the model has no files folder: next to its config. */
  readonly configFolder: string;
  /**
   * Python processes per served version, in the order of the scheduler's instance numbers:
   * the instance groups' counts added up (bounded by spec.scheduling's check).
   */
  readonly instances: readonly { readonly name: string; readonly kind: "CPU" | "GPU" | "MODEL" }[];
  readonly decoupled: boolean;
  /** Returned outputs are checked with the batch dimension when it is above 0. */
  readonly maxBatchSize: number;
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

export const pythonEngine: EngineDescription<PythonSettings> = {
  name: PYTHON_BACKEND,
  scheduled: true,
  // Triton's own Python backend gives a model no state either (its docs name the onnxruntime,
  // TensorRT and PyTorch backends); a model keeps its own, by sequence.
  implicitState:
    "Triton's Python backend does not support implicit state (Triton's docs: the onnxruntime, TensorRT and PyTorch backends only); keep the state in the model, keyed by request.correlation_id()",
  modelFileName: MODEL_FILE,
  settings(spec, source) {
    const { config } = spec;
    const groups = config.instanceGroup.length > 0 ? config.instanceGroup : [undefined];
    // Bounded already: spec.scheduling refused a total past MAX_INSTANCES before anything is built.
    const counts = groups.map((group) => Math.max(1, group?.count ?? 1) * Math.max(1, group?.gpus.length ?? 1));
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
    return {
      modelName: spec.name,
      fileName: pythonModelFileName(config),
      configFolder: dirname(source),
      instances,
      decoupled: spec.decoupled,
      maxBatchSize: spec.maxBatchSize,
      versionPolicy: config.versionPolicy,
      modelConfig: JSON.stringify(tritonConfigJson({ ...config, name: spec.name })),
      outputs: spec.outputs.map((output, index) => {
        const reshape = config.output[index]?.reshape;
        return reshape === undefined ? output : { ...output, dims: reshape.shape.map(Number) };
      }),
    };
  },
};

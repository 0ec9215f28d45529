import { dirname, join } from "node:path";
import { ModelDynamicBatching, ModelInput, ModelOutput, type ModelConfig } from "../../proto/gen/ts/model_config.js";
import { ConfigError } from "../model-repository/config.js";
import { DATATYPES } from "../model-repository/datatypes.js";
import { readOnnxTensors, type OnnxTensor } from "../model-repository/onnx-model.js";
import type { ModelFiles } from "../model-repository/sources.js";
import type { EngineDescription } from "./description.js";

/**
 * Triton's `onnxruntime` backend / `onnxruntime_onnx` platform: the model file is
 * `<model folder>/<version>/model.onnx` (or `default_model_filename`), run in-process by
 * the data plane. A tensor's `reshape` is applied as Triton does.
 */

const ONNX_FILE = "model.onnx";
const ONNX_PLATFORM = "onnxruntime_onnx";
const ONNX_BACKEND = "onnxruntime";

/** Triton's `--backend-config=default-max-batch-size`, 4 unless set. */
const DEFAULT_MAX_BATCH_SIZE = 4;

/**
 * A tensor's `reshape`: the model sees `model` where clients see `client` (both without
 * the batch dimension; -1 stands for the rest of the elements).
 */
export interface Reshape {
  readonly client: readonly number[];
  readonly model: readonly number[];
}

export interface OnnxSettings {
  readonly fileName: string;
  readonly outputNames: readonly string[];
  /** Whether the first dimension is the batch (max_batch_size > 0): reshape keeps it. */
  readonly batched: boolean;
  readonly reshapes: ReadonlyMap<string, Reshape>;
  /** Where the version folders are when the model has no files folder: next to its config. */
  readonly configFolder: string;
}

export const onnxEngine: EngineDescription<OnnxSettings> = {
  name: ONNX_BACKEND,
  scheduled: true,
  aliases: [ONNX_PLATFORM],
  modelFileName: ONNX_FILE,
  settings(spec, source) {
    const reshapes = new Map<string, Reshape>();
    for (const tensor of [...spec.config.input, ...spec.config.output]) {
      if (tensor.reshape === undefined) continue;
      reshapes.set(tensor.name, { client: tensor.dims.map(Number), model: tensor.reshape.shape.map(Number) });
    }
    return {
      fileName: spec.config.defaultModelFilename || ONNX_FILE,
      outputNames: spec.outputs.map((output) => output.name),
      batched: spec.maxBatchSize > 0,
      reshapes,
      configFolder: dirname(source),
    };
  },
  completeConfig: completeOnnxConfig,
};

/**
 * Triton's auto-complete for ONNX models: what config.pbtxt leaves out (inputs, outputs,
 * max_batch_size) is read from the model file, as Triton's onnxruntime backend does.
 *  - An empty `input` (or `output`) list is filled with every model input (output); a
 *    list the config gives is kept as it is (onnxruntime checks it at run time).
 *  - A model whose tensors all have a dynamic first dimension can batch: with
 *    max_batch_size 0 and no tensors declared it gets Triton's default of 4 and a dynamic
 *    batcher; with max_batch_size > 0 that first dimension is the batch.
 */
async function completeOnnxConfig(given: ModelConfig, files: ModelFiles): Promise<ModelConfig> {
  // As Triton normalizes them: the platform and the backend name each other.
  const config = { ...given, platform: given.platform || ONNX_PLATFORM, backend: given.backend || ONNX_BACKEND };
  if (config.input.length > 0 && config.output.length > 0) return config;
  const version = files.versions[files.versions.length - 1];
  const fileName = config.defaultModelFilename || ONNX_FILE;
  if (version === undefined) {
    throw new ConfigError(
      files.folder,
      `auto-complete needs the model file: no version folder (e.g. 1/${fileName}) found; add one or declare input and output in config.pbtxt`,
    );
  }
  const path = join(files.folder, String(version), fileName);
  const { inputs, outputs } = await readOnnxTensors(path);
  const all = [...inputs, ...outputs];
  const canBatch = all.length > 0 && all.every((tensor) => tensor.dims.length > 0 && tensor.dims[0] === -1);
  const declaresNone = config.input.length === 0 && config.output.length === 0;
  let maxBatchSize = config.maxBatchSize;
  let schedulingChoice = config.schedulingChoice;
  if (maxBatchSize === 0 && canBatch && declaresNone) {
    maxBatchSize = DEFAULT_MAX_BATCH_SIZE;
    schedulingChoice ??= { $case: "dynamicBatching", value: ModelDynamicBatching.fromPartial({}) };
  } else if (maxBatchSize > 0 && !canBatch) {
    throw new ConfigError(
      path,
      `max_batch_size: ${maxBatchSize}, but not every input and output of the model has a dynamic first (batch) dimension; set max_batch_size: 0`,
    );
  }
  const declared = (tensor: OnnxTensor, kind: "input" | "output") => {
    const dims = maxBatchSize > 0 ? tensor.dims.slice(1) : tensor.dims;
    if (dims.length === 0) {
      throw new ConfigError(
        path,
        `${kind} '${tensor.name}' is a scalar${maxBatchSize > 0 ? " per batch item" : ""}; declare it in config.pbtxt (dims: [ 1 ] with reshape: { shape: [ ] })`,
      );
    }
    if (tensor.datatype === undefined) {
      throw new ConfigError(
        path,
        `tensor '${tensor.name}' has ONNX type ${tensor.elementType}, which has no Triton data_type`,
      );
    }
    return { name: tensor.name, dataType: DATATYPES[tensor.datatype].configType, dims: dims.map(BigInt) };
  };
  const input =
    config.input.length > 0 ? config.input : inputs.map((tensor) => ModelInput.fromPartial(declared(tensor, "input")));
  const output =
    config.output.length > 0
      ? config.output
      : outputs.map((tensor) => ModelOutput.fromPartial(declared(tensor, "output")));
  return { ...config, maxBatchSize, schedulingChoice, input, output };
}

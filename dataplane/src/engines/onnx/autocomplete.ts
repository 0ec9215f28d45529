import { join } from "node:path";
import { InferenceSession } from "onnxruntime-node";
import {
  ModelDynamicBatching,
  ModelInput,
  ModelOutput,
  type DataType,
  type ModelConfig,
} from "../../../../proto/gen/ts/model_config.js";
import { errorMessage } from "../../../../lib/errors.js";
import { ConfigError } from "../../../../lib/model-repository/config.js";
import { DATATYPES } from "../../../../lib/model-repository/datatypes.js";
import type { ModelFiles } from "../../../../lib/model-repository/sources.js";
import { DATATYPE_OF_ORT } from "./types.js";

/**
 * Triton's auto-complete for ONNX models: what config.pbtxt leaves out (inputs, outputs,
 * max_batch_size) is read from the model file, as Triton's onnxruntime backend does.
 *  - An empty `input` (or `output`) list is filled with every model input (output);
 *    a list the config gives is kept as it is (onnxruntime checks it at run time).
 *  - A model whose tensors all have a dynamic first dimension can batch: with
 *    max_batch_size 0 and no tensors declared it gets Triton's default of 4 and a
 *    dynamic batcher; with max_batch_size > 0 that first dimension is the batch.
 */

/** Triton's `--backend-config=default-max-batch-size`, 4 unless set. */
export const DEFAULT_MAX_BATCH_SIZE = 4;

const ONNX_FILE = "model.onnx";
const ONNX_PLATFORM = "onnxruntime_onnx";
const ONNX_BACKEND = "onnxruntime";

interface TensorShape {
  readonly name: string;
  readonly type: string;
  /** -1 for a symbolic or unknown dimension. */
  readonly dims: readonly number[];
}

export async function completeOnnxConfig(given: ModelConfig, files: ModelFiles): Promise<ModelConfig> {
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
  const { inputs, outputs } = await readModelTensors(path);
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
  const toDims = (tensor: TensorShape, kind: string): bigint[] => {
    const dims = maxBatchSize > 0 ? tensor.dims.slice(1) : tensor.dims;
    if (dims.length === 0) {
      throw new ConfigError(
        path,
        `${kind} '${tensor.name}' is a scalar${maxBatchSize > 0 ? " per batch item" : ""}; declare it in config.pbtxt (dims: [ 1 ] with reshape: { shape: [ ] })`,
      );
    }
    return dims.map(BigInt);
  };
  const input =
    config.input.length > 0
      ? config.input
      : inputs.map((tensor) => inputOf(tensor.name, configType(tensor, path), toDims(tensor, "input")));
  const output =
    config.output.length > 0
      ? config.output
      : outputs.map((tensor) => outputOf(tensor.name, configType(tensor, path), toDims(tensor, "output")));
  return { ...config, maxBatchSize, schedulingChoice, input, output };
}

async function readModelTensors(path: string): Promise<{ inputs: TensorShape[]; outputs: TensorShape[] }> {
  let session: InferenceSession;
  try {
    session = await InferenceSession.create(path, { executionProviders: ["cpu"] });
  } catch (error) {
    throw new ConfigError(path, `cannot read the ONNX model to auto-complete its config: ${errorMessage(error)}`);
  }
  try {
    const describe = (value: InferenceSession.ValueMetadata): TensorShape => {
      if (!value.isTensor) {
        throw new ConfigError(path, `'${value.name}' is not a tensor; declare the model's tensors in config.pbtxt`);
      }
      const dims = value.shape.map((dim) => (typeof dim === "number" && dim >= 0 ? dim : -1));
      return { name: value.name, type: value.type, dims };
    };
    return { inputs: session.inputMetadata.map(describe), outputs: session.outputMetadata.map(describe) };
  } finally {
    await session.release();
  }
}

function configType(tensor: TensorShape, path: string): DataType {
  const datatype = DATATYPE_OF_ORT[tensor.type];
  if (datatype === undefined) {
    throw new ConfigError(path, `tensor '${tensor.name}' has ONNX type ${tensor.type}, which has no Triton data_type`);
  }
  return DATATYPES[datatype].configType;
}

const inputOf = (name: string, dataType: DataType, dims: bigint[]): ModelInput =>
  ModelInput.fromPartial({ name, dataType, dims });

const outputOf = (name: string, dataType: DataType, dims: bigint[]): ModelOutput =>
  ModelOutput.fromPartial({ name, dataType, dims });

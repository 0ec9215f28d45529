import { dirname, join } from "node:path";
import {
  BatchInput_Kind,
  DataType,
  ModelDynamicBatching,
  ModelInput,
  ModelInstanceGroup_Kind,
  ModelOutput,
  type ModelConfig,
} from "../../proto/gen/ts/model_config.js";
import { ConfigError } from "../model-repository/config.js";
import { DATATYPES } from "../model-repository/datatypes.js";
import { readOnnxTensors, type OnnxTensor } from "../model-repository/onnx-model.js";
import type { ModelFiles } from "../model-repository/sources.js";
import type { ModelSpec } from "../model-repository/spec.js";
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
  /** One entry per instance (instance_group's counts, spec.scheduling.instanceCount of them), in config order. */
  readonly instances: readonly OnnxInstance[];
  /** Inputs that allow a ragged batch: given to the model flattened, every request's elements joined. */
  readonly raggedInputs: ReadonlySet<string>;
  /** The config's `batch_input`: tensors the engine makes from a batch for the model. */
  readonly batchInputs: readonly BatchInputSpec[];
}

/** Where one instance runs: the CPU (KIND_CPU, KIND_AUTO, KIND_MODEL) or a GPU (KIND_GPU). */
export interface OnnxInstance {
  readonly device: { readonly kind: "cpu" } | { readonly kind: "gpu"; readonly id: number };
  /** The config field that asked for it (`instance_group[1]`), for errors at load. */
  readonly field: string;
}

/** Triton's batch input kinds (model_config.proto BatchInput.Kind), as the config spells them. */
export type BatchInputKind = keyof typeof BATCH_INPUT_KINDS;

const BATCH_INPUT_KINDS = {
  BATCH_ELEMENT_COUNT: BatchInput_Kind.BATCH_ELEMENT_COUNT,
  BATCH_ACCUMULATED_ELEMENT_COUNT: BatchInput_Kind.BATCH_ACCUMULATED_ELEMENT_COUNT,
  BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO: BatchInput_Kind.BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO,
  BATCH_MAX_ELEMENT_COUNT_AS_SHAPE: BatchInput_Kind.BATCH_MAX_ELEMENT_COUNT_AS_SHAPE,
  BATCH_ITEM_SHAPE: BatchInput_Kind.BATCH_ITEM_SHAPE,
  BATCH_ITEM_SHAPE_FLATTEN: BatchInput_Kind.BATCH_ITEM_SHAPE_FLATTEN,
} as const;

/** One `batch_input`: the model inputs `targetNames` all get the tensor `kind` derives from `sourceInput`. */
export interface BatchInputSpec {
  readonly kind: BatchInputKind;
  readonly targetNames: readonly string[];
  readonly datatype: "INT32" | "FP32";
  readonly sourceInput: string;
}

export const onnxEngine: EngineDescription<OnnxSettings> = {
  name: ONNX_BACKEND,
  scheduled: true,
  makesBatchInputs: true,
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
      instances: instancesOf(spec, source),
      raggedInputs: spec.scheduling.raggedInputs,
      batchInputs: batchInputsOf(spec, source),
    };
  },
  completeConfig: completeOnnxConfig,
};

/**
 * Every instance the config's instance groups ask for. KIND_AUTO is the CPU (Triton picks a GPU
 * when it has one; onnxruntime-node bundles no GPU provider), and KIND_MODEL too (the model
 * places itself: an ONNX graph has no say, so the CPU). A KIND_GPU group gets a GPU instance
 * per listed GPU (device 0 when it lists none); whether one can be used is known only when the
 * session is made (at start).
 */
function instancesOf(spec: ModelSpec, source: string): OnnxInstance[] {
  const groups = spec.config.instanceGroup;
  if (groups.length === 0) return [{ device: { kind: "cpu" }, field: "instance_group" }];
  const instances: OnnxInstance[] = [];
  groups.forEach((group, index) => {
    const field = `instance_group[${index}]`;
    const count = Math.max(1, group.count);
    if (group.kind === ModelInstanceGroup_Kind.KIND_GPU) {
      const gpus = group.gpus.length > 0 ? group.gpus : [0];
      for (const id of gpus)
        for (let copy = 0; copy < count; copy++) instances.push({ device: { kind: "gpu", id }, field });
      return;
    }
    if (!CPU_KINDS.has(group.kind)) throw new ConfigError(source, `${field}.kind: not a known kind`);
    if (group.gpus.length > 0 && group.kind === ModelInstanceGroup_Kind.KIND_CPU) {
      throw new ConfigError(
        source,
        `${field}.gpus: a KIND_CPU group lists no GPUs (set kind: KIND_GPU, or remove gpus)`,
      );
    }
    for (let copy = 0; copy < count * Math.max(1, group.gpus.length); copy++) {
      instances.push({ device: { kind: "cpu" }, field });
    }
  });
  return instances;
}

const CPU_KINDS: ReadonlySet<ModelInstanceGroup_Kind> = new Set([
  ModelInstanceGroup_Kind.KIND_AUTO,
  ModelInstanceGroup_Kind.KIND_CPU,
  ModelInstanceGroup_Kind.KIND_MODEL,
]);

/**
 * The config's `batch_input`, checked as Triton checks it (one source input, a declared one;
 * TYPE_INT32 or TYPE_FP32), and its `batch_output`, which this engine does not make: refused,
 * naming the field, rather than served with outputs the model does not expect.
 */
function batchInputsOf(spec: ModelSpec, source: string): BatchInputSpec[] {
  const fail = (field: string, detail: string): never => {
    throw new ConfigError(source, `${field}: ${detail}`);
  };
  if (spec.config.batchOutput.length > 0) {
    fail(
      "batch_output[0].kind",
      "BATCH_SCATTER_WITH_INPUT_SHAPE is not supported by the onnxruntime engine; remove batch_output (the model's output is then split by each request's batch size)",
    );
  }
  const declared = new Set(spec.inputs.map((input) => input.name));
  return spec.config.batchInput.map((batchInput, index) => {
    const field = `batch_input[${index}]`;
    const kind = (Object.keys(BATCH_INPUT_KINDS) as BatchInputKind[]).find(
      (name) => BATCH_INPUT_KINDS[name] === batchInput.kind,
    );
    if (kind === undefined)
      fail(
        `${field}.kind`,
        `kind ${batchInput.kind} is not one this engine makes (${Object.keys(BATCH_INPUT_KINDS).join(", ")})`,
      );
    if (batchInput.targetName.length === 0 || batchInput.targetName.some((name) => name === "")) {
      fail(`${field}.target_name`, "name the model input(s) it makes");
    }
    const clash = batchInput.targetName.find((name) => declared.has(name));
    if (clash !== undefined)
      fail(`${field}.target_name`, `'${clash}' is a request input; a batch input is made by the engine`);
    if (batchInput.sourceInput.length !== 1) {
      fail(`${field}.source_input`, `${kind} derives from 1 source input, got ${batchInput.sourceInput.length}`);
    }
    const sourceInput = batchInput.sourceInput[0]!;
    if (!declared.has(sourceInput)) fail(`${field}.source_input`, `the model has no input '${sourceInput}'`);
    const datatype =
      batchInput.dataType === DataType.TYPE_INT32
        ? "INT32"
        : batchInput.dataType === DataType.TYPE_FP32
          ? "FP32"
          : undefined;
    if (datatype === undefined) fail(`${field}.data_type`, "a batch input is TYPE_INT32 or TYPE_FP32");
    return { kind: kind!, targetNames: batchInput.targetName, datatype: datatype!, sourceInput };
  });
}

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

import { readFile } from "node:fs/promises";
import { ModelProto, type ValueInfoProto } from "../../proto/gen/ts/onnx/onnx_graph.js";
import { errorMessage } from "../errors.js";
import { ConfigError } from "./config.js";
import type { Datatype } from "./datatypes.js";

/**
 * What a model.onnx says of its graph's inputs and outputs, read from the file itself
 * (the ONNX protobuf, only the fields that tell tensors) so that auto-complete needs no
 * onnxruntime: the operator and `migrate` read models without loading a runtime.
 */

export interface OnnxTensor {
  readonly name: string;
  /** The KServe datatype of its element type; undefined for one Triton cannot declare. */
  readonly datatype: Datatype | undefined;
  /** The ONNX element type's name, for messages (e.g. FLOAT, COMPLEX64). */
  readonly elementType: string;
  /** -1 for a symbolic or unknown dimension. */
  readonly dims: readonly number[];
}

/**
 * ONNX's TensorProto.DataType values (onnx.proto) with the KServe datatype each maps to.
 * BFLOAT16 is left without one: onnxruntime-node cannot take such tensors.
 */
const ELEMENT_TYPES: Readonly<Record<number, [string, Datatype | undefined]>> = {
  1: ["FLOAT", "FP32"],
  2: ["UINT8", "UINT8"],
  3: ["INT8", "INT8"],
  4: ["UINT16", "UINT16"],
  5: ["INT16", "INT16"],
  6: ["INT32", "INT32"],
  7: ["INT64", "INT64"],
  8: ["STRING", "BYTES"],
  9: ["BOOL", "BOOL"],
  10: ["FLOAT16", "FP16"],
  11: ["DOUBLE", "FP64"],
  12: ["UINT32", "UINT32"],
  13: ["UINT64", "UINT64"],
  14: ["COMPLEX64", undefined],
  15: ["COMPLEX128", undefined],
  16: ["BFLOAT16", undefined],
};

/**
 * The graph's inputs (those a request feeds: an input with an initializer of its name
 * has a default and is left out, as onnxruntime reports them) and outputs.
 */
export async function readOnnxTensors(path: string): Promise<{ inputs: OnnxTensor[]; outputs: OnnxTensor[] }> {
  let graph: ModelProto["graph"];
  try {
    graph = ModelProto.decode(await readFile(path)).graph;
  } catch (error) {
    throw new ConfigError(path, `cannot read the ONNX model to auto-complete its config: ${errorMessage(error)}`);
  }
  if (graph === undefined || graph.output.length === 0) {
    throw new ConfigError(path, "cannot read the ONNX model to auto-complete its config: it has no graph outputs");
  }
  const initialized = new Set(graph.initializer.map((tensor) => tensor.name));
  const describe = (value: ValueInfoProto): OnnxTensor => {
    const type = value.type?.value;
    if (type?.$case !== "tensorType") {
      throw new ConfigError(path, `'${value.name}' is not a tensor; declare the model's tensors in config.pbtxt`);
    }
    const [elementType, datatype] = ELEMENT_TYPES[type.value.elemType] ?? [`type ${type.value.elemType}`, undefined];
    const dims = (type.value.shape?.dim ?? []).map((dim) =>
      dim.value?.$case === "dimValue" && dim.value.value >= 0n ? Number(dim.value.value) : -1,
    );
    return { name: value.name, datatype, elementType, dims };
  };
  return {
    inputs: graph.input.filter((input) => !initialized.has(input.name)).map(describe),
    outputs: graph.output.map(describe),
  };
}

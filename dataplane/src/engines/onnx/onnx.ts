import { stat } from "node:fs/promises";
import { join } from "node:path";
import { InferenceSession, Tensor as OrtTensor } from "onnxruntime-node";
import type { OnnxSettings, Reshape } from "../../../../lib/engines/onnx.js";
import { abortedError, errorMessage, internal, unavailable } from "../../../../lib/errors.js";
import type { ModelFiles } from "../../../../lib/model-repository/sources.js";
import { joinBytesElements, splitBytesElements } from "../../tensors/bytes.js";
import { elementCount, type Tensor } from "../../tensors/tensor.js";
import type { Engine, EngineRequest, EngineResponse, InferOptions } from "../engine.js";
import { ARRAY_OF, DATATYPE_OF_ORT, ORT_TYPE, type NumericArray, type NumericArrayConstructor } from "./types.js";

/**
 * Triton's `onnxruntime` backend / `onnxruntime_onnx` platform, run in-process on the
 * CPU with onnxruntime-node. The model file is `<model folder>/<version>/model.onnx` (or
 * the config's `default_model_filename`); a session is created per served version on its
 * first request, so creating the engine does no I/O. Its start checks that each served
 * version's model file is there (as Triton's load does), so a config without its model file
 * never reports READY.
 */

export class OnnxEngine implements Engine {
  private readonly sessions = new Map<string, Promise<InferenceSession>>();
  /** Where the version folders are: the model's files folder, else next to its config. */
  private readonly modelDir: string;
  private readonly fileName: string;
  private readonly outputNames: readonly string[];
  private readonly batched: boolean;
  private readonly reshapes: ReadonlyMap<string, Reshape>;

  /** The versions the model serves (checked at start); none known for a model without a files folder. */
  private readonly served: readonly string[];

  constructor(settings: OnnxSettings, files: ModelFiles | undefined) {
    this.modelDir = files?.folder ?? settings.configFolder;
    this.served = files?.served ?? [];
    ({
      fileName: this.fileName,
      outputNames: this.outputNames,
      batched: this.batched,
      reshapes: this.reshapes,
    } = settings);
  }

  async start(): Promise<void> {
    for (const version of this.served) {
      const path = join(this.modelDir, version, this.fileName);
      const info = await stat(path).catch(() => undefined);
      if (!info?.isFile())
        throw unavailable(`version ${version} has no model file: ${path} ${info ? "is not a file" : "does not exist"}`);
    }
  }

  async *infer(request: EngineRequest, { signal }: InferOptions): AsyncIterable<EngineResponse> {
    const session = await this.session(request.version);
    if (signal.aborted) throw abortedError(signal);
    const feeds = Object.fromEntries(
      request.inputs.map((tensor) => [tensor.name, toOrt(tensor, this.shapeFor(tensor, "model"))]),
    );
    const wanted = this.outputNames.filter(
      (name) => request.requestedOutputs.size === 0 || request.requestedOutputs.has(name),
    );
    let results: InferenceSession.OnnxValueMapType;
    try {
      results = await session.run(feeds, wanted as string[]);
    } catch (error) {
      throw internal(`onnxruntime failed: ${errorMessage(error)}`);
    }
    yield {
      outputs: wanted.map((name) => {
        const tensor = fromOrt(name, results[name] as OrtTensor);
        return { ...tensor, shape: this.shapeFor(tensor, "client") };
      }),
    };
  }

  /** A tensor's shape as the model (inputs) or the client (outputs) sees it, after `reshape`. */
  private shapeFor(tensor: Tensor, side: "model" | "client"): readonly number[] {
    const reshape = this.reshapes.get(tensor.name);
    if (reshape === undefined) return tensor.shape;
    const batch = this.batched ? tensor.shape.slice(0, 1) : [];
    const perItem = elementCount(tensor.shape.slice(batch.length));
    return [...batch, ...resolveWildcard(reshape[side], perItem, tensor.name)];
  }

  async close(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    for (const session of sessions) await (await session.catch(() => undefined))?.release();
  }

  private session(version: string): Promise<InferenceSession> {
    let session = this.sessions.get(version);
    if (session === undefined) {
      const path = join(this.modelDir, version, this.fileName);
      session = InferenceSession.create(path, { executionProviders: ["cpu"] }).catch((error: unknown) => {
        this.sessions.delete(version);
        throw unavailable(`cannot load ONNX model ${path}: ${errorMessage(error)}`);
      });
      this.sessions.set(version, session);
    }
    return session;
  }
}

/** `dims` with its -1 (at most one) replaced so that it holds `elements` elements. */
function resolveWildcard(dims: readonly number[], elements: number, name: string): number[] {
  const known = elementCount(dims.filter((dim) => dim !== -1));
  const resolved = dims.map((dim) => (dim === -1 ? elements / known : dim));
  if (elementCount(resolved) !== elements || !resolved.every(Number.isInteger)) {
    throw internal(`'${name}': ${elements} elements cannot take the reshape [${dims.join(", ")}]`);
  }
  return resolved;
}

function toOrt(tensor: Tensor, shape: readonly number[]): OrtTensor {
  const type = ORT_TYPE[tensor.datatype];
  if (type === undefined) throw internal(`datatype ${tensor.datatype} cannot be given to onnxruntime`);
  const dims = [...shape];
  if (type === "string") {
    return new OrtTensor(
      "string",
      splitBytesElements(tensor.data).map((bytes) => new TextDecoder().decode(bytes)),
      dims,
    );
  }
  const ArrayType = ARRAY_OF[type]!;
  // Typed arrays need aligned offsets; raw views into a gRPC message may not be.
  const bytes = tensor.data.byteOffset % 8 === 0 ? tensor.data : new Uint8Array(tensor.data);
  const view = new ArrayType(
    bytes.buffer as ArrayBuffer,
    bytes.byteOffset,
    bytes.byteLength / bytesPerElement(ArrayType),
  );
  return new OrtTensor(type, view as never, dims);
}

const bytesPerElement = (constructor: NumericArrayConstructor): number =>
  (constructor as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;

function fromOrt(name: string, value: OrtTensor): Tensor {
  const datatype = DATATYPE_OF_ORT[value.type];
  if (datatype === undefined) throw internal(`onnxruntime output '${name}' has unsupported type ${value.type}`);
  const data =
    value.type === "string"
      ? joinBytesElements((value.data as string[]).map((text) => new TextEncoder().encode(text)))
      : new Uint8Array(
          (value.data as NumericArray).buffer,
          (value.data as NumericArray).byteOffset,
          (value.data as NumericArray).byteLength,
        );
  return { name, datatype, shape: value.dims.map(Number), data };
}

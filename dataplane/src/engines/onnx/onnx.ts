import { stat } from "node:fs/promises";
import { join } from "node:path";
import { Tensor as OrtTensor, type InferenceSession } from "onnxruntime-node";
import type { BatchInputSpec, OnnxInstance, OnnxSettings, Reshape } from "../../../../lib/engines/onnx.js";
import { abortedError, errorMessage, internal, unavailable } from "../../../../lib/errors.js";
import type { Datatype } from "../../../../lib/model-repository/datatypes.js";
import type { ModelFiles } from "../../../../lib/model-repository/sources.js";
import { usableCores } from "../../cpu-budget.js";
import { joinBytesElements, splitBytesElements } from "../../tensors/bytes.js";
import { elementCount, type Tensor } from "../../tensors/tensor.js";
import type { Engine, EngineRequest, EngineResponse, Execution, InferOptions } from "../engine.js";
import { batchInputValues, joinInputs, layoutOf, rowOffsets, type BatchLayout } from "./batch.js";
import { SessionHost } from "./session-host.js";
import { ARRAY_OF, DATATYPE_OF_ORT, ORT_TYPE, type NumericArray, type NumericArrayConstructor } from "./types.js";

/**
 * Triton's `onnxruntime` backend / `onnxruntime_onnx` platform, run in the data plane's
 * process with onnxruntime-node, each instance's session on a thread of its own
 * (session-host.ts). The model file is `<model folder>/<version>/model.onnx` (or the config's
 * `default_model_filename`). Each served version has one onnxruntime session per instance
 * (instance_group), made at start (a config without its model file, or whose KIND_GPU
 * instance cannot have a GPU, never reports READY); a version the start did not know (a model
 * without a files folder) gets its sessions on its first request.
 *
 * The scheduler hands an execution's requests to `infer` one by one, all with the same
 * Execution: the first call runs them as one `session.run` (batch.ts joins and splits) on
 * the execution's instance, and every call of that execution answers from that one run.
 */

/** What one run gives each of its requests: its response, or the error that failed the run. */
type Outcome = { readonly response: EngineResponse } | { readonly error: unknown };

export class OnnxEngine implements Engine {
  /** Per version: one session per instance. */
  private readonly sessions = new Map<string, Promise<SessionHost[]>>();
  /** The run each execution's requests answer from, made by the first of its calls. */
  private readonly runs = new WeakMap<Execution, Promise<Map<EngineRequest, Outcome>>>();
  /** Runs in progress per instance, to place a request that comes without an execution. */
  private readonly busy: number[];
  /** Where the version folders are: the model's files folder, else next to its config. */
  private readonly modelDir: string;
  /** The versions the model serves (checked at start); none known for a model without a files folder. */
  private readonly served: readonly string[];

  constructor(
    private readonly settings: OnnxSettings,
    files: ModelFiles | undefined,
  ) {
    this.modelDir = files?.folder ?? settings.configFolder;
    this.served = files?.served ?? [];
    this.busy = settings.instances.map(() => 0);
  }

  async start(): Promise<void> {
    for (const version of this.served) {
      const path = this.pathOf(version);
      const info = await stat(path).catch(() => undefined);
      if (!info?.isFile())
        throw unavailable(`version ${version} has no model file: ${path} ${info ? "is not a file" : "does not exist"}`);
    }
    for (const version of this.served) await this.sessionsOf(version);
  }

  async *infer(request: EngineRequest, { signal, execution }: InferOptions): AsyncIterable<EngineResponse> {
    if (signal.aborted) throw abortedError(signal);
    const response =
      execution !== undefined && execution.requests.length > 1 && this.settings.batched
        ? await this.answerFrom(execution, request)
        : await this.runOne(request, signal, execution?.instance);
    if (signal.aborted) throw abortedError(signal);
    yield response;
  }

  async close(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    for (const versionSessions of sessions) {
      for (const host of (await versionSessions.catch(() => undefined)) ?? []) await host.release();
    }
  }

  /** A request run alone (no batch to join): on the execution's instance, else the least busy. */
  private async runOne(
    request: EngineRequest,
    signal: AbortSignal,
    instance = this.leastBusy(),
  ): Promise<EngineResponse> {
    const [outcome] = await this.run([request], instance, signal);
    if ("error" in outcome!) throw outcome.error;
    return outcome!.response;
  }

  /** This request's part of its execution's one run (made by the first call that asks). */
  private async answerFrom(execution: Execution, request: EngineRequest): Promise<EngineResponse> {
    let run = this.runs.get(execution);
    if (run === undefined) {
      run = this.runExecution(execution);
      this.runs.set(execution, run);
    }
    const outcome = (await run).get(request);
    if (outcome === undefined) throw internal("the request is not one of its execution's requests");
    if ("error" in outcome) throw outcome.error;
    return outcome.response;
  }

  /** The execution's requests as one run (an execution is of one version: the scheduler runs each version's own). */
  private async runExecution(execution: Execution): Promise<Map<EngineRequest, Outcome>> {
    const answers = await this.run(execution.requests, execution.instance);
    return new Map(execution.requests.map((request, index) => [request, answers[index]!]));
  }

  /**
   * One `session.run` for the requests (of one version) on one instance: each gets its
   * outputs, or the run's error. Never rejects. `signal`: the one caller of a run alone.
   */
  private async run(requests: readonly EngineRequest[], instance: number, signal?: AbortSignal): Promise<Outcome[]> {
    if (!(instance >= 0 && instance < this.busy.length)) {
      const error = internal(`instance ${instance} is not one of the model's ${this.busy.length}`);
      return requests.map(() => ({ error }));
    }
    this.busy[instance]!++;
    try {
      const session = (await this.sessionsOf(requests[0]!.version))[instance]!;
      const layout = layoutOf(requests, this.settings.batched);
      const wanted = this.outputsWanted(requests);
      const { feeds, owned } = this.feedsOf(requests);
      const results = await runSession(session, feeds, wanted, owned, signal);
      const split = wanted.map((name) => {
        const value = results[name];
        if (value === undefined) throw internal(`onnxruntime gave no output '${name}'`);
        return this.splitOutput(name, value, layout);
      });
      return requests.map((request, index) => ({
        response: {
          outputs: split.filter((_, output) => wants(request, wanted[output]!)).map((parts) => parts[index]!),
        },
      }));
    } catch (error) {
      return requests.map(() => ({ error }));
    } finally {
      this.busy[instance]!--;
    }
  }

  /** The outputs any of the requests asked for (all of them if one asked for none in particular), in config order. */
  private outputsWanted(requests: readonly EngineRequest[]): string[] {
    return this.settings.outputNames.filter((name) => requests.some((request) => wants(request, name)));
  }

  /**
   * The joined inputs, reshaped for the model, and the batch inputs the config asks for;
   * `owned`: those in buffers of the engine's own (joined, made), which the run may take.
   */
  private feedsOf(requests: readonly EngineRequest[]): { feeds: Record<string, OrtTensor>; owned: Set<string> } {
    const feeds: Record<string, OrtTensor> = {};
    const owned = new Set<string>();
    for (const tensor of joinInputs(requests, this.settings.raggedInputs)) {
      const shape = this.settings.raggedInputs.has(tensor.name) ? tensor.shape : this.shapeFor(tensor, "model");
      feeds[tensor.name] = toOrt(tensor, shape);
      if (requests.length > 1) owned.add(tensor.name);
    }
    for (const spec of this.settings.batchInputs) {
      // Each target its own tensor: a buffer moved to the run can be moved once.
      for (const target of spec.targetNames) {
        feeds[target] = batchInputTensor(spec, requests);
        owned.add(target);
      }
    }
    return { feeds, owned };
  }

  /** An output of the run as each request's tensor (its rows of the batch, as the client sees them). */
  private splitOutput(name: string, value: OrtTensor, layout: BatchLayout): Tensor[] {
    const whole = (): Tensor[] => {
      const tensor = fromOrt(name, value);
      return [{ ...tensor, shape: this.shapeFor(tensor, "client") }];
    };
    if (!this.settings.batched) return whole();
    const shape = value.dims.map(Number);
    const offsets = rowOffsets({ name, shape }, layout);
    if (offsets.length === 1) return whole();
    // Each request's rows taken from onnxruntime's output (strings encoded once, by row).
    const datatype = datatypeOfOrt(name, value);
    const item = shape.slice(1);
    const rowElements = elementCount(item);
    return offsets.map((row, index) => {
      const rows = layout.batchSizes[index]!;
      const part: Tensor = {
        name,
        datatype,
        shape: [rows, ...item],
        data: rowsOf(value, row * rowElements, rows * rowElements),
      };
      return { ...part, shape: this.shapeFor(part, "client") };
    });
  }

  /** A tensor's shape as the model (inputs) or the client (outputs) sees it, after `reshape`. */
  private shapeFor(tensor: Tensor, side: "model" | "client"): readonly number[] {
    const reshape: Reshape | undefined = this.settings.reshapes.get(tensor.name);
    if (reshape === undefined) return tensor.shape;
    const batch = this.settings.batched ? tensor.shape.slice(0, 1) : [];
    const perItem = elementCount(tensor.shape.slice(batch.length));
    return [...batch, ...resolveWildcard(reshape[side], perItem, tensor.name)];
  }

  private leastBusy(): number {
    return this.busy.indexOf(Math.min(...this.busy));
  }

  private pathOf(version: string): string {
    return join(this.modelDir, version, this.settings.fileName);
  }

  private sessionsOf(version: string): Promise<SessionHost[]> {
    let sessions = this.sessions.get(version);
    if (sessions === undefined) {
      sessions = createSessions(this.pathOf(version), this.settings.instances).catch((error: unknown) => {
        this.sessions.delete(version);
        throw error;
      });
      this.sessions.set(version, sessions);
    }
    return sessions;
  }
}

/** Whether the request asked for the output (asking for none in particular is asking for all). */
const wants = (request: EngineRequest, output: string): boolean =>
  request.requestedOutputs.size === 0 || request.requestedOutputs.has(output);

/** One run, its failure the execution's error (INTERNAL, with onnxruntime's reason). */
async function runSession(
  host: SessionHost,
  feeds: Readonly<Record<string, OrtTensor>>,
  wanted: readonly string[],
  owned: ReadonlySet<string>,
  signal: AbortSignal | undefined,
): Promise<Record<string, OrtTensor>> {
  try {
    return await host.run(feeds, wanted, owned, signal);
  } catch (error) {
    if (signal?.aborted) throw abortedError(signal);
    throw internal(`onnxruntime failed: ${errorMessage(error)}`);
  }
}

/**
 * One session per instance, each on a thread of its own (session-host.ts: instances run at
 * once, and the event loop reads requests meanwhile) with its share of the pod's cores.
 * onnxruntime's default gives every session an intra-op pool of a thread per core (the
 * node's cores, not the container's limit): N instances would start N times the cores in
 * threads, running at once and each pool spinning after its run, all competing for the same
 * CPUs. So each session gets about cores / N (at least 1), and one inter-op thread (the
 * models' graphs run their nodes one after another). Its pool's threads do not spin waiting
 * for the next run: they share the cores with the event loop, which reads and answers the
 * requests (on 2 cores, spinning cut a batched model's throughput by a third).
 */
async function createSessions(path: string, instances: readonly OnnxInstance[]): Promise<SessionHost[]> {
  const intraOpNumThreads = Math.max(1, Math.floor(usableCores() / instances.length));
  const hosts: SessionHost[] = [];
  try {
    for (const instance of instances) hosts.push(await createSession(path, instance, intraOpNumThreads));
  } catch (error) {
    for (const host of hosts) await host.release();
    throw error;
  }
  return hosts;
}

async function createSession(path: string, instance: OnnxInstance, intraOpNumThreads: number): Promise<SessionHost> {
  const { device, field } = instance;
  const executionProviders: InferenceSession.ExecutionProviderConfig[] =
    device.kind === "gpu" ? [{ name: "cuda", deviceId: device.id }] : ["cpu"];
  try {
    return await SessionHost.create(path, {
      executionProviders,
      intraOpNumThreads,
      interOpNumThreads: 1,
      extra: { session: { intra_op: { allow_spinning: "0" } } },
    });
  } catch (error) {
    if (device.kind === "gpu") {
      throw unavailable(
        `${field}.kind: KIND_GPU needs onnxruntime's CUDA execution provider on GPU ${device.id}, which this data plane cannot use (${errorMessage(error)}); set kind: KIND_CPU (or KIND_AUTO) to run ${path} on the CPU`,
      );
    }
    throw unavailable(`cannot load ONNX model ${path}: ${errorMessage(error)}`);
  }
}

/** A batch input as onnxruntime takes it (INT32 or FP32). */
function batchInputTensor(spec: BatchInputSpec, requests: readonly EngineRequest[]): OrtTensor {
  const { shape, values } = batchInputValues(spec, requests);
  return spec.datatype === "INT32"
    ? new OrtTensor("int32", Int32Array.from(values), [...shape])
    : new OrtTensor("float32", Float32Array.from(values), [...shape]);
}

/** `count` elements of an output from `first` on, as a request's tensor data (a view: numbers are not copied). */
function rowsOf(value: OrtTensor, first: number, count: number): Uint8Array {
  if (value.type === "string") {
    return joinBytesElements(
      (value.data as string[]).slice(first, first + count).map((text) => new TextEncoder().encode(text)),
    );
  }
  const data = value.data as NumericArray;
  const size = data.BYTES_PER_ELEMENT;
  return new Uint8Array(data.buffer, data.byteOffset + first * size, count * size);
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

function datatypeOfOrt(name: string, value: OrtTensor): Datatype {
  const datatype = DATATYPE_OF_ORT[value.type];
  if (datatype === undefined) throw internal(`onnxruntime output '${name}' has unsupported type ${value.type}`);
  return datatype;
}

function fromOrt(name: string, value: OrtTensor): Tensor {
  const datatype = datatypeOfOrt(name, value);
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

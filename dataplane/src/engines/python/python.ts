import { status } from "@grpc/grpc-js";
import { join } from "node:path";
import type { Logger } from "pino";
import type { InferParameter, ModelInferRequest } from "../../../../proto/gen/ts/grpc_service.js";
import type { PythonEngineArguments } from "../../../../lib/contract/dataplane.js";
import type { PythonSettings } from "../../../../lib/engines/python.js";
import {
  abortedError,
  DataPlaneError,
  errorMessage,
  internal,
  UpstreamStatusError,
  type ErrorKind,
} from "../../../../lib/errors.js";
import type { ModelFiles } from "../../../../lib/model-repository/sources.js";
import { servedVersions } from "../../../../lib/model-repository/versions.js";
import { isDatatype } from "../../../../lib/model-repository/datatypes.js";
import { parameterChoiceOf, parametersToJson, sequenceOf, type SequenceRequest } from "../../tensors/parameters.js";
import type { Tensor } from "../../tensors/tensor.js";
import { checkReturnedOutputs } from "../../tensors/reply.js";
import type {
  Engine,
  EngineLoad,
  EngineRequest,
  EngineResponse,
  Execution,
  InferOptions,
  ModelInference,
} from "../engine.js";
import type { Frame } from "./frames.js";
import { noInstance, PythonInstance, type RequestFields, type RequestSink, type SubmittedRequest } from "./instance.js";
import type { ErrorReply, FromStub, OutputTensorPart } from "./protocol.js";

/**
 * Triton's Python backend, run here: each served version of the model gets its
 * instance_group's count of Python processes, each hosting the model's `model.py` with a
 * triton_python_backend_utils of the same API (dataplane/python/). The data plane's
 * scheduler (dataplane/src/scheduling/) forms the executions (dynamic batches, queues,
 * priorities, instances): the requests of one go to the process of its instance and run in
 * one execute call, in their order. A request outside any execution runs alone, on the
 * instance with the fewest outstanding requests.
 */

/** What the engine takes of the process-wide runtime (EngineRuntime). */
export interface PythonRuntime {
  /** The interpreter (with numpy) that runs the models, and how: the python engine's options. */
  readonly pythonEngine: PythonEngineArguments;
  readonly logger: Logger;
  /** Runs a model's request on another model of this data plane (BLS); undefined: BLS is refused. */
  readonly inference: () => ModelInference | undefined;
}

/** Request parameters Triton takes for itself: a model's request.parameters() does not show them. */
const RESERVED_PARAMETERS = new Set(["sequence_id", "sequence_start", "sequence_end", "priority", "timeout"]);
const SEQUENCE_START = 1;
const SEQUENCE_END = 2;

/** Triton's error codes (pb_utils.TritonError) and the data plane's error kinds. */
const KIND_OF_TRITON_CODE: Readonly<Record<string, ErrorKind>> = {
  INTERNAL: "Internal",
  NOT_FOUND: "NotFound",
  INVALID_ARG: "InvalidArgument",
  UNAVAILABLE: "Unavailable",
  UNSUPPORTED: "Unimplemented",
  CANCELLED: "Cancelled",
};
/** Codes with no kind of their own keep their gRPC code. */
const GRPC_CODE_OF_TRITON_CODE: Readonly<Record<string, number>> = {
  UNKNOWN: status.UNKNOWN,
  ALREADY_EXISTS: status.ALREADY_EXISTS,
};
/** The other way, for a model's calls to other models; Triton has no failed-precondition code. */
const TRITON_CODE_OF_KIND: Partial<Record<ErrorKind, string>> = {
  ...Object.fromEntries(Object.entries(KIND_OF_TRITON_CODE).map(([code, kind]) => [kind, code])),
  FailedPrecondition: "INVALID_ARG",
};

/** A request given to a process: its id there, and its frames as they come. */
interface Submitted {
  readonly instance: PythonInstance;
  readonly id: number;
  readonly responses: Responses;
}

export class PythonEngine implements Engine {
  private readonly versions = new Map<string, PythonInstance[]>();
  /**
   * Each execution's requests as given to a process, in the order of `execution.requests`
   * (or why they could not be): its first request's infer call gives them all, the others'
   * calls take theirs.
   */
  private readonly executions = new WeakMap<Execution, readonly Submitted[] | DataPlaneError>();

  constructor(
    private readonly settings: PythonSettings,
    files: ModelFiles | undefined,
    private readonly runtime: PythonRuntime,
  ) {
    const folder = files?.folder ?? settings.configFolder;
    const versions = servedVersions(settings.versionPolicy, files?.versions ?? [], folder);
    for (const version of versions) {
      this.versions.set(
        version,
        settings.instances.map(
          (instance) =>
            new PythonInstance({
              hosting: runtime.pythonEngine,
              label: `'${settings.modelName}' version ${version} instance ${instance.name}`,
              logger: runtime.logger.child({ model: settings.modelName, version, instance: instance.name }),
              onModelCall: (frame, call, from) => void this.modelCall(frame, call, from),
              settings: {
                file: join(folder, version, settings.fileName),
                decoupled: settings.decoupled,
                // Triton's initialize(args): every value a string.
                args: {
                  model_config: settings.modelConfig,
                  model_instance_kind: instance.kind,
                  model_instance_name: instance.name,
                  model_instance_device_id: "0",
                  model_repository: folder,
                  model_version: version,
                  model_name: settings.modelName,
                },
              },
            }),
        ),
      );
    }
  }

  /** Starts every instance; the model is loaded once each has run initialize (as Triton). */
  async start(): Promise<void> {
    const instances = [...this.versions.values()].flat();
    const started = await Promise.allSettled(instances.map((instance) => instance.start()));
    const failed = started.find((result): result is PromiseRejectedResult => result.status === "rejected");
    if (failed !== undefined) {
      await this.close();
      throw failed.reason;
    }
  }

  /**
   * What the processes hold: each executes one request at a time (or, decoupled, hands every
   * request it was given to its senders), the rest wait in its queue. This is the load of a
   * model the data plane does not schedule (no dynamic_batching, no instance_group): for a
   * scheduled one the scheduler's counts stand instead (the registry's loads), and a process
   * holds one execution at a time.
   */
  load(): EngineLoad {
    const perExecute = this.settings.decoupled ? Infinity : 1;
    let waiting = 0;
    let running = 0;
    for (const instance of [...this.versions.values()].flat()) {
      const executing = Math.min(instance.outstanding, perExecute);
      running += executing;
      waiting += instance.outstanding - executing;
    }
    return { waiting, running };
  }

  ready(): boolean {
    return [...this.versions.values()].every((instances) => instances.some((instance) => instance.state === "ready"));
  }

  async *infer(request: EngineRequest, { signal, execution }: InferOptions): AsyncIterable<EngineResponse> {
    const { instance, id, responses } =
      execution === undefined ? this.submit([request])[0]! : this.submittedOf(request, execution);
    const cancel = (): void => {
      instance.abandon(id);
      responses.fail(abortedError(signal));
    };
    // Given to the process with its execution before its own call came: it may be cancelled already.
    if (signal.aborted) cancel();
    else signal.addEventListener("abort", cancel, { once: true });
    let finished = false;
    try {
      for (;;) {
        const frame = await responses.next();
        if (frame === undefined) return;
        finished = frame.header.kind === "response" && frame.header.final;
        const response = responseOf(frame, request.requestedOutputs, this.settings);
        if (response !== undefined) yield response;
        if (finished) return;
      }
    } finally {
      signal.removeEventListener("abort", cancel);
      // Failed (a response refused), or its consumer stopped, before the model was done: a
      // decoupled model would otherwise go on streaming to nobody, counted as running.
      if (!finished) instance.abandon(id);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.versions.values()].flat().map((instance) => instance.close()));
  }

  /** The request as its execution gave it to a process: the execution's first call gives them all. */
  private submittedOf(request: EngineRequest, execution: Execution): Submitted {
    let submitted = this.executions.get(execution);
    if (submitted === undefined) {
      submitted = this.submitExecution(execution);
      this.executions.set(execution, submitted);
    }
    if (submitted instanceof DataPlaneError) throw submitted;
    const index = execution.requests.indexOf(request);
    if (index < 0) throw internal(`python model '${this.settings.modelName}': a request outside its execution`);
    return submitted[index]!;
  }

  /**
   * An execution's requests given to the process of its instance (the scheduler runs one
   * version of a model: its executions are of that version); a decoupled model's instance
   * is released once its execute has returned.
   */
  private submitExecution(execution: Execution): readonly Submitted[] | DataPlaneError {
    const { requests, instance } = execution;
    const version = requests[0]?.version;
    if (requests.some((request) => request.version !== version)) {
      return internal(`python model '${this.settings.modelName}': an execution of several versions`);
    }
    try {
      return this.submit(requests, instance, this.settings.decoupled ? () => execution.release() : undefined);
    } catch (error) {
      return error instanceof DataPlaneError ? error : internal(errorMessage(error));
    }
  }

  /** Requests of one version given to one process as one execution: the `preferred` instance's if it is ready. */
  private submit(requests: readonly EngineRequest[], preferred?: number, executed?: () => void): Submitted[] {
    const instance = this.instanceFor(requests[0]!.version, preferred);
    const given = requests.map((request): SubmittedRequest & { responses: Responses } => {
      const responses = new Responses();
      return { fields: requestFields(request), inputs: request.inputs, sink: responses, responses };
    });
    const ids = instance.submitExecution(given, executed);
    return given.map(({ responses }, index) => ({ instance, id: ids[index]!, responses }));
  }

  /** The process of instance `preferred` when it is ready, else the ready one with the fewest outstanding requests. */
  private instanceFor(version: string, preferred?: number): PythonInstance {
    const instances = this.versions.get(version);
    const label = `'${this.settings.modelName}' version ${version}`;
    if (instances === undefined) throw internal(`python model ${label} is not served`);
    const named = preferred === undefined ? undefined : instances[preferred];
    if (named?.state === "ready") return named;
    let chosen: PythonInstance | undefined;
    for (const instance of instances) {
      if (instance.state !== "ready") continue;
      if (chosen === undefined || instance.outstanding < chosen.outstanding) chosen = instance;
    }
    if (chosen === undefined) throw noInstance(label, instances[0]?.lastFailure || "its instances are starting");
    return chosen;
  }

  /** A model's request to another model of this data plane (BLS), answered frame by frame. */
  private async modelCall(frame: Frame, call: FromStub<"call">, from: PythonInstance): Promise<void> {
    const { id, timeoutUs } = call;
    const inference = this.runtime.inference();
    try {
      if (inference === undefined) throw internal("BLS requests are not available in this data plane");
      const request = modelCallRequest(call, frame.payload);
      const controller = new AbortController();
      const deadline = timeoutUs > 0 ? Date.now() + timeoutUs / 1000 : Infinity;
      const timer =
        timeoutUs > 0
          ? setTimeout(
              () => controller.abort(new DataPlaneError("DeadlineExceeded", "BLS request timed out")),
              timeoutUs / 1000,
            )
          : undefined;
      try {
        for await (const response of inference(request, call.stream, {
          signal: controller.signal,
          deadline,
        })) {
          const outputs = response.outputs.map((output, index): OutputTensorPart => ({
            name: output.name,
            datatype: output.datatype,
            shape: output.shape.map(Number),
            byteSize: response.rawOutputContents[index]?.byteLength ?? 0,
          }));
          from.answerModelCall(
            { id, outputs, parameters: parametersToJson(response.parameters), final: false },
            response.rawOutputContents,
          );
        }
      } finally {
        clearTimeout(timer);
      }
      from.answerModelCall({ id, final: true });
    } catch (error) {
      const kind = error instanceof DataPlaneError ? error.kind : "Internal";
      const failure: ErrorReply = { code: TRITON_CODE_OF_KIND[kind] ?? "INTERNAL", message: errorMessage(error) };
      from.answerModelCall({ id, error: failure, final: true });
    }
  }
}

/** What the stub needs of a request besides its inputs. */
function requestFields(request: EngineRequest): RequestFields {
  const parameters = parametersToJson(request.parameters);
  const flags =
    (parameters["sequence_start"] === true ? SEQUENCE_START : 0) |
    (parameters["sequence_end"] === true ? SEQUENCE_END : 0);
  return {
    requestedOutputs: [...request.requestedOutputs],
    parameters: Object.fromEntries(Object.entries(parameters).filter(([name]) => !RESERVED_PARAMETERS.has(name))),
    requestId: request.id,
    correlationId: correlationIdOf(request),
    flags,
  };
}

/**
 * The request's correlation ID as Triton's Python backend gives it (request.correlation_id()):
 * the string, or the integer read as unsigned 64-bit (an int64 -1 is 2^64 - 1); 0 for none.
 * Beyond 2^53 it stays a bigint: frames.ts writes it as the exact JSON integer, which the
 * stub reads as the int it is (the protocol's "number").
 */
function correlationIdOf(request: EngineRequest): number | string {
  let sequence: SequenceRequest | undefined;
  try {
    sequence = sequenceOf(request.parameters);
  } catch {
    // A model without sequence_batching is not refused for a parameter it does not read.
    return 0;
  }
  if (sequence === undefined) return 0;
  const { id } = sequence;
  if (id.kind === "string") return id.value;
  return id.value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(id.value) : (id.value as unknown as number);
}

/**
 * A response frame as the engine's response (its outputs checked against the config's);
 * undefined for a bare final flag (a decoupled model's send(None, FINAL)).
 */
function responseOf(
  frame: Frame,
  requested: ReadonlySet<string>,
  settings: PythonSettings,
): EngineResponse | undefined {
  const { header, payload } = frame;
  if (header.kind !== "response") return undefined;
  if (header.error !== undefined) {
    const { code, message } = header.error;
    const grpcCode = GRPC_CODE_OF_TRITON_CODE[code];
    throw grpcCode !== undefined
      ? new UpstreamStatusError("Internal", grpcCode, message)
      : new DataPlaneError(KIND_OF_TRITON_CODE[code] ?? "Internal", message);
  }
  const described = header.outputs;
  if (described === undefined) return undefined;
  checkReturnedOutputs(
    described.map(({ name, datatype, shape }) => ({ name, datatype, shape: [...shape] })),
    { modelName: settings.modelName, outputs: settings.outputs, maxBatchSize: settings.maxBatchSize },
  );
  const outputs: Tensor[] = [];
  const shared = [...(frame.shared ?? [])];
  let offset = 0;
  for (const { name, datatype, shape, byteSize, sharedOffset } of described) {
    // An output with an offset was put in shared memory (the instance has read it out).
    let data: Uint8Array | undefined = sharedOffset === undefined ? undefined : shared.shift();
    if (data === undefined) {
      data = payload.subarray(offset, offset + byteSize);
      offset += byteSize;
    }
    if (requested.size > 0 && !requested.has(name)) continue;
    if (!isDatatype(datatype)) throw internal(`output '${name}' has datatype ${datatype}, which KServe does not know`);
    outputs.push({ name, datatype, shape: [...shape], data });
  }
  const { parameters } = header;
  return parameters === undefined ? { outputs } : { outputs, parameters: parametersOf(parameters) };
}

function parametersOf(json: Readonly<Record<string, unknown>>): Record<string, InferParameter> {
  return Object.fromEntries(
    Object.entries(json).map(([key, value]) => [key, { parameterChoice: parameterChoiceOf(value, key) }]),
  );
}

/** A BLS request from a model, as a ModelInferRequest with raw inputs (views of the frame's payload). */
function modelCallRequest(call: FromStub<"call">, payload: Buffer): ModelInferRequest {
  return {
    modelName: call.model,
    modelVersion: call.version,
    id: call.requestId,
    parameters: parametersOf(call.parameters),
    inputs: call.inputs.map(({ name, datatype, shape }) => ({
      name,
      datatype,
      shape: shape.map(BigInt),
      parameters: {},
      contents: undefined,
    })),
    outputs: call.requestedOutputs.map((name) => ({ name, parameters: {} })),
    rawInputContents: call.inputs.map(({ offset, byteSize }) => payload.subarray(offset, offset + byteSize)),
  };
}

/** The frames of one request as they arrive, for the engine's generator to wait on. */
class Responses implements RequestSink {
  private readonly frames: Frame[] = [];
  private failure: DataPlaneError | undefined;
  private wake: (() => void) | undefined;

  frame(frame: Frame): void {
    this.frames.push(frame);
    this.wake?.();
  }

  fail(error: DataPlaneError): void {
    this.failure ??= error;
    this.wake?.();
  }

  /** The next frame; throws once the request failed outside the model. */
  async next(): Promise<Frame | undefined> {
    for (;;) {
      if (this.failure !== undefined) throw this.failure;
      const frame = this.frames.shift();
      if (frame !== undefined) return frame;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}

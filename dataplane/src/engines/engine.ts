import type { Logger } from "pino";
import type { PythonEngineArguments } from "../../../lib/contract/dataplane.js";
import type {
  InferParameter,
  ModelInferRequest,
  ModelInferResponse,
  ModelMetadataResponse,
} from "../../../proto/gen/ts/grpc_service.js";
import type { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import type { ModelSpec } from "../../../lib/model-repository/spec.js";
import type { MetadataEntry } from "../../../lib/grpc/frames.js";

import type { Tensor } from "../tensors/tensor.js";

/** One inference request as an engine sees it: validated raw tensors, no gRPC types. */
export interface EngineRequest {
  readonly id: string;
  /** The model version the request resolved to (e.g. "1"). */
  readonly version: string;
  readonly parameters: Readonly<Record<string, InferParameter>>;
  readonly inputs: readonly Tensor[];
  /** Names the client asked for; empty means every output. Engines may skip the others. */
  readonly requestedOutputs: ReadonlySet<string>;
  /**
   * The client's ModelInferRequest as it came on the wire, given when the model declares no
   * tensors and the caller can send encoded replies (the gRPC inference RPCs): an engine in
   * front of a KServe server may send it on as it is and answer with `encoded` responses.
   */
  readonly encoded?: Uint8Array;
}

export interface EngineResponse {
  readonly outputs: readonly Tensor[];
  readonly parameters?: Readonly<Record<string, InferParameter>>;
  /**
   * The response as an upstream encoded it (a ModelInferResponse, its final flags its own),
   * only ever in answer to a request given `encoded`; `outputs` is then empty.
   */
  readonly encoded?: Uint8Array;
}

export interface InferOptions {
  /** Aborted when the client cancels or the deadline passes; engines stop promptly. */
  readonly signal: AbortSignal;
  /** The client's deadline (ms since the epoch; Infinity for none), for engines to hand on upstream. */
  readonly deadline: number;
  /** W3C trace-context headers of the request's span (empty when tracing is off), for upstream calls. */
  readonly traceHeaders: Readonly<Record<string, string>>;
  /**
   * Set by the scheduler (dataplane/src/scheduling/) for a model it schedules: the execution
   * this request is part of. Absent: the request runs alone, on whichever instance the
   * engine chooses.
   */
  readonly execution?: Execution;
}

/**
 * One execution of a model, as Triton's schedulers form them: the requests a dynamic batch
 * joined (one, without batching), run together on one instance. The scheduler calls
 * `infer` once for each of them, each with its own signal, all with the same Execution: an
 * engine that joins a batch (ONNX: along the first dimension) runs it once, on the first of
 * those calls, and gives each request its slice; an engine that does not runs each request.
 * The instance is busy until every request of the execution has finished, or until the
 * engine calls `release` (a decoupled model whose execute has returned while it still sends).
 */
export interface Execution {
  /** The instance (0 to the model's instance count - 1) it runs on. */
  readonly instance: number;
  /**
   * Every request of the execution, in queue order; all of one version (a scheduler runs one
   * version). For a model with sequence_batching they are in slot order and may include null
   * requests (id "", inputs zeroed, the READY control false, no parameters): every engine runs
   * them like the others, and the scheduler reads and drops their responses.
   */
  readonly requests: readonly EngineRequest[];
  /** The instance is free for the next execution (idempotent). */
  release(): void;
}

/**
 * The contract between the gRPC services and whatever runs the model. A unary model
 * yields exactly one response; a decoupled one yields any number, and the end of the
 * iteration is the end of the request. Errors are DataPlaneErrors.
 */
export interface Engine {
  /**
   * Loads what the model needs before it serves (e.g. starts the processes that host it);
   * the model is READY once this resolves, and fails to load if it rejects. Absent: nothing to load.
   */
  start?(): Promise<void>;
  infer(request: EngineRequest, options: InferOptions): AsyncIterable<EngineResponse>;
  /** False while the engine cannot serve (e.g. no healthy upstream); absent means always ready. */
  ready?(): boolean;
  /**
   * Engines in front of another server answer ModelMetadata, ModelConfig and ModelReady
   * from it (the upstream knows the model); absent, the local config answers.
   */
  modelMetadata?(): Promise<ModelMetadataResponse>;
  modelConfig?(): Promise<ModelConfig>;
  modelReady?(): Promise<boolean>;
  /**
   * What the engine is doing now, for the load signals endpoint pickers read (waiting and
   * running requests, KV-cache usage). Absent: nothing waits, and what the model has in
   * flight is running.
   */
  load?(): EngineLoad;
  /**
   * Engines in front of another KServe v2 gRPC server may take a request's message bytes and
   * answer with the upstream's own messages, never decoding either (the lean forwarding path,
   * dataplane/src/inference/forward.ts): the upstream's headers, messages, status and trailers
   * reach `sink` as they came, the model name rewritten only where it differs. The engine owns
   * the upstream call (endpoint choice, retry before the first byte, deadline, cancellation by
   * `options.signal`, size bounds); every outcome, a transport failure included, ends in exactly
   * one `sink.end`. Absent: the model's requests are decoded and run through `infer`.
   */
  forward?(request: ForwardRequest, options: ForwardOptions, sink: ForwardSink): ForwardCall;
  /** Releases what the engine holds; called when its model is unloaded or replaced. */
  close(): Promise<void>;
}

/** A request passed through undecoded: the message as the client sent it and what was read from its head. */
export interface ForwardRequest {
  /** The client's ModelInferRequest message (no gRPC frame header), as received. */
  readonly bytes: Uint8Array;
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id: string;
  /** The request's parameters (sequence affinity reads them). */
  readonly parameters: Readonly<Record<string, InferParameter>>;
  /**
   * The client's custom metadata to send on, reserved names already removed (`grpc-*`,
   * `authorization`, HTTP/2 connection headers, ours): `-bin` values as bytes, as grpc-js holds them.
   */
  readonly metadata: readonly ForwardMetadataEntry[];
}

export interface ForwardOptions extends InferOptions {
  /** Sent as one request on the upstream's ModelStreamInfer (a decoupled model) rather than ModelInfer. */
  readonly stream: boolean;
}

/** One metadata entry: a lowercase name and its value (bytes for `-bin` names). */
export type ForwardMetadataEntry = MetadataEntry;

/** The end of a forwarded call: the upstream's gRPC status and trailers, or a failure mapped to a status. */
export interface ForwardStatus {
  /** The gRPC status code (0 OK). */
  readonly code: number;
  /** `grpc-message`, percent-decoded. */
  readonly details: string;
  /** The upstream's custom trailers (empty for a failure of our own). */
  readonly metadata: readonly ForwardMetadataEntry[];
}

/** Where a forwarded call's results go, in order: metadata at most once, messages, then end exactly once. */
export interface ForwardSink {
  /** The upstream's custom response headers (initial metadata), before any message. */
  metadata(metadata: readonly ForwardMetadataEntry[]): void;
  /** One upstream message: a ModelInferResponse, or a ModelStreamInferResponse when `stream`. */
  message(bytes: Uint8Array): void;
  end(status: ForwardStatus): void;
}

/** A forwarded call in progress: flow control for a slow client (cancellation is `options.signal`). */
export interface ForwardCall {
  /** Stop reading the upstream's messages until `resume`. */
  pause(): void;
  resume(): void;
}

/** An engine's load now: the model-server protocol's signals, per model. */
export interface EngineLoad {
  /** Requests given to the engine that wait for it (a free instance, a sequence slot). */
  readonly waiting: number;
  /** Requests it is executing. */
  readonly running: number;
  /** Share of its KV cache in use, 0 to 1; absent for an engine that keeps none it knows of. */
  readonly kvCacheUsage?: number;
}

/**
 * Runs a request on a model of this data plane, as a client's would run (admission,
 * checks, metrics): for engines whose models call other models (Triton's BLS). `stream`
 * asks for every response of a decoupled model.
 */
export type ModelInference = (
  request: ModelInferRequest,
  stream: boolean,
  lifetime: { readonly signal: AbortSignal; readonly deadline: number },
) => AsyncIterable<ModelInferResponse>;

/**
 * Other models of this data plane as a model that depends on them sees them (an ensemble's
 * steps): read-only, never a request.
 */
export interface ModelDependencies {
  /**
   * The model once the changes queued for it are done (its load in the same scan): its spec
   * if it is loaded, else why it is not. With explicit model control a model that is not
   * loaded is loaded first, as Triton loads an ensemble's steps with it.
   */
  dependency(name: string): Promise<{ readonly spec: ModelSpec } | { readonly reason: string }>;
}

/** Process-wide settings of the engines. */
export interface EngineRuntime {
  /** Largest message sent to or accepted from an upstream (the data plane's own limit). */
  readonly maxMessageSize: number;
  /** HTTP/2 flow-control window of upstream gRPC channels, in bytes (unset: grpc-js's default). */
  readonly upstreamFlowControlWindow?: number;
  /** The python engine's options, as the command line names them (lib/contract/dataplane.ts). */
  readonly pythonEngine: PythonEngineArguments;
  readonly logger: Logger;
  /** Other models of this data plane, for models that call them (set once the data plane serves). */
  readonly inference: () => ModelInference | undefined;
  /** Other models, for models built on them (ensembles); absent where there is no registry. */
  readonly models?: ModelDependencies;
}

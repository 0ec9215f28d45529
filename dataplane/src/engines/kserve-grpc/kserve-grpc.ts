import type { KserveGrpcSettings, UpstreamTlsFiles } from "../../../../lib/engines/kserve-grpc.js";
import { Metadata, status, type CallOptions, type ClientUnaryCall, type ServiceError } from "@grpc/grpc-js";
import { createSecureContext } from "node:tls";
import {
  GRPCInferenceServiceService,
  ModelInferResponse,
  type GRPCInferenceServiceClient,
  type ModelConfigResponse,
  type ModelMetadataResponse,
  type ModelReadyResponse,
  type ModelInferRequest,
} from "../../../../proto/gen/ts/grpc_service.js";
import type { ModelConfig } from "../../../../proto/gen/ts/model_config.js";
import { abortedError, DataPlaneError, errorMessage, internal, UpstreamStatusError } from "../../../../lib/errors.js";
import { GRPC_CODE_OF, kindOfGrpcCode } from "../../../../lib/grpc/status-codes.js";
import { unaryCall } from "../../../../lib/grpc/unary-call.js";
import { WatchedFiles } from "../../../../lib/watched-files.js";
import { isTrue, sequenceOf, type SequenceRequest } from "../../tensors/parameters.js";
import type { Tensor } from "../../tensors/tensor.js";
import { outputTensor } from "../../tensors/request.js";
import { checkReturnedOutputs } from "../../tensors/reply.js";
import { encodeInferRequest, streamReplyParts, withModel, withStreamReplyModel } from "../../tensors/wire.js";
import type {
  Engine,
  EngineRequest,
  EngineResponse,
  EngineRuntime,
  ForwardCall,
  ForwardMetadataEntry,
  ForwardOptions,
  ForwardRequest,
  ForwardSink,
  ForwardStatus,
  InferOptions,
} from "../engine.js";
import type { Endpoint } from "./endpoints.js";
import type { UpstreamEnd, UpstreamTlsMaterial } from "./h2-upstream.js";
import { UpstreamPool } from "./upstream-pool.js";

/**
 * The `kserve-grpc` engine forwards a model's requests to existing KServe v2 gRPC servers
 * (Triton, MLServer, KServe ModelServer). Selected by `backend: "kserve-grpc"` or, keeping
 * a Triton config's own backend, by `parameters { key: "engine" value { string_value:
 * "kserve-grpc" } }`. Parameters: `upstream` (comma-separated host:port; a DNS name stands
 * for every address it resolves to), `routing` (round_robin | least_outstanding),
 * `upstream_model` (default: the model's name), `upstream_version` (default: the
 * upstream's own choice), and TLS to the upstreams (`upstream_tls`, `upstream_ca_file`,
 * `upstream_cert_file`, `upstream_key_file`, `upstream_server_name`). Requests go on
 * `node:http2` streams (h2-upstream.ts); ModelMetadata, ModelConfig and ModelReady are asked of the
 * upstream too: it knows the model; a config here may declare no tensors at all.
 */

/** The checked settings, and the process-wide limits its connections use. */
interface Settings extends KserveGrpcSettings {
  readonly runtime: EngineRuntime;
}

/** How long ModelMetadata/ModelConfig/ModelReady wait for the upstream. */
const DESCRIBE_DEADLINE_MS = 10_000;
/** How often the upstream TLS files are read again (a rotated Secret is used by the next connection). */
const TLS_RELOAD_MS = 10_000;
const STEERING_PARAMETERS = new Set(["triton_final_response"]);
/** The upstream's ModelInfer and ModelStreamInfer, as gRPC method paths. */
const INFER_PATH = GRPCInferenceServiceService.modelInfer.path;
const STREAM_INFER_PATH = GRPCInferenceServiceService.modelStreamInfer.path;
const NO_METADATA: readonly ForwardMetadataEntry[] = [];
/** Upstream messages an engine call holds for a slow consumer before it stops reading. */
const QUEUED_MESSAGES = 16;

/**
 * Translates between our pipeline and an upstream's KServe v2 API: engine requests become
 * upstream requests (serialized once, each tensor's bytes copied once; passed through, the
 * client's own bytes), upstream replies and statuses come back as they are. Which upstream
 * serves a request is the pool's business.
 */
export class KserveGrpcEngine implements Engine {
  private readonly pool: UpstreamPool;
  private tlsMaterial: UpstreamTlsMaterial | undefined;
  private tlsFiles: WatchedFiles | undefined;

  constructor(private readonly settings: Settings) {
    const { model, targets, routing, sequenceIdleMs, maxSequences, runtime } = settings;
    this.pool = new UpstreamPool({
      ...{ model, targets, routing, sequenceIdleMs, maxSequences, runtime },
      ...(settings.tls === undefined ? {} : { tls: () => this.currentTls() }),
    });
  }

  /** Reads the upstream TLS files (the model does not load if they are unreadable), then follows them. */
  async start(): Promise<void> {
    const files = this.settings.tls;
    if (files === undefined) return;
    const paths = [files.caFile, files.certFile, files.keyFile].filter((path) => path !== undefined);
    this.tlsFiles = await WatchedFiles.watch(
      paths,
      {
        intervalMs: TLS_RELOAD_MS,
        logger: this.settings.runtime.logger,
        what: `model '${this.settings.model}' upstream TLS files`,
      },
      (contents) => (this.tlsMaterial = tlsMaterial(files, paths, contents)),
    ).catch((error: unknown) => {
      throw new Error(`model '${this.settings.model}': upstream TLS: ${errorMessage(error)}`);
    });
  }

  ready(): boolean {
    return this.pool.ready();
  }

  async *infer(request: EngineRequest, options: InferOptions): AsyncIterable<EngineResponse> {
    // The typed correlation ID (5 and "5" are different sequences); malformed sequence
    // parameters are refused here with Triton's INVALID_ARGUMENT, as the upstream would.
    const sequence = sequenceOf(request.parameters);
    // Serialized once, whichever endpoint takes it: the client's own bytes when passed
    // through, else the checked request with its tensors' bytes copied once.
    const passThrough = request.encoded !== undefined;
    const bytes =
      request.encoded === undefined
        ? encodeInferRequest(this.upstreamRequest(request))
        : withModel(request.encoded, this.settings.upstreamModel, this.settings.upstreamVersion);
    if (!this.settings.decoupled) {
      const { message, endpoint } = await this.reply(bytes, options, sequence);
      yield passThrough
        ? { outputs: [], encoded: message }
        : this.fromUpstream(endpoint, ModelInferResponse.decode(message));
      return;
    }
    for await (const { message, endpoint } of this.messages(bytes, { ...options, stream: true }, sequence)) {
      const { errorMessage, inferResponse } = streamReplyParts(message);
      if (errorMessage !== "") {
        throw new UpstreamStatusError("Internal", status.INTERNAL, `upstream ${endpoint.address}: ${errorMessage}`);
      }
      if (inferResponse === undefined) continue;
      // Passed through, the upstream's responses go on as they are, its final flags too.
      if (passThrough) {
        yield { outputs: [], encoded: inferResponse };
        continue;
      }
      const decoded = ModelInferResponse.decode(inferResponse);
      const response = this.fromUpstream(endpoint, decoded);
      // An empty final response only closes the request; our pipeline sends its own.
      if (response.outputs.length === 0 && isTrue(decoded.parameters["triton_final_response"])) continue;
      yield response;
    }
  }

  /**
   * A request passed through: its bytes to an upstream (renamed only when the upstream's
   * model is named otherwise), the upstream's headers, messages, status and trailers back
   * to `sink` (each reply renamed back likewise).
   */
  forward(request: ForwardRequest, options: ForwardOptions, sink: ForwardSink): ForwardCall {
    let sequence: SequenceRequest | undefined;
    let bytes: Uint8Array;
    try {
      sequence = sequenceOf(request.parameters);
      bytes = withModel(request.bytes, this.settings.upstreamModel, this.settings.upstreamVersion);
    } catch (error) {
      sink.end(statusOfError(error));
      return IDLE_CALL;
    }
    const renamed = bytes !== request.bytes;
    if (!renamed) return this.send(bytes, options, sequence, request.metadata, sink);
    const rename = options.stream ? withStreamReplyModel : withModel;
    return this.send(bytes, options, sequence, request.metadata, {
      metadata: (entries) => sink.metadata(entries),
      message: (reply) => sink.message(rename(reply, request.modelName, request.modelVersion || undefined)),
      end: (end) => sink.end(end),
    });
  }

  async modelMetadata(): Promise<ModelMetadataResponse> {
    return this.ask((client, request, options, done) => client.modelMetadata(request, new Metadata(), options, done));
  }

  async modelConfig(): Promise<ModelConfig> {
    const reply = await this.ask<ModelConfigResponse>((client, request, options, done) =>
      client.modelConfig(request, new Metadata(), options, done),
    );
    if (reply.config === undefined)
      throw internal(`upstream gave no config for model '${this.settings.upstreamModel}'`);
    return reply.config;
  }

  async modelReady(): Promise<boolean> {
    const reply = await this.ask<ModelReadyResponse>((client, request, options, done) =>
      client.modelReady(request, new Metadata(), options, done),
    ).catch(() => ({ ready: false }));
    return reply.ready;
  }

  async close(): Promise<void> {
    this.tlsFiles?.stop();
    this.pool.close();
  }

  /** Sends a request upstream on the routing policy's endpoint; a request refused before any answer goes to the next. */
  private send(
    bytes: Uint8Array,
    options: ForwardOptions,
    sequence: SequenceRequest | undefined,
    metadata: readonly ForwardMetadataEntry[],
    sink: ForwardSink,
    answered?: (endpoint: Endpoint) => void,
  ): ForwardCall {
    const routed = new RoutedCall(this.pool, this.settings.model, {
      bytes,
      path: options.stream ? STREAM_INFER_PATH : INFER_PATH,
      options,
      metadata,
      sequence,
      sink,
      ...(answered === undefined ? {} : { answered }),
    });
    const refreshing = this.pool.refresh();
    // Only the first request waits for the addresses; later ones use those known while they refresh.
    if (this.pool.size > 0) routed.start();
    else
      void refreshing.then(
        () => routed.start(),
        () => routed.start(),
      );
    return routed;
  }

  /** The upstream's one reply to a ModelInfer request; a non-OK end (or none) rejects. */
  private reply(
    bytes: Uint8Array,
    options: InferOptions,
    sequence: SequenceRequest | undefined,
  ): Promise<{ message: Uint8Array; endpoint: Endpoint }> {
    return new Promise((resolve, reject) => {
      let message: Uint8Array | undefined;
      let endpoint: Endpoint | undefined;
      const sink: ForwardSink = {
        metadata: () => undefined,
        message: (received) => (message = received),
        end: (end) => {
          if (end.code !== status.OK) reject(callError(end, options.signal));
          else if (message === undefined)
            reject(internal(`model '${this.settings.model}': upstream ${endpoint?.address} sent no reply`));
          else resolve({ message, endpoint: endpoint! });
        },
      };
      this.send(
        bytes,
        { ...options, stream: false },
        sequence,
        NO_METADATA,
        sink,
        (answering) => (endpoint = answering),
      );
    });
  }

  /** The upstream's messages for an engine request, as they come (a slow consumer stops the reading); a non-OK end throws. */
  private async *messages(
    bytes: Uint8Array,
    options: ForwardOptions,
    sequence: SequenceRequest | undefined,
  ): AsyncIterable<{ message: Uint8Array; endpoint: Endpoint }> {
    const stop = new AbortController();
    const signal = AbortSignal.any([options.signal, stop.signal]);
    const queue: Uint8Array[] = [];
    let end: ForwardStatus | undefined;
    let endpoint: Endpoint | undefined;
    let wake: (() => void) | undefined;
    const notify = (): void => {
      wake?.();
      wake = undefined;
    };
    const call = this.send(
      bytes,
      { ...options, signal },
      sequence,
      NO_METADATA,
      {
        metadata: () => undefined,
        message: (message) => {
          queue.push(message);
          if (queue.length >= QUEUED_MESSAGES) call.pause();
          notify();
        },
        end: (status) => {
          end = status;
          notify();
        },
      },
      (answering) => (endpoint = answering),
    );
    try {
      for (;;) {
        const message = queue.shift();
        if (message !== undefined) {
          if (queue.length < QUEUED_MESSAGES / 2) call.resume();
          yield { message, endpoint: endpoint! };
          continue;
        }
        if (end !== undefined) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      // The consumer stopped early (or the call is over): the upstream stream is reset.
      if (end === undefined) stop.abort();
    }
    if (end.code !== status.OK) throw callError(end, options.signal);
  }

  /**
   * A unary question about the model to one healthy upstream, the next one if it is
   * unreachable; the upstream's answer (or status) comes back as it is.
   */
  private async ask<Reply>(
    send: (
      client: GRPCInferenceServiceClient,
      request: { name: string; version: string },
      options: Partial<CallOptions>,
      done: (error: ServiceError | null, reply: Reply) => void,
    ) => ClientUnaryCall,
  ): Promise<Reply> {
    await this.pool.refresh();
    const request = { name: this.settings.upstreamModel, version: this.settings.upstreamVersion };
    for (let attempt = 1; ; attempt++) {
      const endpoint = this.pool.pick(undefined);
      try {
        const reply = await unaryCall<Reply>((options, done) => send(endpoint.client, request, options, done), {
          deadline: Date.now() + DESCRIBE_DEADLINE_MS,
        }).catch((error: ServiceError) => {
          throw this.describeError(endpoint, error);
        });
        this.pool.succeeded(endpoint);
        return reply;
      } catch (error) {
        if (!isRefused(error) || attempt >= this.pool.size) throw error;
      }
    }
  }

  private upstreamRequest(request: EngineRequest): ModelInferRequest {
    return {
      modelName: this.settings.upstreamModel,
      modelVersion: this.settings.upstreamVersion,
      id: request.id,
      parameters: { ...request.parameters },
      inputs: request.inputs.map((tensor) => ({
        name: tensor.name,
        datatype: tensor.datatype,
        shape: tensor.shape.map(BigInt),
        parameters: { ...(tensor.parameters ?? {}) },
        contents: undefined,
      })),
      outputs: [...request.requestedOutputs].map((name) => ({ name, parameters: {} })),
      // The validated raw bytes, still views of the client's request: no copy, no re-encode.
      rawInputContents: request.inputs.map((tensor) => tensor.data),
    };
  }

  /**
   * An upstream response as engine tensors, each checked against its own datatype and shape
   * and the declared outputs: a reply that is wrong is the upstream's fault (INTERNAL, naming
   * it and the output), never passed on as a success nor blamed on the client.
   */
  private fromUpstream(endpoint: Endpoint, response: ModelInferResponse): EngineResponse {
    let outputs: Tensor[];
    try {
      outputs = response.outputs.map((output, index) => outputTensor(output, response.rawOutputContents[index]));
      const { model: modelName, outputs: declared, maxBatchSize } = this.settings;
      checkReturnedOutputs(outputs, { modelName, outputs: declared, maxBatchSize });
    } catch (error) {
      if (!(error instanceof DataPlaneError)) throw error;
      throw new UpstreamStatusError(
        "Internal",
        status.INTERNAL,
        `model '${this.settings.model}': upstream ${endpoint.address} gave a bad reply: ${error.message}`,
      );
    }
    const parameters = Object.fromEntries(
      Object.entries(response.parameters).filter(([key]) => !STEERING_PARAMETERS.has(key)),
    );
    return { outputs, parameters };
  }

  /** A describe call's failure: a transport failure takes the endpoint out, any other answer shows it reachable. */
  private describeError(endpoint: Endpoint, error: ServiceError): DataPlaneError {
    if (this.pool.failed(endpoint, error)) {
      return new UpstreamStatusError(
        "Unavailable",
        status.UNAVAILABLE,
        `model '${this.settings.model}': upstream ${endpoint.address} is unavailable: ${error.details}`,
      );
    }
    if (error.code !== status.DEADLINE_EXCEEDED && error.code !== status.CANCELLED) this.pool.succeeded(endpoint);
    return new UpstreamStatusError(kindOfGrpcCode(error.code), error.code, error.details);
  }

  /** The TLS material for a new connection (read by start()). */
  private currentTls(): UpstreamTlsMaterial {
    if (this.tlsMaterial === undefined) throw new Error("its TLS files are not read yet");
    return this.tlsMaterial;
  }
}

/** The files' contents as TLS material, checked by node's TLS (a broken file keeps the last good material). */
function tlsMaterial(
  files: UpstreamTlsFiles,
  paths: readonly string[],
  contents: readonly Buffer[],
): UpstreamTlsMaterial {
  const of = (path: string | undefined): Buffer | undefined =>
    path === undefined ? undefined : contents[paths.indexOf(path)];
  const material = {
    ...(files.caFile === undefined ? {} : { ca: of(files.caFile)! }),
    ...(files.certFile === undefined ? {} : { cert: of(files.certFile)!, key: of(files.keyFile)! }),
    ...(files.serverName === undefined ? {} : { serverName: files.serverName }),
  };
  createSecureContext(material);
  return material;
}

/** A failed upstream call as an engine's error: the client's own cancel or deadline as such, else the upstream's code as it came. */
function callError(end: ForwardStatus, signal: AbortSignal): DataPlaneError {
  if (signal.aborted) return abortedError(signal);
  return new UpstreamStatusError(kindOfGrpcCode(end.code), end.code, end.details);
}

/** A describe call an upstream refused without answering (UNAVAILABLE): another endpoint may take it. */
const isRefused = (error: unknown): boolean =>
  error instanceof UpstreamStatusError && error.grpcCode === status.UNAVAILABLE;

/** A failure before any upstream call (a malformed request) as a forwarded call's status. */
function statusOfError(error: unknown): ForwardStatus {
  if (!(error instanceof DataPlaneError)) throw error;
  return { code: GRPC_CODE_OF[error.kind], details: error.message, metadata: NO_METADATA };
}

/** How often one request refused by connections going away (GOAWAY, REFUSED_STREAM) is sent again. */
const MAX_DRAINED_RETRIES = 2;

/** A call that was over before it started: nothing to pause. */
const IDLE_CALL: ForwardCall = { pause: () => undefined, resume: () => undefined };

/** One forwarded request across its attempts: the endpoint chosen, health kept, the sink ended once. */
interface Routing {
  readonly bytes: Uint8Array;
  readonly path: string;
  readonly options: ForwardOptions;
  readonly metadata: readonly ForwardMetadataEntry[];
  readonly sequence: SequenceRequest | undefined;
  readonly sink: ForwardSink;
  /** Told which endpoint answers, before its first message. */
  readonly answered?: (endpoint: Endpoint) => void;
}

class RoutedCall implements ForwardCall {
  private current: ForwardCall | undefined;
  private paused = false;
  private attempt = 0;
  private drainedRetries = 0;

  constructor(
    private readonly pool: UpstreamPool,
    private readonly model: string,
    private readonly routing: Routing,
  ) {}

  /** Whether a request refused unrun may go again: never a stream's or a sequence's (they stay where they started). */
  private mayRetry(end: UpstreamEnd): boolean {
    const { pool, routing } = this;
    if (!end.refused || routing.sequence !== undefined || routing.options.stream || routing.options.signal.aborted)
      return false;
    // A connection going away: again, on a new connection (the same endpoint too), as grpc-js's transparent retry.
    if (end.drained) return this.drainedRetries++ < MAX_DRAINED_RETRIES;
    return this.attempt < pool.size && pool.hasHealthy();
  }

  pause(): void {
    this.paused = true;
    this.current?.pause();
  }

  resume(): void {
    this.paused = false;
    this.current?.resume();
  }

  start(): void {
    const { routing, pool } = this;
    const { options, sink, sequence } = routing;
    this.attempt++;
    let endpoint: Endpoint;
    try {
      endpoint = pool.pick(sequence?.id);
    } catch (error) {
      sink.end(statusOfError(error));
      return;
    }
    routing.answered?.(endpoint);
    endpoint.outstanding++;
    const call = endpoint.upstream.call(
      {
        path: routing.path,
        message: routing.bytes,
        unary: !options.stream,
        deadline: options.deadline,
        signal: options.signal,
        metadata: routing.metadata,
        traceHeaders: options.traceHeaders,
      },
      {
        metadata: (entries) => sink.metadata(entries),
        message: (bytes) => sink.message(bytes),
        end: (end) => {
          endpoint.outstanding--;
          this.ended(endpoint, end);
        },
      },
    );
    this.current = call;
    if (this.paused) call.pause();
  }

  private ended(endpoint: Endpoint, end: UpstreamEnd): void {
    const { pool, routing } = this;
    // A connection drained says nothing of the endpoint. Any other answer, if an error of its
    // own, shows it reachable; a deadline or a cancel may be our own client's doing (a hung
    // upstream answers nothing), so it proves nothing either way.
    if (
      !end.drained &&
      !pool.failed(endpoint, end) &&
      end.code !== status.DEADLINE_EXCEEDED &&
      end.code !== status.CANCELLED
    )
      pool.succeeded(endpoint);
    if (this.mayRetry(end)) {
      this.start();
      return;
    }
    if (end.code === status.OK && routing.sequence?.end === true) pool.endSequence(routing.sequence.id);
    // The status alone (what the engine contract gives), a transport failure naming the model too.
    const details = end.transport ? `model '${this.model}': ${end.details}` : end.details;
    routing.sink.end({ code: end.code, details, metadata: end.metadata });
  }
}

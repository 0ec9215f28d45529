import type { KserveGrpcSettings } from "../../../../lib/engines/kserve-grpc.js";
import { Metadata, status, type CallOptions, type ClientUnaryCall, type ServiceError } from "@grpc/grpc-js";
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
import { abortedError, DataPlaneError, internal, UpstreamStatusError } from "../../../../lib/errors.js";
import { kindOfGrpcCode } from "../../../../lib/grpc/status-codes.js";
import { unaryCall } from "../../../../lib/grpc/unary-call.js";
import { isTrue, sequenceOf } from "../../tensors/parameters.js";
import type { Tensor } from "../../tensors/tensor.js";
import { outputTensor } from "../../tensors/request.js";
import { checkReturnedOutputs } from "../../tensors/reply.js";
import { asBuffer, encodeInferRequest, streamReplyParts, withModel } from "../../tensors/wire.js";
import type { Engine, EngineRequest, EngineResponse, EngineRuntime, InferOptions } from "../engine.js";
import type { Endpoint } from "./endpoints.js";
import { UpstreamPool } from "./upstream-pool.js";

/**
 * The `kserve-grpc` engine forwards a model's requests to existing KServe v2 gRPC servers
 * (Triton, MLServer, KServe ModelServer). Selected by `backend: "kserve-grpc"` or, keeping
 * a Triton config's own backend, by `parameters { key: "engine" value { string_value:
 * "kserve-grpc" } }`. Parameters: `upstream` (comma-separated host:port; a DNS name stands
 * for every address it resolves to), `routing` (round_robin | least_outstanding),
 * `upstream_model` (default: the model's name), `upstream_version` (default: the
 * upstream's own choice). ModelMetadata, ModelConfig and ModelReady are asked of the
 * upstream too: it knows the model; a config here may declare no tensors at all.
 */

/** The checked settings, and the process-wide limits its channels use. */
interface Settings extends KserveGrpcSettings {
  readonly runtime: EngineRuntime;
}

/** How long ModelMetadata/ModelConfig/ModelReady wait for the upstream. */
const DESCRIBE_DEADLINE_MS = 10_000;
const STEERING_PARAMETERS = new Set(["triton_final_response"]);

/**
 * Translates between our pipeline and an upstream's KServe v2 API: engine requests become
 * upstream requests (serialized once, each tensor's bytes copied once; passed through, the
 * client's own bytes), upstream replies and statuses come back as they are. Which upstream
 * serves a request is the pool's business.
 */
export class KserveGrpcEngine implements Engine {
  private readonly pool: UpstreamPool;

  constructor(private readonly settings: Settings) {
    this.pool = new UpstreamPool(settings);
  }

  ready(): boolean {
    return this.pool.ready();
  }

  async *infer(
    request: EngineRequest,
    { signal, deadline, traceHeaders }: InferOptions,
  ): AsyncIterable<EngineResponse> {
    const call: UpstreamCall = { signal, deadline, metadata: metadataOf(traceHeaders) };
    await this.pool.refresh();
    // The typed correlation ID (5 and "5" are different sequences); malformed sequence
    // parameters are refused here with Triton's INVALID_ARGUMENT, as the upstream would.
    const sequence = sequenceOf(request.parameters);
    // Serialized once, whichever endpoint takes it: the client's own bytes when passed
    // through, else the checked request with its tensors' bytes copied once.
    const upstreamRequest: UpstreamRequest =
      request.encoded === undefined
        ? { bytes: encodeInferRequest(this.upstreamRequest(request)), passThrough: false }
        : {
            bytes: withModel(request.encoded, this.settings.upstreamModel, this.settings.upstreamVersion),
            passThrough: true,
          };
    // A request refused by an endpoint never reached its model: another may take it.
    // Streams and sequences stay where they started.
    const attempts = sequence === undefined && !this.settings.decoupled ? this.pool.size : 1;
    for (let attempt = 1; ; attempt++) {
      const endpoint = this.pool.pick(sequence?.id);
      endpoint.outstanding++;
      try {
        if (this.settings.decoupled) {
          yield* this.stream(endpoint, upstreamRequest, call);
        } else {
          yield await this.unary(endpoint, upstreamRequest, call);
        }
        if (sequence?.end === true) this.pool.endSequence(sequence.id);
        return;
      } catch (error) {
        if (!isRefused(error) || attempt >= attempts || !this.pool.hasHealthy()) throw error;
      } finally {
        endpoint.outstanding--;
      }
    }
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
    this.pool.close();
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
          throw this.upstreamError(endpoint, error, undefined);
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

  private async unary(
    endpoint: Endpoint,
    { bytes, passThrough }: UpstreamRequest,
    { signal, deadline, metadata }: UpstreamCall,
  ): Promise<EngineResponse> {
    const reply = await unaryCall<Buffer>(
      (options, done) =>
        endpoint.client.makeUnaryRequest(INFER_PATH, asBuffer, asIs, bytes, metadata, options, (error, received) =>
          done(error, received ?? EMPTY),
        ),
      // The client's deadline goes upstream too, so the upstream stops when it passes.
      { deadline, signal },
    ).catch((error: ServiceError) => {
      throw this.upstreamError(endpoint, error, signal);
    });
    this.pool.succeeded(endpoint);
    return passThrough
      ? { outputs: [], encoded: reply }
      : this.fromUpstream(endpoint, ModelInferResponse.decode(reply));
  }

  private async *stream(
    endpoint: Endpoint,
    { bytes, passThrough }: UpstreamRequest,
    { signal, deadline, metadata }: UpstreamCall,
  ): AsyncIterable<EngineResponse> {
    const options = Number.isFinite(deadline) ? { deadline } : {};
    const call = endpoint.client.makeBidiStreamRequest(STREAM_INFER_PATH, asBuffer, asIs, metadata, options);
    const cancel = (): void => call.cancel();
    signal.addEventListener("abort", cancel, { once: true });
    try {
      call.write(bytes);
      call.end();
      for await (const message of call as AsyncIterable<Buffer>) {
        this.pool.succeeded(endpoint);
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
    } catch (error) {
      if (error instanceof DataPlaneError) throw error;
      throw this.upstreamError(endpoint, error as ServiceError, signal);
    } finally {
      signal.removeEventListener("abort", cancel);
      call.cancel();
    }
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

  /** An upstream's failure as ours: its code passed back unchanged; a transport failure takes the endpoint out, any other answer shows it reachable. */
  private upstreamError(endpoint: Endpoint, error: ServiceError, signal: AbortSignal | undefined): DataPlaneError {
    if (signal?.aborted === true) return abortedError(signal);
    if (this.pool.failed(endpoint, error)) {
      return new UpstreamStatusError(
        "Unavailable",
        status.UNAVAILABLE,
        `model '${this.settings.model}': upstream ${endpoint.address} is unavailable: ${error.details}`,
      );
    }
    // It answered, if with an error of its own: it is reachable. A deadline or a cancel may be
    // our own client's doing (a hung upstream answers nothing), so it proves nothing either way.
    if (error.code !== status.DEADLINE_EXCEEDED && error.code !== status.CANCELLED) this.pool.succeeded(endpoint);
    return new UpstreamStatusError(kindOfGrpcCode(error.code), error.code, error.details);
  }
}

/** A request the upstream refused without running it (UNAVAILABLE): another endpoint may take it. */
const isRefused = (error: unknown): boolean =>
  error instanceof UpstreamStatusError && error.grpcCode === status.UNAVAILABLE;

/** An upstream's output as a tensor: raw as it came, typed converted; held to its own datatype and shape. */

/** A request for the upstream, serialized: the client's bytes as they came (passed through), or built here. */
interface UpstreamRequest {
  readonly bytes: Uint8Array;
  /** Replies then go back undecoded. */
  readonly passThrough: boolean;
}

/** The upstream's ModelInfer and ModelStreamInfer, as gRPC method paths. */
const INFER_PATH = GRPCInferenceServiceService.modelInfer.path;
const STREAM_INFER_PATH = GRPCInferenceServiceService.modelStreamInfer.path;
const asIs = (bytes: Buffer): Buffer => bytes;
const EMPTY = Buffer.alloc(0);

/** What an upstream call carries of the client's call: cancellation, deadline, trace context. */
interface UpstreamCall {
  readonly signal: AbortSignal;
  readonly deadline: number;
  readonly metadata: Metadata;
}

function metadataOf(headers: Readonly<Record<string, string>>): Metadata {
  const metadata = new Metadata();
  for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
  return metadata;
}

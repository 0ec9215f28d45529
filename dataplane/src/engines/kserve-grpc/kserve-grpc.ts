import type { KserveGrpcSettings } from "../../../../lib/engines/kserve-grpc.js";
import { Metadata, status, type CallOptions, type ServiceError } from "@grpc/grpc-js";
import type {
  GRPCInferenceServiceClient,
  InferParameter,
  ModelConfigResponse,
  ModelMetadataResponse,
  ModelReadyResponse,
  ModelInferRequest,
  ModelInferResponse,
  ModelStreamInferResponse,
} from "../../../../proto/gen/ts/grpc_service.js";
import type { ModelConfig } from "../../../../proto/gen/ts/model_config.js";
import {
  abortedError,
  DataPlaneError,
  internal,
  unavailable,
  UpstreamStatusError,
  type ErrorKind,
} from "../../../../lib/errors.js";
import { isDatatype } from "../../../../lib/model-repository/datatypes.js";
import { isTrue } from "../../tensors/parameters.js";
import { elementCount, type Tensor } from "../../tensors/tensor.js";
import { emptyContents, typedToRaw } from "../../tensors/typed.js";
import type { Engine, EngineRequest, EngineResponse, EngineRuntime, InferOptions } from "../engine.js";
import { Endpoint, isTransportFailure, probeLive, resolveAddresses } from "./endpoints.js";

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

const RESOLVE_EVERY_MS = 30_000;
/** How long ModelMetadata/ModelConfig/ModelReady wait for the upstream. */
const DESCRIBE_DEADLINE_MS = 10_000;
const STEERING_PARAMETERS = new Set(["triton_final_response"]);

const KIND_OF_CODE: Partial<Record<number, ErrorKind>> = {
  [status.INVALID_ARGUMENT]: "InvalidArgument",
  [status.NOT_FOUND]: "NotFound",
  [status.UNAVAILABLE]: "Unavailable",
  [status.DEADLINE_EXCEEDED]: "DeadlineExceeded",
  [status.CANCELLED]: "Cancelled",
  [status.FAILED_PRECONDITION]: "FailedPrecondition",
  [status.RESOURCE_EXHAUSTED]: "ResourceExhausted",
  [status.UNIMPLEMENTED]: "Unimplemented",
};

export class KserveGrpcEngine implements Engine {
  private endpoints: Endpoint[] = [];
  private resolvedAt = 0;
  private resolving: Promise<void> | undefined;
  private nextIndex = 0;
  /** sequence_id -> the endpoint that holds the sequence's state. */
  private readonly sequences = new Map<string, Endpoint>();
  private closed = false;

  constructor(private readonly settings: Settings) {}

  ready(): boolean {
    void this.refreshEndpoints();
    return this.endpoints.length === 0 || this.endpoints.some((endpoint) => endpoint.healthy);
  }

  async *infer(
    request: EngineRequest,
    { signal, deadline, traceHeaders }: InferOptions,
  ): AsyncIterable<EngineResponse> {
    const call: UpstreamCall = { signal, deadline, metadata: metadataOf(traceHeaders) };
    await this.refreshEndpoints();
    const sequence = sequenceKey(request.parameters);
    const upstreamRequest = this.upstreamRequest(request);
    const attempts = sequence === undefined && !this.settings.decoupled ? this.endpoints.length : 1;
    for (let attempt = 1; ; attempt++) {
      const endpoint = this.pick(sequence);
      endpoint.outstanding++;
      try {
        if (this.settings.decoupled) {
          yield* this.stream(endpoint, upstreamRequest, call);
        } else {
          yield await this.unary(endpoint, upstreamRequest, call);
        }
        if (sequence !== undefined && isTrue(request.parameters["sequence_end"])) this.sequences.delete(sequence);
        return;
      } catch (error) {
        // A request refused at connect never reached the server: try the next endpoint.
        const retryable = error instanceof UpstreamStatusError && error.grpcCode === status.UNAVAILABLE;
        if (!retryable || attempt >= attempts || !this.endpoints.some((candidate) => candidate.healthy)) throw error;
      } finally {
        endpoint.outstanding--;
      }
    }
  }

  async modelMetadata(): Promise<ModelMetadataResponse> {
    const request = { name: this.settings.upstreamModel, version: this.settings.upstreamVersion };
    return this.ask((client, options, done) => client.modelMetadata(request, new Metadata(), options, done));
  }

  async modelConfig(): Promise<ModelConfig> {
    const request = { name: this.settings.upstreamModel, version: this.settings.upstreamVersion };
    const reply = await this.ask<ModelConfigResponse>((client, options, done) =>
      client.modelConfig(request, new Metadata(), options, done),
    );
    if (reply.config === undefined) throw internal(`upstream gave no config for model '${request.name}'`);
    return reply.config;
  }

  async modelReady(): Promise<boolean> {
    const request = { name: this.settings.upstreamModel, version: this.settings.upstreamVersion };
    const reply = await this.ask<ModelReadyResponse>((client, options, done) =>
      client.modelReady(request, new Metadata(), options, done),
    ).catch(() => ({ ready: false }));
    return reply.ready;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const endpoint of this.endpoints) endpoint.close();
  }

  /**
   * A unary question to one healthy upstream, the next one if it is unreachable; the
   * upstream's answer (or status) comes back as it is.
   */
  private async ask<Reply>(
    send: (
      client: GRPCInferenceServiceClient,
      options: Partial<CallOptions>,
      done: (error: ServiceError | null, reply: Reply) => void,
    ) => void,
  ): Promise<Reply> {
    await this.refreshEndpoints();
    const never = new AbortController().signal;
    for (let attempt = 1; ; attempt++) {
      const endpoint = this.pick(undefined);
      try {
        return await new Promise<Reply>((resolve, reject) =>
          send(endpoint.client, { deadline: Date.now() + DESCRIBE_DEADLINE_MS }, (error, reply) =>
            error === null ? resolve(reply) : reject(this.upstreamError(endpoint, error, never)),
          ),
        );
      } catch (error) {
        const retryable = error instanceof UpstreamStatusError && error.grpcCode === status.UNAVAILABLE;
        if (!retryable || attempt >= this.endpoints.length) throw error;
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

  private pick(sequence: string | undefined): Endpoint {
    if (sequence !== undefined) {
      const bound = this.sequences.get(sequence);
      if (bound !== undefined) {
        if (!bound.healthy) {
          throw unavailable(
            `model '${this.settings.model}': sequence ${sequence} is bound to upstream ${bound.address}, which is unavailable (${bound.lastError})`,
          );
        }
        return bound;
      }
    }
    const healthy = this.endpoints.filter((endpoint) => endpoint.healthy);
    if (healthy.length === 0) {
      const reasons = this.endpoints.map((endpoint) => `${endpoint.address}: ${endpoint.lastError || "unreachable"}`);
      throw unavailable(
        `model '${this.settings.model}': no healthy upstream (${reasons.join("; ") || this.settings.targets.join(", ")})`,
      );
    }
    let chosen: Endpoint;
    if (this.settings.routing === "least_outstanding") {
      chosen = healthy.reduce((best, candidate) => (candidate.outstanding < best.outstanding ? candidate : best));
    } else {
      chosen = healthy[this.nextIndex % healthy.length]!;
      this.nextIndex++;
    }
    if (sequence !== undefined) this.sequences.set(sequence, chosen);
    return chosen;
  }

  private unary(
    endpoint: Endpoint,
    request: ModelInferRequest,
    { signal, deadline, metadata }: UpstreamCall,
  ): Promise<EngineResponse> {
    return new Promise((resolve, reject) => {
      const call = endpoint.client.modelInfer(request, metadata, { deadline }, (error, response) => {
        signal.removeEventListener("abort", cancel);
        if (error !== null) reject(this.upstreamError(endpoint, error, signal));
        else resolve(fromUpstream(response));
      });
      const cancel = (): void => call.cancel();
      if (signal.aborted) cancel();
      else signal.addEventListener("abort", cancel, { once: true });
    });
  }

  private async *stream(
    endpoint: Endpoint,
    request: ModelInferRequest,
    { signal, deadline, metadata }: UpstreamCall,
  ): AsyncIterable<EngineResponse> {
    // The client's deadline goes upstream too, so the upstream stops when it passes.
    const call = endpoint.client.modelStreamInfer(metadata, { deadline });
    const cancel = (): void => call.cancel();
    signal.addEventListener("abort", cancel, { once: true });
    try {
      call.write(request);
      call.end();
      for await (const message of call as AsyncIterable<ModelStreamInferResponse>) {
        if (message.errorMessage !== "") {
          throw new UpstreamStatusError(
            "Internal",
            status.INTERNAL,
            `upstream ${endpoint.address}: ${message.errorMessage}`,
          );
        }
        if (message.inferResponse === undefined) continue;
        const response = fromUpstream(message.inferResponse);
        // An empty final response only closes the request; our pipeline sends its own.
        if (response.outputs.length === 0 && isTrue(message.inferResponse.parameters["triton_final_response"]))
          continue;
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

  private upstreamError(endpoint: Endpoint, error: ServiceError, signal: AbortSignal): DataPlaneError {
    if (signal.aborted) return abortedError(signal);
    if (isTransportFailure(error)) {
      endpoint.markFailed(error.details, probeLive);
      return new UpstreamStatusError(
        "Unavailable",
        status.UNAVAILABLE,
        `model '${this.settings.model}': upstream ${endpoint.address} is unavailable: ${error.details}`,
      );
    }
    return new UpstreamStatusError(KIND_OF_CODE[error.code] ?? "Internal", error.code, error.details);
  }

  /** Resolves the upstream addresses on first use and every 30 s (or when all are down). */
  private refreshEndpoints(): Promise<void> {
    const stale = Date.now() - this.resolvedAt > RESOLVE_EVERY_MS;
    const allDown = this.endpoints.length > 0 && this.endpoints.every((endpoint) => !endpoint.healthy);
    if (this.closed || this.resolving !== undefined || (this.endpoints.length > 0 && !stale && !allDown)) {
      return this.resolving ?? Promise.resolve();
    }
    this.resolving = resolveAddresses(this.settings.targets)
      .then((addresses) => {
        const kept = this.endpoints.filter((endpoint) => addresses.includes(endpoint.address));
        for (const endpoint of this.endpoints) if (!kept.includes(endpoint)) endpoint.close();
        const known = new Set(kept.map((endpoint) => endpoint.address));
        const added = addresses.filter((address) => !known.has(address));
        this.endpoints = [...kept, ...added.map((address) => new Endpoint(address, this.settings.runtime))];
        this.resolvedAt = Date.now();
      })
      .finally(() => (this.resolving = undefined));
    return this.resolving;
  }
}

/** An upstream response as engine tensors: raw outputs as they came, typed ones converted. */
function fromUpstream(response: ModelInferResponse): EngineResponse {
  const outputs = response.outputs.map((output, index): Tensor => {
    if (!isDatatype(output.datatype))
      throw internal(`upstream output '${output.name}' has unknown datatype '${output.datatype}'`);
    const shape = output.shape.map(Number);
    const data =
      response.rawOutputContents[index] ??
      typedToRaw(output.name, output.datatype, output.contents ?? emptyContents(), elementCount(shape));
    return { name: output.name, datatype: output.datatype, shape, data, parameters: output.parameters };
  });
  const parameters = Object.fromEntries(
    Object.entries(response.parameters).filter(([key]) => !STEERING_PARAMETERS.has(key)),
  );
  return { outputs, parameters };
}

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

function sequenceKey(parameters: Readonly<Record<string, InferParameter>>): string | undefined {
  const choice = parameters["sequence_id"]?.parameterChoice;
  if (choice === undefined) return undefined;
  const key = String(choice.value);
  return key === "0" || key === "" ? undefined : key;
}

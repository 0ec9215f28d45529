import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { errorTypeOf, type ComponentMetrics, type ObservedModel } from "./component.js";

/**
 * NVIDIA Dynamo's KServe frontend's dynamo_frontend_* families, for the inference RPCs. For a
 * streamed request every response is one "token" (an LLM engine sends one delta per
 * response): time to first token is the time to the first response, inter-token latency
 * the gap between responses.
 */

/**
 * Where a request came in (the `endpoint` label): a gRPC RPC, or an HTTP route of the front
 * door (KServe v2 infer, Triton's generate extension, the OpenAI-compatible routes).
 */
export type InferenceEndpoint =
  | "ModelInfer"
  | "ModelStreamInfer"
  | "ModelInferStream"
  | "infer"
  | "generate"
  | "generate_stream"
  | "completions"
  | "chat_completions"
  /** A model's call to another model (BLS, from Python models). */
  | "bls";
export type RequestType = "unary" | "stream";

/**
 * What happens to one request, reported by the inference pipeline: the one observation that
 * feeds both the dynamo_frontend_* and the dynamo_component_* families.
 */
export interface RequestObservation {
  /** The request's inputs are read: `bytes` of tensor data came in. */
  received(bytes: number): void;
  /** A response was produced (for streams: a token), taking `bytes` out. */
  response(bytes: number): void;
  /** undefined: it succeeded; otherwise what it failed with. */
  end(failure: unknown): void;
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const TOKEN_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192];

export class FrontendMetrics {
  private readonly requests: Counter<"model" | "endpoint" | "request_type" | "status" | "error_type">;
  private readonly inflight: Gauge<"model">;
  private readonly duration: Histogram<"model">;
  private readonly timeToFirstToken: Histogram<"model">;
  private readonly interTokenLatency: Histogram<"model">;
  private readonly outputTokens: Histogram<"model">;

  /**
   * `servedModels` names the models loaded now: each gets an in-flight series at every scrape,
   * 0 when idle. `component`: the dynamo_component_* families, fed by the same observations.
   */
  constructor(
    register: Registry,
    servedModels: () => Iterable<string>,
    private readonly component: ComponentMetrics,
  ) {
    const registers = [register];
    this.requests = new Counter({
      name: "dynamo_frontend_requests_total",
      help: "Total number of inference requests, by model, endpoint (gRPC RPC or HTTP route), request type, status and error type",
      // error_type: Dynamo's classification of a failure by its status ("" for a success).
      labelNames: ["model", "endpoint", "request_type", "status", "error_type"],
      registers,
    });
    this.inflight = new Gauge({
      name: "dynamo_frontend_inflight_requests",
      help: "Inference requests being processed now",
      labelNames: ["model"],
      registers,
      // An autoscaler averages this over pods: a pod that has served nothing yet must say 0,
      // not be missing (an HPA takes a missing pod to be at its target when scaling down).
      collect() {
        for (const model of servedModels()) this.inc({ model }, 0);
      },
    });
    this.duration = new Histogram({
      name: "dynamo_frontend_request_duration_seconds",
      help: "Duration of inference requests, from arrival to the last response",
      labelNames: ["model"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.timeToFirstToken = new Histogram({
      name: "dynamo_frontend_time_to_first_token_seconds",
      help: "Time from a streamed request's arrival to its first response",
      labelNames: ["model"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.interTokenLatency = new Histogram({
      name: "dynamo_frontend_inter_token_latency_seconds",
      help: "Time between consecutive responses of a streamed request",
      labelNames: ["model"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.outputTokens = new Histogram({
      name: "dynamo_frontend_output_sequence_tokens",
      help: "Responses (tokens) per streamed request",
      labelNames: ["model"],
      buckets: TOKEN_BUCKETS,
      registers,
    });
  }

  /** A request for a served model refused at admission (e.g. ModelInfer on a decoupled model): an error, nothing in flight. */
  refused(model: ObservedModel, endpoint: InferenceEndpoint, requestType: RequestType, failure: unknown): void {
    this.countRequest(model.name, endpoint, requestType, failure);
    this.component.refused(model, endpoint, failure);
  }

  /**
   * Starts observing a request for a served model (requests for unknown models are not
   * labelled by the name they ask for: clients must not be able to mint series).
   */
  start(model: ObservedModel, endpoint: InferenceEndpoint, requestType: RequestType): RequestObservation {
    const labels = { model: model.name };
    const component = this.component.start(model, endpoint);
    const startedAt = performance.now();
    let lastAt = startedAt;
    let responses = 0;
    this.inflight.inc(labels);
    return {
      received: (bytes) => component.received(bytes),
      response: (bytes) => {
        component.sent(bytes);
        const now = performance.now();
        if (requestType === "stream") {
          const histogram = responses === 0 ? this.timeToFirstToken : this.interTokenLatency;
          histogram.observe(labels, (now - lastAt) / 1000);
        }
        responses++;
        lastAt = now;
      },
      end: (failure) => {
        this.inflight.dec(labels);
        this.countRequest(model.name, endpoint, requestType, failure);
        this.duration.observe(labels, (performance.now() - startedAt) / 1000);
        if (requestType === "stream" && responses > 0) this.outputTokens.observe(labels, responses);
        component.end(failure);
      },
    };
  }

  private countRequest(model: string, endpoint: InferenceEndpoint, requestType: RequestType, failure: unknown): void {
    const outcome =
      failure === undefined
        ? { status: "success", error_type: "" }
        : { status: "error", error_type: errorTypeOf(failure) };
    this.requests.inc({ model, endpoint, request_type: requestType, ...outcome });
  }
}

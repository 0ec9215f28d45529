import type { Registry } from "prom-client";
import {
  errorTypeOf,
  type ComponentMetrics,
  type ComponentSeries,
  type ErrorType,
  type ObservedModel,
} from "./component.js";
import { KeptPerModel, SlotCounter, SlotGauge, SlotHistogram, type HistogramSlot, type ValueSlot } from "./series.js";

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

type RequestLabel = "model" | "endpoint" | "request_type" | "status" | "error_type";

/** The frontend and component series of one model, endpoint and request type: found once, kept with the model. */
class EntrySeries {
  private readonly errorsByType: Partial<Record<ErrorType, ValueSlot>> = {};

  constructor(
    private readonly families: FrontendMetrics["families"],
    private readonly model: string,
    readonly endpoint: InferenceEndpoint,
    readonly requestType: RequestType,
    readonly component: ComponentSeries,
    readonly succeeded: ValueSlot,
    readonly inflight: ValueSlot,
    readonly duration: HistogramSlot,
    readonly timeToFirstToken: HistogramSlot,
    readonly interTokenLatency: HistogramSlot,
    readonly outputTokens: HistogramSlot,
  ) {}

  /** dynamo_frontend_requests_total of the outcome (undefined: a success). */
  countRequest(failure: unknown): void {
    if (failure === undefined) return this.succeeded.add(1);
    const errorType = errorTypeOf(failure);
    const errors = (this.errorsByType[errorType] ??= this.families.requests.series({
      model: this.model,
      endpoint: this.endpoint,
      request_type: this.requestType,
      status: "error",
      error_type: errorType,
    }));
    errors.add(1);
  }
}

/** One request's observation: a handful of numbers; every series it counts into was found before it started. */
class Observation implements RequestObservation {
  private readonly startedAt = performance.now();
  private lastAt = this.startedAt;
  private responses = 0;

  constructor(private readonly series: EntrySeries) {
    series.inflight.add(1);
    series.component.requests.add(1);
    series.component.inflight.add(1);
  }

  received(bytes: number): void {
    this.series.component.requestBytes.add(bytes);
  }

  response(bytes: number): void {
    const { series } = this;
    series.component.responseBytes.add(bytes);
    if (series.requestType === "stream") {
      const now = performance.now();
      const histogram = this.responses === 0 ? series.timeToFirstToken : series.interTokenLatency;
      histogram.observe((now - this.lastAt) / 1000);
      this.lastAt = now;
    }
    this.responses++;
  }

  end(failure: unknown): void {
    const { series } = this;
    const { component } = series;
    const seconds = (performance.now() - this.startedAt) / 1000;
    series.inflight.add(-1);
    series.countRequest(failure);
    series.duration.observe(seconds);
    if (series.requestType === "stream" && this.responses > 0) series.outputTokens.observe(this.responses);
    component.inflight.add(-1);
    component.duration.observe(seconds);
    if (failure !== undefined) component.countFailure(failure);
  }
}

export class FrontendMetrics {
  /** @internal the families, for the series (EntrySeries) that count into them. */
  readonly families: {
    readonly requests: SlotCounter<RequestLabel>;
    readonly inflight: SlotGauge<"model">;
    readonly duration: SlotHistogram<"model">;
    readonly timeToFirstToken: SlotHistogram<"model">;
    readonly interTokenLatency: SlotHistogram<"model">;
    readonly outputTokens: SlotHistogram<"model">;
  };
  /** Each model's series, by endpoint and request type; a model reloaded (a new spec) finds the same series again. */
  private readonly seriesByModel = new KeptPerModel<
    ObservedModel,
    InferenceEndpoint,
    Partial<Record<RequestType, EntrySeries>>
  >(() => ({}));

  /**
   * `servedModels` names the models loaded now: each gets an in-flight series at every scrape,
   * 0 when idle. `component`: the dynamo_component_* families, fed by the same observations.
   */
  constructor(
    register: Registry,
    servedModels: () => Iterable<string>,
    private readonly component: ComponentMetrics,
  ) {
    this.families = {
      requests: new SlotCounter(register, {
        name: "dynamo_frontend_requests_total",
        help: "Total number of inference requests, by model, endpoint (gRPC RPC or HTTP route), request type, status and error type",
        // error_type: Dynamo's classification of a failure by its status ("" for a success).
        labelNames: ["model", "endpoint", "request_type", "status", "error_type"],
      }),
      inflight: new SlotGauge(register, {
        name: "dynamo_frontend_inflight_requests",
        help: "Inference requests being processed now",
        labelNames: ["model"],
        // An autoscaler averages this over pods: a pod that has served nothing yet must say 0,
        // not be missing (an HPA takes a missing pod to be at its target when scaling down).
        beforeScrape: (series) => {
          for (const model of servedModels()) series({ model }).add(0);
        },
      }),
      duration: new SlotHistogram(register, {
        name: "dynamo_frontend_request_duration_seconds",
        help: "Duration of inference requests, from arrival to the last response",
        labelNames: ["model"],
        buckets: LATENCY_BUCKETS,
      }),
      timeToFirstToken: new SlotHistogram(register, {
        name: "dynamo_frontend_time_to_first_token_seconds",
        help: "Time from a streamed request's arrival to its first response",
        labelNames: ["model"],
        buckets: LATENCY_BUCKETS,
      }),
      interTokenLatency: new SlotHistogram(register, {
        name: "dynamo_frontend_inter_token_latency_seconds",
        help: "Time between consecutive responses of a streamed request",
        labelNames: ["model"],
        buckets: LATENCY_BUCKETS,
      }),
      outputTokens: new SlotHistogram(register, {
        name: "dynamo_frontend_output_sequence_tokens",
        help: "Responses (tokens) per streamed request",
        labelNames: ["model"],
        buckets: TOKEN_BUCKETS,
      }),
    };
  }

  /** A request for a served model refused at admission (e.g. ModelInfer on a decoupled model): an error, nothing in flight. */
  refused(model: ObservedModel, endpoint: InferenceEndpoint, requestType: RequestType, failure: unknown): void {
    this.series(model, endpoint, requestType).countRequest(failure);
    this.component.refused(model, endpoint, failure);
  }

  /**
   * Starts observing a request for a served model (requests for unknown models are not
   * labelled by the name they ask for: clients must not be able to mint series).
   */
  start(model: ObservedModel, endpoint: InferenceEndpoint, requestType: RequestType): RequestObservation {
    return new Observation(this.series(model, endpoint, requestType));
  }

  private series(model: ObservedModel, endpoint: InferenceEndpoint, requestType: RequestType): EntrySeries {
    const byType = this.seriesByModel.get(model, endpoint);
    return (byType[requestType] ??= this.newSeries(model, endpoint, requestType));
  }

  private newSeries(model: ObservedModel, endpoint: InferenceEndpoint, requestType: RequestType): EntrySeries {
    const { families } = this;
    const labels = { model: model.name };
    return new EntrySeries(
      families,
      model.name,
      endpoint,
      requestType,
      this.component.series(model, endpoint),
      families.requests.series({
        model: model.name,
        endpoint,
        request_type: requestType,
        status: "success",
        error_type: "",
      }),
      families.inflight.series(labels),
      families.duration.series(labels),
      families.timeToFirstToken.series(labels),
      families.interTokenLatency.series(labels),
      families.outputTokens.series(labels),
    );
  }
}

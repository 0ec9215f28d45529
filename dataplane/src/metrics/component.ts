import type { Registry } from "prom-client";
import { DataPlaneError, type ErrorKind } from "../../../lib/errors.js";
import { KeptPerModel, SlotCounter, SlotGauge, SlotHistogram, type HistogramSlot, type ValueSlot } from "./series.js";

/**
 * NVIDIA Dynamo's dynamo_component_* families: what its runtime's work handler counts for
 * every request an endpoint of a component serves (lib/runtime's prometheus_names.rs,
 * `work_handler`), with the labels its runtime adds to each (`dynamo_namespace`,
 * `dynamo_component`, `dynamo_endpoint`) and the `model` label its backends add. A
 * dashboard or alert written for a Dynamo worker reads this data plane's models the same way.
 *
 * What the labels hold here, where the data plane is frontend and worker in one process:
 * - `dynamo_namespace`: the server's name (--server-name, what ServerMetadata reports). A
 *   Dynamo namespace names one deployment, the scope its components' series are grouped
 *   by; the server name is what names this deployment to its clients, and is the same on
 *   every replica, as a namespace is.
 * - `dynamo_component`: the model's backend (identity, python, onnxruntime, …). A Dynamo
 *   component is the kind of worker that does the work (backend, prefill, decode); here
 *   that is the engine behind the model. It is bounded by the repository, never by clients.
 * - `dynamo_endpoint`: the way the request came in (ModelInfer, ModelStreamInfer, infer,
 *   generate, …), as `endpoint` of dynamo_frontend_*: a Dynamo endpoint is what a
 *   component serves requests on.
 * - `model`: the model's name, for served models only (clients cannot mint series).
 *
 * Bytes are tensor bytes: what a request's inputs hold once read, what each response's
 * outputs hold (or the whole message, for a reply passed through from an upstream). Dynamo
 * counts the messages its request plane carries; here handlers never see a message's wire
 * size (grpc-js decodes it first) and a JSON body's length is text, not data, so the same
 * measure for every way in is the tensors'.
 */

export interface ObservedModel {
  readonly name: string;
  readonly backend: string;
}

/**
 * Why a request failed, in the values of Dynamo's `error_type` label (frontend_service's
 * fine-grained classification, the one keyed by status). Dynamo's work handler also uses
 * values for stages of its own request plane (two-part message decoding, NATS/TCP
 * publishing) that this data plane does not have.
 */
export type ErrorType = "validation" | "not_found" | "overload" | "cancelled" | "internal" | "not_implemented";

const ERROR_TYPES: Readonly<Record<ErrorKind, ErrorType>> = {
  InvalidArgument: "validation",
  FailedPrecondition: "validation",
  NotFound: "not_found",
  AlreadyExists: "validation",
  Unavailable: "overload",
  ResourceExhausted: "overload",
  Cancelled: "cancelled",
  DeadlineExceeded: "cancelled",
  Unimplemented: "not_implemented",
  Internal: "internal",
};

export function errorTypeOf(failure: unknown): ErrorType {
  return failure instanceof DataPlaneError ? ERROR_TYPES[failure.kind] : "internal";
}

type Label = "dynamo_namespace" | "dynamo_component" | "dynamo_endpoint" | "model";
const LABELS: readonly Label[] = ["dynamo_namespace", "dynamo_component", "dynamo_endpoint", "model"];

/** Dynamo's buckets for work handlers: sub-second resolution, and up to the minutes an LLM generation can last. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600];

/**
 * The series of one model on one endpoint, found once (metrics/series.ts) and kept for
 * the model: a request adds to them without looking anything up.
 */
export class ComponentSeries {
  private readonly errorsByType: Partial<Record<ErrorType, ValueSlot>> = {};
  private cancellationSlot: ValueSlot | undefined;

  constructor(
    private readonly families: ComponentMetrics["families"],
    private readonly labels: Readonly<Record<Label, string>>,
    readonly requests: ValueSlot,
    readonly duration: HistogramSlot,
    readonly inflight: ValueSlot,
    readonly requestBytes: ValueSlot,
    readonly responseBytes: ValueSlot,
  ) {}

  /** A request that failed: an error of its type, and a cancellation when it was one. */
  countFailure(failure: unknown): void {
    const errorType = errorTypeOf(failure);
    const errors = (this.errorsByType[errorType] ??= this.families.errors.series({
      ...this.labels,
      error_type: errorType,
    }));
    errors.add(1);
    if (errorType === "cancelled") {
      this.cancellationSlot ??= this.families.cancellations.series(this.labels);
      this.cancellationSlot.add(1);
    }
  }
}

export class ComponentMetrics {
  /** @internal the families, for the series (ComponentSeries) that count into them. */
  readonly families: {
    readonly requests: SlotCounter<Label>;
    readonly duration: SlotHistogram<Label>;
    readonly inflight: SlotGauge<Label>;
    readonly requestBytes: SlotCounter<Label>;
    readonly responseBytes: SlotCounter<Label>;
    readonly errors: SlotCounter<Label | "error_type">;
    readonly cancellations: SlotCounter<Label>;
  };
  /** Each model's series, by endpoint; a model reloaded (a new spec) finds the same series again. */
  private readonly seriesByModel = new KeptPerModel((model: ObservedModel, endpoint: string) =>
    this.newSeries(model, endpoint),
  );

  /**
   * `namespace`: the dynamo_namespace label. (Unlike dynamo_frontend_inflight_requests, which
   * autoscalers read, the in-flight series appear with a model's first request on an endpoint.)
   */
  constructor(
    register: Registry,
    private readonly namespace: string,
  ) {
    const labelNames = LABELS;
    this.families = {
      requests: new SlotCounter(register, {
        name: "dynamo_component_requests_total",
        help: "Total number of requests processed by work handler",
        labelNames,
      }),
      duration: new SlotHistogram(register, {
        name: "dynamo_component_request_duration_seconds",
        help: "Time spent processing requests by work handler",
        labelNames,
        buckets: DURATION_BUCKETS,
      }),
      inflight: new SlotGauge(register, {
        name: "dynamo_component_inflight_requests",
        help: "Number of requests currently being processed by work handler",
        labelNames,
      }),
      requestBytes: new SlotCounter(register, {
        name: "dynamo_component_request_bytes_total",
        help: "Total number of bytes received in requests by work handler",
        labelNames,
      }),
      responseBytes: new SlotCounter(register, {
        name: "dynamo_component_response_bytes_total",
        help: "Total number of bytes sent in responses by work handler",
        labelNames,
      }),
      errors: new SlotCounter(register, {
        name: "dynamo_component_errors_total",
        help: "Total number of errors in work handler processing",
        labelNames: [...labelNames, "error_type"],
      }),
      cancellations: new SlotCounter(register, {
        name: "dynamo_component_cancellation_total",
        help: "Total number of requests cancelled by work handler",
        labelNames,
      }),
    };
  }

  /** A request refused before it was admitted: counted, and as an error; nothing held, nothing timed. */
  refused(model: ObservedModel, endpoint: string, failure: unknown): void {
    const series = this.series(model, endpoint);
    series.requests.add(1);
    series.countFailure(failure);
  }

  /** The series of a model's requests on an endpoint (made at its first request, then kept with the model). */
  series(model: ObservedModel, endpoint: string): ComponentSeries {
    return this.seriesByModel.get(model, endpoint);
  }

  private newSeries(model: ObservedModel, endpoint: string): ComponentSeries {
    const labels = {
      dynamo_namespace: this.namespace,
      dynamo_component: model.backend,
      dynamo_endpoint: endpoint,
      model: model.name,
    };
    const { families } = this;
    return new ComponentSeries(
      families,
      labels,
      families.requests.series(labels),
      families.duration.series(labels),
      families.inflight.series(labels),
      families.requestBytes.series(labels),
      families.responseBytes.series(labels),
    );
  }
}

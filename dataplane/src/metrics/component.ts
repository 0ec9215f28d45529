import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { DataPlaneError, type ErrorKind } from "../../../lib/errors.js";

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

/** What happens to one request, as the component families count it. */
export interface ComponentObservation {
  /** Bytes the request brought (its input tensors). */
  received(bytes: number): void;
  /** Bytes a response took out (its output tensors, or the message passed through). */
  sent(bytes: number): void;
  /** undefined: it succeeded. */
  end(failure: unknown): void;
}

type Label = "dynamo_namespace" | "dynamo_component" | "dynamo_endpoint" | "model";
const LABELS: readonly Label[] = ["dynamo_namespace", "dynamo_component", "dynamo_endpoint", "model"];

/** Dynamo's buckets for work handlers: sub-second resolution, and up to the minutes an LLM generation can last. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600];

export class ComponentMetrics {
  private readonly requests: Counter<Label>;
  private readonly duration: Histogram<Label>;
  private readonly inflight: Gauge<Label>;
  private readonly requestBytes: Counter<Label>;
  private readonly responseBytes: Counter<Label>;
  private readonly errors: Counter<Label | "error_type">;
  private readonly cancellations: Counter<Label>;

  /**
   * `namespace`: the dynamo_namespace label. (Unlike dynamo_frontend_inflight_requests, which
   * autoscalers read, the in-flight series appear with a model's first request on an endpoint.)
   */
  constructor(
    register: Registry,
    private readonly namespace: string,
  ) {
    const registers = [register];
    const labelNames = LABELS;
    this.requests = new Counter({
      name: "dynamo_component_requests_total",
      help: "Total number of requests processed by work handler",
      labelNames,
      registers,
    });
    this.duration = new Histogram({
      name: "dynamo_component_request_duration_seconds",
      help: "Time spent processing requests by work handler",
      labelNames,
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.inflight = new Gauge({
      name: "dynamo_component_inflight_requests",
      help: "Number of requests currently being processed by work handler",
      labelNames,
      registers,
    });
    this.requestBytes = new Counter({
      name: "dynamo_component_request_bytes_total",
      help: "Total number of bytes received in requests by work handler",
      labelNames,
      registers,
    });
    this.responseBytes = new Counter({
      name: "dynamo_component_response_bytes_total",
      help: "Total number of bytes sent in responses by work handler",
      labelNames,
      registers,
    });
    this.errors = new Counter({
      name: "dynamo_component_errors_total",
      help: "Total number of errors in work handler processing",
      labelNames: [...labelNames, "error_type"],
      registers,
    });
    this.cancellations = new Counter({
      name: "dynamo_component_cancellation_total",
      help: "Total number of requests cancelled by work handler",
      labelNames,
      registers,
    });
  }

  /** A request refused before it was admitted: counted, and as an error; nothing held, nothing timed. */
  refused(model: ObservedModel, endpoint: string, failure: unknown): void {
    const labels = this.labels(model, endpoint);
    this.requests.inc(labels);
    this.countFailure(labels, failure);
  }

  start(model: ObservedModel, endpoint: string): ComponentObservation {
    const labels = this.labels(model, endpoint);
    const stopTimer = this.duration.startTimer(labels);
    this.requests.inc(labels);
    this.inflight.inc(labels);
    return {
      received: (bytes) => this.requestBytes.inc(labels, bytes),
      sent: (bytes) => this.responseBytes.inc(labels, bytes),
      end: (failure) => {
        this.inflight.dec(labels);
        stopTimer();
        if (failure !== undefined) this.countFailure(labels, failure);
      },
    };
  }

  private countFailure(labels: Record<Label, string>, failure: unknown): void {
    const errorType = errorTypeOf(failure);
    this.errors.inc({ ...labels, error_type: errorType });
    if (errorType === "cancelled") this.cancellations.inc(labels);
  }

  private labels(model: ObservedModel, endpoint: string): Record<Label, string> {
    return {
      dynamo_namespace: this.namespace,
      dynamo_component: model.backend,
      dynamo_endpoint: endpoint,
      model: model.name,
    };
  }
}

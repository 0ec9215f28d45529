import {
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { errorMessage } from "../../../lib/errors.js";
import { VERSION } from "../version.js";

/**
 * Optional OpenTelemetry tracing of inference requests, exported over OTLP/HTTP: one
 * server span per request, a child of the caller's W3C `traceparent` (gRPC metadata)
 * when there is one, whose context is handed on to upstream servers (kserve-grpc
 * metadata, openai HTTP headers). Off unless an endpoint is configured; nothing global
 * is registered, so it touches no other code's tracing.
 */

export interface TracingOptions {
  /** OTLP/HTTP traces URL, e.g. http://otel-collector:4318/v1/traces. */
  readonly endpoint: string;
  readonly serviceName: string;
  /** Share of new traces recorded (a caller's sampling decision is followed). */
  readonly sampleRatio: number;
}

/** One request's span. */
export interface RequestSpan {
  /** W3C trace-context headers naming this span, for the upstream request. */
  readonly headers: Readonly<Record<string, string>>;
  end(failure?: unknown): void;
}

/** How a request came in: its span's name (the endpoint) and the attributes that say how. */
export interface SpanEntry {
  readonly endpoint: string;
  readonly protocol: "grpc" | "http" | "bls";
}

/** What a request asks for, as its span's attributes name it. */
export interface SpanRequest {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id: string;
}

/** Where a caller's trace context comes from; read only when tracing is on (reading may copy the call's metadata). */
export interface TraceCarrier {
  readonly headers: Readonly<Record<string, string>>;
}

export interface RequestTracing {
  start(entry: SpanEntry, request: SpanRequest, carrier: TraceCarrier): RequestSpan;
  shutdown(): Promise<void>;
}

const propagator = new W3CTraceContextPropagator();

const NO_SPAN: RequestSpan = { headers: {}, end: () => undefined };

/** Tracing switched off: costs one function call per request, and builds nothing. */
export const NO_TRACING: RequestTracing = {
  start: () => NO_SPAN,
  shutdown: async () => undefined,
};

export function startTracing(options: TracingOptions): RequestTracing {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": options.serviceName, "service.version": VERSION }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(options.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: options.endpoint }) })],
  });
  const tracer: Tracer = provider.getTracer("dynamo-kserve", VERSION);
  return {
    start(entry, request, carrier) {
      const parent = propagator.extract(context.active(), carrier.headers, defaultTextMapGetter);
      const attributes = spanAttributes(entry, request);
      const span: Span = tracer.startSpan(entry.endpoint, { kind: SpanKind.SERVER, attributes }, parent);
      const headers: Record<string, string> = {};
      propagator.inject(trace.setSpan(parent, span), headers, defaultTextMapSetter);
      return {
        headers,
        end(failure) {
          if (failure !== undefined) {
            span.setStatus({ code: SpanStatusCode.ERROR, message: errorMessage(failure) });
          }
          span.end();
        },
      };
    },
    shutdown: () => provider.shutdown(),
  };
}

function spanAttributes(entry: SpanEntry, request: SpanRequest): Attributes {
  return {
    ...(entry.protocol === "grpc"
      ? { "rpc.system": "grpc", "rpc.method": entry.endpoint }
      : entry.protocol === "http"
        ? { "http.route": entry.endpoint }
        : { "inference.call": entry.endpoint }),
    "model.name": request.modelName,
    "model.version": request.modelVersion,
    "request.id": request.id,
  };
}

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

export interface RequestTracing {
  start(name: string, incoming: Readonly<Record<string, string>>, attributes: Attributes): RequestSpan;
  shutdown(): Promise<void>;
}

const propagator = new W3CTraceContextPropagator();

const NO_SPAN: RequestSpan = { headers: {}, end: () => undefined };

/** Tracing switched off: costs one function call per request. */
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
    start(name, incoming, attributes) {
      const parent = propagator.extract(context.active(), incoming, defaultTextMapGetter);
      const span: Span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
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

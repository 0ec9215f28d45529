import { status, type ServerMethodDefinition } from "@grpc/grpc-js";
import type { Registry } from "prom-client";
import { SlotCounter, SlotHistogram, type HistogramSlot, type ValueSlot } from "./series.js";

/**
 * The standard gRPC server families (the names go-grpc-prometheus and most dashboards
 * use), counted by the server's call interceptor (server/call-interceptor.ts) so every
 * service is covered: inference, extensions, health and reflection.
 */

type GrpcType = "unary" | "client_stream" | "server_stream" | "bidi_stream";

const CODE_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(status)
    .filter(([, value]) => typeof value === "number")
    .map(([name, value]) => [value as number, name]),
);

type MethodLabel = "grpc_type" | "grpc_service" | "grpc_method";

/** The series of one gRPC method, found at its first call and kept for the next ones. */
export class GrpcMethodSeries {
  private readonly handledByCode: ValueSlot[] = [];

  constructor(
    private readonly handledFamily: SlotCounter<MethodLabel | "grpc_code">,
    private readonly labels: Readonly<Record<MethodLabel, string>>,
    readonly started: ValueSlot,
    readonly handling: HistogramSlot,
    readonly received: ValueSlot,
    readonly sent: ValueSlot,
  ) {}

  /** A call ended with `code` after `seconds`. */
  handled(code: status, seconds: number): void {
    const handled = (this.handledByCode[code] ??= this.handledFamily.series({
      ...this.labels,
      grpc_code: CODE_NAMES[code] ?? String(code),
    }));
    handled.add(1);
    this.handling.observe(seconds);
  }
}

/** The grpc_server_* families, with each method's series kept by its path. */
export class GrpcServerMetrics {
  private readonly started: SlotCounter<MethodLabel>;
  private readonly handled: SlotCounter<MethodLabel | "grpc_code">;
  private readonly handling: SlotHistogram<MethodLabel>;
  private readonly received: SlotCounter<MethodLabel>;
  private readonly sent: SlotCounter<MethodLabel>;
  private readonly byPath = new Map<string, GrpcMethodSeries>();

  constructor(register: Registry) {
    const labelNames = ["grpc_type", "grpc_service", "grpc_method"] as const;
    this.started = new SlotCounter(register, {
      name: "grpc_server_started_total",
      help: "Total number of RPCs started on the server.",
      labelNames,
    });
    this.handled = new SlotCounter(register, {
      name: "grpc_server_handled_total",
      help: "Total number of RPCs completed on the server, regardless of success or failure.",
      labelNames: [...labelNames, "grpc_code"],
    });
    this.handling = new SlotHistogram(register, {
      name: "grpc_server_handling_seconds",
      help: "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
      labelNames,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    });
    this.received = new SlotCounter(register, {
      name: "grpc_server_msg_received_total",
      help: "Total number of RPC stream messages received on the server.",
      labelNames,
    });
    this.sent = new SlotCounter(register, {
      name: "grpc_server_msg_sent_total",
      help: "Total number of gRPC stream messages sent by the server.",
      labelNames,
    });
  }

  /** The series of a method (the server's methods are fixed: one entry per path). */
  method(method: ServerMethodDefinition<unknown, unknown>): GrpcMethodSeries {
    let series = this.byPath.get(method.path);
    if (series === undefined) {
      const [service = "", name = ""] = method.path.slice(1).split("/");
      const labels = {
        grpc_type: grpcType(method.requestStream, method.responseStream),
        grpc_service: service,
        grpc_method: name,
      };
      series = new GrpcMethodSeries(
        this.handled,
        labels,
        this.started.series(labels),
        this.handling.series(labels),
        this.received.series(labels),
        this.sent.series(labels),
      );
      this.byPath.set(method.path, series);
    }
    return series;
  }
}

function grpcType(requestStream: boolean, responseStream: boolean): GrpcType {
  if (requestStream) return responseStream ? "bidi_stream" : "client_stream";
  return responseStream ? "server_stream" : "unary";
}

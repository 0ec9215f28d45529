import {
  ResponderBuilder,
  ServerInterceptingCall,
  ServerListenerBuilder,
  status,
  type ServerInterceptor,
} from "@grpc/grpc-js";
import { Counter, Histogram, type Registry } from "prom-client";

/**
 * The standard gRPC server families (the names go-grpc-prometheus and most dashboards
 * use), counted by a grpc-js server interceptor so every service is covered: inference,
 * extensions, health and reflection.
 */

type GrpcType = "unary" | "client_stream" | "server_stream" | "bidi_stream";

const CODE_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(status)
    .filter(([, value]) => typeof value === "number")
    .map(([name, value]) => [value as number, name]),
);

export function grpcServerMetrics(register: Registry): ServerInterceptor {
  const labelNames = ["grpc_type", "grpc_service", "grpc_method"] as const;
  const started = new Counter({
    name: "grpc_server_started_total",
    help: "Total number of RPCs started on the server.",
    labelNames,
    registers: [register],
  });
  const handled = new Counter({
    name: "grpc_server_handled_total",
    help: "Total number of RPCs completed on the server, regardless of success or failure.",
    labelNames: [...labelNames, "grpc_code"],
    registers: [register],
  });
  const handling = new Histogram({
    name: "grpc_server_handling_seconds",
    help: "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
    labelNames,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [register],
  });
  const received = new Counter({
    name: "grpc_server_msg_received_total",
    help: "Total number of RPC stream messages received on the server.",
    labelNames,
    registers: [register],
  });
  const sent = new Counter({
    name: "grpc_server_msg_sent_total",
    help: "Total number of gRPC stream messages sent by the server.",
    labelNames,
    registers: [register],
  });

  return (method, call) => {
    const [service = "", name = ""] = method.path.slice(1).split("/");
    const labels = {
      grpc_type: grpcType(method.requestStream, method.responseStream),
      grpc_service: service,
      grpc_method: name,
    };
    const startedAt = process.hrtime.bigint();
    started.inc(labels);
    let ended = false;
    const end = (code: status): void => {
      if (ended) return;
      ended = true;
      handled.inc({ ...labels, grpc_code: CODE_NAMES[code] ?? String(code) });
      handling.observe(labels, Number(process.hrtime.bigint() - startedAt) / 1e9);
    };
    return new ServerInterceptingCall(
      call,
      new ResponderBuilder()
        .withStart((next) =>
          next(
            new ServerListenerBuilder()
              .withOnReceiveMessage((message, forward) => {
                received.inc(labels);
                forward(message);
              })
              // A call the client cancelled, or whose deadline grpc-js enforced itself,
              // ends without a status passing through here; grpc-js also reports every
              // ended call as cancelled, so only the first ending counts.
              .withOnCancel(() => end(deadlinePassed(call.getDeadline()) ? status.DEADLINE_EXCEEDED : status.CANCELLED))
              .build(),
          ),
        )
        .withSendMessage((message, forward) => {
          sent.inc(labels);
          forward(message);
        })
        .withSendStatus((outcome, forward) => {
          end(outcome.code);
          forward(outcome);
        })
        .build(),
    );
  };
}

function deadlinePassed(deadline: Date | number): boolean {
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return Number.isFinite(at) && Date.now() >= at;
}

function grpcType(requestStream: boolean, responseStream: boolean): GrpcType {
  if (requestStream) return responseStream ? "bidi_stream" : "client_stream";
  return responseStream ? "server_stream" : "unary";
}

import { Counter, Histogram, type Registry } from "prom-client";

/**
 * The HTTP front door's request families, by method, route (the route's template, never the
 * path a client sent: clients must not be able to mint series) and status.
 */
export class HttpServerMetrics {
  private readonly requests: Counter<"method" | "route" | "status">;
  private readonly duration: Histogram<"method" | "route" | "status">;

  constructor(register: Registry) {
    const labelNames = ["method", "route", "status"] as const;
    this.requests = new Counter({
      name: "http_server_requests_total",
      help: "HTTP requests the front door answered, by method, route and status",
      labelNames,
      registers: [register],
    });
    this.duration = new Histogram({
      name: "http_server_request_duration_seconds",
      help: "Time from an HTTP request's arrival to the end of its response (streams: the last event)",
      labelNames,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [register],
    });
  }

  observe(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status: String(status) };
    this.requests.inc(labels);
    this.duration.observe(labels, seconds);
  }
}

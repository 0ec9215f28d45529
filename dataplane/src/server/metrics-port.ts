import type { Server } from "node:http";
import { startSidePort } from "../../../lib/http/side-port.js";

/** What the metrics port answers from. */
export interface MetricsPort {
  live(): boolean;
  ready(): boolean;
  /** What /metrics shows (Prometheus text format). */
  readonly metrics: { metrics(): Promise<string>; readonly contentType: string };
}

/**
 * The metrics port (--metrics-port): the HTTP side port (lib/http/side-port.ts) for Kubernetes
 * probes and Prometheus, KServe v2's /v2/health/live and /v2/health/ready (200 or 503), and
 * /metrics. It needs no token and carries no inference (that is the front door, http/server.ts).
 */
export function startMetricsPort(
  host: string,
  port: number,
  served: MetricsPort,
): Promise<{ server: Server; port: number }> {
  return startSidePort(host, port, {
    probes: { "/v2/health/live": () => served.live(), "/v2/health/ready": () => served.ready() },
    metrics: served.metrics,
  });
}

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** What the metrics port answers from. */
export interface MetricsPort {
  live(): boolean;
  ready(): boolean;
  /** What /metrics shows (Prometheus text format). */
  readonly metrics: { metrics(): Promise<string>; readonly contentType: string };
}

/**
 * The metrics port (--metrics-port): the HTTP side port for Kubernetes probes and Prometheus,
 * KServe v2's /v2/health/live and /v2/health/ready (200 or 503), and /metrics. It needs no
 * token and carries no inference (that is the front door, http/server.ts).
 */
export async function startMetricsPort(
  host: string,
  port: number,
  served: MetricsPort,
): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (request.method !== "GET" && request.method !== "HEAD") {
      response.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
    if (path === "/metrics") {
      served.metrics.metrics().then(
        (text) => response.writeHead(200, { "content-type": served.metrics.contentType }).end(text),
        (error: unknown) => response.writeHead(500, { "content-type": "text/plain" }).end(`${String(error)}\n`),
      );
      return;
    }
    const check = path === "/v2/health/live" ? served.live : path === "/v2/health/ready" ? served.ready : undefined;
    if (check === undefined) {
      response.writeHead(404, { "content-type": "text/plain" }).end(`not found: ${path}\n`);
      return;
    }
    response.writeHead(check() ? 200 : 503).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}

/** Closes the probes-and-metrics port, with its kept-alive connections (probes hold none open for long). */
export function closeHttpServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise<void>((resolve) => server.close(() => resolve()));
}

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** What a side port answers from: probes by path (200 or 503), and /metrics. */
export interface SidePort {
  readonly probes: Readonly<Record<string, () => boolean>>;
  /** What /metrics shows (Prometheus text format). */
  readonly metrics: { metrics(): Promise<string>; readonly contentType: string };
}

/**
 * An HTTP side port for Kubernetes probes and Prometheus (the data plane's and the activator's
 * --metrics-port): each probe's path answers 200 or 503, /metrics the registry's text. It needs
 * no token and carries no inference.
 */
export async function startSidePort(
  host: string,
  port: number,
  served: SidePort,
): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0]!;
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
    const check = Object.hasOwn(served.probes, path) ? served.probes[path] : undefined;
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

/** Closes a side port, with its kept-alive connections (probes hold none open for long). */
export function closeHttpServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise<void>((resolve) => server.close(() => resolve()));
}

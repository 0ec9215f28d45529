import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface HealthProbe {
  live(): boolean;
  ready(): boolean;
}

/**
 * The HTTP side port for Kubernetes probes: KServe v2's /v2/health/live and
 * /v2/health/ready (200 or 503). It needs no token and carries no inference.
 */
export async function startHttpServer(
  host: string,
  port: number,
  probe: HealthProbe,
): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    const check = path === "/v2/health/live" ? probe.live : path === "/v2/health/ready" ? probe.ready : undefined;
    if (check === undefined || (request.method !== "GET" && request.method !== "HEAD")) {
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

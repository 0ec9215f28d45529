import { once } from "node:events";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { ServiceMonitor } from "../../operator/src/resources/service-monitor.js";
import { Daemons, waitFor } from "../cluster/daemons.js";
import { freePort } from "./ports.js";

/** Debian's Prometheus server (apt-get install prometheus). */
export const PROMETHEUS = "/usr/bin/prometheus";

/** One endpoint a ServiceMonitor selects: a ready address of a selected Service's port. */
export interface ScrapeTarget {
  readonly address: string;
  readonly labels: { readonly namespace: string; readonly service: string; readonly pod: string };
}

interface EndpointSliceList {
  items: {
    metadata: { labels?: Record<string, string> };
    ports?: { name?: string; port?: number }[];
    endpoints: { addresses: string[]; conditions?: { ready?: boolean }; targetRef?: { name?: string } }[];
  }[];
}

/**
 * What the Prometheus Operator's service discovery finds for a ServiceMonitor: the ready
 * endpoints of the Services in its namespace that carry every matchLabels label, on the
 * port named by each monitor endpoint. Debian's Prometheus is built without Kubernetes
 * service discovery, so the test resolves the monitor itself (from EndpointSlices, read with
 * `getJson`) and hands Prometheus static targets.
 */
export function resolveServiceMonitor(
  monitor: ServiceMonitor,
  getJson: (...args: string[]) => unknown,
): ScrapeTarget[] {
  const { namespace } = monitor.metadata;
  const selector = Object.entries(monitor.spec.selector.matchLabels)
    .map(([key, value]) => `${key}=${value}`)
    .join(",");
  const services = getJson("get", "services", "-n", namespace, "-l", selector, "-o", "json") as {
    items: { metadata: { name: string } }[];
  };
  const targets: ScrapeTarget[] = [];
  for (const service of services.items) {
    const slices = getJson(
      "get",
      "endpointslices.discovery.k8s.io",
      "-n",
      namespace,
      "-l",
      `kubernetes.io/service-name=${service.metadata.name}`,
      "-o",
      "json",
    ) as EndpointSliceList;
    for (const slice of slices.items) {
      for (const { port: portName } of monitor.spec.endpoints) {
        const port = slice.ports?.find((candidate) => candidate.name === portName)?.port;
        if (port === undefined) continue;
        for (const endpoint of slice.endpoints) {
          if (endpoint.conditions?.ready === false) continue;
          for (const address of endpoint.addresses) {
            targets.push({
              address: `${address}:${port}`,
              labels: { namespace, service: service.metadata.name, pod: endpoint.targetRef?.name ?? "" },
            });
          }
        }
      }
    }
  }
  return targets;
}

/** The scrape job the Prometheus Operator generates for the monitor's first endpoint, over `targets`. */
export function scrapeJobFor(monitor: ServiceMonitor, targets: readonly ScrapeTarget[]): object {
  const [endpoint] = monitor.spec.endpoints;
  return {
    job_name: `serviceMonitor/${monitor.metadata.namespace}/${monitor.metadata.name}/0`,
    scrape_interval: endpoint?.interval,
    metrics_path: endpoint?.path,
    scheme: endpoint?.scheme,
    static_configs: targets.map((target) => ({ targets: [target.address], labels: target.labels })),
  };
}

/** A Prometheus server on loopback with the given scrape jobs; query() runs PromQL. */
export class PrometheusServer {
  private constructor(
    private readonly daemons: Daemons,
    readonly url: string,
  ) {}

  static async start(dir: string, jobs: readonly object[]): Promise<PrometheusServer> {
    mkdirSync(dir, { recursive: true });
    const config = join(dir, "prometheus.yml");
    writeFileSync(config, stringify({ global: { scrape_interval: "5s" }, scrape_configs: jobs }));
    const port = await freePort();
    const daemons = new Daemons(dir);
    const child = daemons.start("prometheus", PROMETHEUS, [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ]);
    const server = new PrometheusServer(daemons, `http://127.0.0.1:${port}`);
    const exited = once(child, "close").then(() => {
      throw new Error(`Prometheus exited: ${readFileSync(join(dir, "prometheus.log"), "utf8").slice(-2000)}`);
    });
    await Promise.race([waitFor("Prometheus ready", async () => (await fetch(`${server.url}/-/ready`)).ok), exited]);
    exited.catch(() => undefined);
    return server;
  }

  /** An instant PromQL query; resolves with each series' labels and value. */
  async query(promql: string): Promise<{ labels: Record<string, string>; value: number }[]> {
    const response = await fetch(`${this.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await response.json()) as {
      status: string;
      error?: string;
      data?: { result: { metric: Record<string, string>; value: [number, string] }[] };
    };
    if (body.status !== "success") throw new Error(`PromQL ${promql}: ${body.error}`);
    return (body.data?.result ?? []).map((series) => ({ labels: series.metric, value: Number(series.value[1]) }));
  }

  /** The targets Prometheus scrapes, with their health (up/down) and last error. */
  async targets(): Promise<{ scrapeUrl: string; health: string; lastError: string }[]> {
    const response = await fetch(`${this.url}/api/v1/targets`);
    const body = (await response.json()) as {
      data: { activeTargets: { scrapeUrl: string; health: string; lastError: string }[] };
    };
    return body.data.activeTargets;
  }

  stop(): Promise<void> {
    return this.daemons.stop("prometheus");
  }
}

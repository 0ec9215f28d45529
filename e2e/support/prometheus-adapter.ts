import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { TestCluster } from "../cluster/cluster.js";
import { Daemons, waitFor } from "../cluster/daemons.js";
import { freePort } from "./ports.js";
import { requireProgram } from "./prerequisites.js";
import { KUBE_PROMETHEUS_STACK, PROMETHEUS_ADAPTER } from "./prometheus-stack.js";

/** The API group the adapter serves: what an HPA's Pods metrics are read from. */
const CUSTOM_METRICS = { group: "custom.metrics.k8s.io", version: "v1beta1" } as const;

/** One value of a Pods metric, as the custom metrics API answers it. */
export interface PodMetricValue {
  readonly describedObject: { readonly name: string };
  readonly value: string;
}

export function requirePrometheusAdapter(context: Mocha.Context): void {
  requireProgram(context, PROMETHEUS_ADAPTER(), "prometheus-adapter", "run bash e2e/platform/build.sh");
}

/**
 * The real prometheus-adapter (built from its pinned Go module) serving the custom metrics
 * API from a Prometheus, registered with the test cluster's aggregation layer as an
 * APIService whose Service points at this machine (the adapter runs outside the cluster, the
 * API server reaches it through the Service's endpoints: --enable-aggregator-routing).
 */
export class PrometheusAdapter {
  private constructor(
    private readonly cluster: TestCluster,
    private readonly daemons: Daemons,
  ) {}

  static async start(cluster: TestCluster, prometheusUrl: string, rulesFile: string): Promise<PrometheusAdapter> {
    const dir = join(cluster.dir, "prometheus-adapter");
    mkdirSync(join(dir, "certs"), { recursive: true });
    const port = await freePort();
    const daemons = new Daemons(dir);
    const adapter = new PrometheusAdapter(cluster, daemons);
    const kubeconfig = cluster.adminKubeconfig;
    daemons.start("prometheus-adapter", PROMETHEUS_ADAPTER(), [
      `--secure-port=${port}`,
      `--bind-address=${cluster.advertiseAddress}`,
      `--cert-dir=${join(dir, "certs")}`,
      `--lister-kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      `--prometheus-url=${prometheusUrl}/`,
      `--config=${rulesFile}`,
      // Discover new series within seconds, not the default 10 minutes.
      "--metrics-relist-interval=5s",
    ]);
    try {
      await adapter.register(port);
    } catch (error) {
      await adapter.stop();
      throw error;
    }
    return adapter;
  }

  /** The APIService, and a Service whose endpoint is the adapter on this machine. */
  private async register(port: number): Promise<void> {
    const { namespace } = KUBE_PROMETHEUS_STACK;
    const name = "prometheus-adapter";
    this.cluster.apply(
      { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name, namespace },
        spec: { ports: [{ port: 443, targetPort: port, protocol: "TCP" }] },
      },
      {
        apiVersion: "v1",
        kind: "Endpoints",
        metadata: { name, namespace },
        subsets: [{ addresses: [{ ip: this.cluster.advertiseAddress }], ports: [{ port, protocol: "TCP" }] }],
      },
      {
        apiVersion: "apiregistration.k8s.io/v1",
        kind: "APIService",
        metadata: { name: `${CUSTOM_METRICS.version}.${CUSTOM_METRICS.group}` },
        spec: {
          group: CUSTOM_METRICS.group,
          version: CUSTOM_METRICS.version,
          service: { name, namespace, port: 443 },
          // The adapter serves a self-signed certificate (--cert-dir).
          insecureSkipTLSVerify: true,
          groupPriorityMinimum: 100,
          versionPriority: 100,
        },
      },
    );
    await waitFor(
      "the custom metrics APIService Available",
      async () => {
        const service = this.cluster.kubectlGet<{ status?: { conditions?: { type: string; status: string }[] } }>(
          "apiservice",
          `${CUSTOM_METRICS.version}.${CUSTOM_METRICS.group}`,
        );
        return service.status?.conditions?.some((c) => c.type === "Available" && c.status === "True") ?? false;
      },
      60_000,
    );
  }

  /** A Pods metric of every pod of a namespace, read through the API server as the HPA controller reads it. */
  async podMetric(namespace: string, metric: string): Promise<PodMetricValue[]> {
    const { status, body } = await this.cluster.request(
      "GET",
      `/apis/${CUSTOM_METRICS.group}/${CUSTOM_METRICS.version}/namespaces/${namespace}/pods/*/${metric}`,
    );
    if (status !== 200) throw new Error(`custom metrics API: HTTP ${status}: ${body}`);
    return (JSON.parse(body) as { items: PodMetricValue[] }).items;
  }

  stop(): Promise<void> {
    return this.daemons.stop("prometheus-adapter");
  }
}

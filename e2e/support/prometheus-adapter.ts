import type { TestCluster } from "../cluster/cluster.js";
import type { Daemons } from "../cluster/daemons.js";
import { PROMETHEUS_ADAPTER, startAggregatedApiServer } from "./platform.js";
import { KUBE_PROMETHEUS_STACK } from "./prometheus-stack.js";

/** The API group the adapter serves: what an HPA's Pods metrics are read from. */
const CUSTOM_METRICS = { group: "custom.metrics.k8s.io", version: "v1beta1" } as const;

/** One value of a Pods metric, as the custom metrics API answers it. */
export interface PodMetricValue {
  readonly describedObject: { readonly name: string };
  readonly value: string;
}

/**
 * The real prometheus-adapter (built from its pinned Go module) serving the custom metrics
 * API from a Prometheus, registered with the test cluster's aggregation layer (it runs on
 * this machine, outside the cluster).
 */
export class PrometheusAdapter {
  private constructor(
    private readonly cluster: TestCluster,
    private readonly daemons: Daemons,
  ) {}

  static async start(cluster: TestCluster, prometheusUrl: string, rulesFile: string): Promise<PrometheusAdapter> {
    const daemons = await startAggregatedApiServer(cluster, {
      name: "prometheus-adapter",
      binary: PROMETHEUS_ADAPTER(),
      namespace: KUBE_PROMETHEUS_STACK.namespace,
      ...CUSTOM_METRICS,
      args: [
        `--lister-kubeconfig=${cluster.adminKubeconfig}`,
        `--prometheus-url=${prometheusUrl}/`,
        `--config=${rulesFile}`,
        // Discover new series within seconds, not the default 10 minutes.
        "--metrics-relist-interval=5s",
      ],
    });
    return new PrometheusAdapter(cluster, daemons);
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

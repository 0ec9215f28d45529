import type { TestCluster } from "../cluster/cluster.js";
import type { Daemons } from "../cluster/daemons.js";
import { METRICS_SERVER, startAggregatedApiServer } from "./platform.js";

/** The API group metrics-server serves: what an HPA's Resource metrics (CPU) are read from. */
const RESOURCE_METRICS = { group: "metrics.k8s.io", version: "v1beta1" } as const;

/** One pod's usage, as the resource metrics API answers it (`kubectl top pod`). */
export interface PodUsage {
  readonly metadata: { readonly name: string };
  readonly containers: readonly { readonly name: string; readonly usage: { readonly cpu: string } }[];
}

/**
 * The real metrics-server (built from its pinned Go module): it scrapes each node's kubelet
 * (`/metrics/resource`, the containers' CPU and memory as the real node's kubelet measures
 * them) and serves the resource metrics API through the test cluster's aggregation layer. It
 * runs on this machine, outside the cluster, as kube-system's `metrics-server` Service.
 */
export class MetricsServer {
  private constructor(
    private readonly cluster: TestCluster,
    private readonly daemons: Daemons,
  ) {}

  static async start(cluster: TestCluster): Promise<MetricsServer> {
    const daemons = await startAggregatedApiServer(cluster, {
      name: "metrics-server",
      binary: METRICS_SERVER(),
      namespace: "kube-system",
      ...RESOURCE_METRICS,
      args: [
        `--kubeconfig=${cluster.adminKubeconfig}`,
        // The test node's kubelet serves a self-signed certificate on the port its status gives.
        "--kubelet-insecure-tls",
        "--kubelet-use-node-status-port",
        "--kubelet-preferred-address-types=InternalIP",
        // Its shortest resolution (a CPU rate needs two scrapes), and a timeout below it.
        "--metric-resolution=10s",
        "--kubelet-request-timeout=5s",
      ],
    });
    return new MetricsServer(cluster, daemons);
  }

  /** Every pod's usage in a namespace, read through the API server as the HPA controller reads it. */
  async podUsage(namespace: string): Promise<PodUsage[]> {
    const { status, body } = await this.cluster.request(
      "GET",
      `/apis/${RESOURCE_METRICS.group}/${RESOURCE_METRICS.version}/namespaces/${namespace}/pods`,
    );
    if (status !== 200) throw new Error(`resource metrics API: HTTP ${status}: ${body}`);
    return (JSON.parse(body) as { items: PodUsage[] }).items;
  }

  stop(): Promise<void> {
    return this.daemons.stop("metrics-server");
  }
}

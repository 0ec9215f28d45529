import { once } from "node:events";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { V1StatefulSet } from "@kubernetes/client-node";
import { parse } from "yaml";
import { goModuleDir, pinnedVersion, type TestCluster } from "../cluster/cluster.js";
import { Daemons, waitFor } from "../cluster/daemons.js";
import { freePort } from "./ports.js";
import { CONFIG_RELOADER, PROMETHEUS, PROMETHEUS_OPERATOR } from "./platform.js";

/**
 * The Prometheus Operator's monitoring path, every piece real and built from its pinned Go
 * module (e2e/platform/build.sh): the operator watches the test cluster and writes the
 * Prometheus configuration Secret from the ServiceMonitors its Prometheus selects; the
 * config-reloader renders that Secret as it does in the Prometheus pod (the $(SHARD)
 * substitution); Prometheus discovers the targets through the API server (EndpointSlice
 * role) and scrapes them.
 *
 * What runs outside the cluster: the three programs run on this machine rather than as the
 * operator's StatefulSet pod (no registry serves their images here, so that pod is pinned to
 * no node and never pulls), and the test copies the Secret's file where the reloader reads
 * it, as the kubelet's Secret volume would.
 */

/** The Prometheus Operator's CRDs the Prometheus controller needs (ServiceMonitors are installed with every test cluster). */
const OPERATOR_CRDS = ["prometheuses", "podmonitors", "probes", "prometheusrules", "scrapeconfigs"];

/** kube-prometheus-stack's defaults: its Prometheus selects ServiceMonitors by the chart's release label, in every namespace. */
export const KUBE_PROMETHEUS_STACK = {
  namespace: "monitoring",
  prometheus: "kube-prometheus-stack-prometheus",
  serviceMonitorSelector: { matchLabels: { release: "kube-prometheus-stack" } },
} as const;

export interface ScrapeTarget {
  readonly scrapePool: string;
  readonly scrapeUrl: string;
  readonly health: string;
  readonly lastError: string;
  readonly labels: Readonly<Record<string, string>>;
}

export class PrometheusStack {
  private readonly daemons: Daemons;

  private constructor(
    private readonly cluster: TestCluster,
    private readonly dir: string,
    /** Prometheus's HTTP API, on loopback. */
    readonly url: string,
  ) {
    this.daemons = new Daemons(dir);
  }

  /**
   * Installs the operator's CRDs, starts it, creates a Prometheus as kube-prometheus-stack
   * would, and once the operator has written its configuration starts the reloader and
   * Prometheus on it.
   */
  static async start(cluster: TestCluster): Promise<PrometheusStack> {
    const dir = join(cluster.dir, "prometheus-stack");
    mkdirSync(join(dir, "config_out"), { recursive: true });
    const stack = new PrometheusStack(cluster, dir, `http://127.0.0.1:${await freePort()}`);
    try {
      await stack.boot();
    } catch (error) {
      await stack.stop();
      throw error;
    }
    return stack;
  }

  private async boot(): Promise<void> {
    const moduleDir = goModuleDir(
      "github.com/prometheus-operator/prometheus-operator",
      pinnedVersion("PROMETHEUS_OPERATOR_VERSION"),
    );
    for (const plural of OPERATOR_CRDS) {
      const name = `${plural}.monitoring.coreos.com`;
      if (await this.cluster.hasCrd(name)) continue;
      await this.cluster.installCrdFile(
        join(moduleDir, "example", "prometheus-operator-crd", `monitoring.coreos.com_${plural}.yaml`),
      );
    }
    const operatorPort = await freePort();
    this.watchExit(
      "prometheus-operator",
      this.daemons.start(
        "prometheus-operator",
        PROMETHEUS_OPERATOR(),
        [`--web.listen-address=127.0.0.1:${operatorPort}`],
        {
          KUBECONFIG: this.cluster.adminKubeconfig,
        },
      ),
    );

    // Prometheus reaches the API server from outside the cluster: its address, CA and a
    // bearer token file (credentialsFile: a Secret would be looked up in each monitor's namespace).
    const tokenFile = this.cluster.adminTokenFile();
    const { namespace, prometheus, serviceMonitorSelector } = KUBE_PROMETHEUS_STACK;
    this.cluster.apply(
      { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
      {
        apiVersion: "monitoring.coreos.com/v1",
        kind: "Prometheus",
        metadata: { name: prometheus, namespace },
        spec: {
          serviceMonitorSelector,
          serviceMonitorNamespaceSelector: {},
          serviceDiscoveryRole: "EndpointSlice",
          scrapeInterval: "5s",
          apiserverConfig: {
            host: this.cluster.apiServerUrl(),
            tlsConfig: { caFile: this.cluster.apiServerCaFile() },
            authorization: { type: "Bearer", credentialsFile: tokenFile },
          },
          // Its pod would pull quay.io images no registry here serves: pinned to no node.
          nodeSelector: { "dynamokserve.dev/test-no-such-node": "true" },
        },
      },
    );

    // The StatefulSet the operator made says what the reloader container runs with.
    const statefulSet = await this.eventuallyJson<V1StatefulSet>(
      "the operator's Prometheus StatefulSet",
      "statefulset",
      `prometheus-${prometheus}`,
      "-n",
      namespace,
    );
    const reloader = statefulSet.spec?.template.spec?.containers.find((c) => c.name === "config-reloader");
    const shard = reloader?.env?.find((variable) => variable.name === "SHARD")?.value;
    if (shard === undefined) throw new Error("the operator's config-reloader container sets no SHARD");
    await this.syncConfigSecret();

    const prometheusAddress = new URL(this.url).host;
    this.watchExit(
      "prometheus-config-reloader",
      this.daemons.start(
        "prometheus-config-reloader",
        CONFIG_RELOADER(),
        [
          `--config-file=${join(this.dir, "prometheus.yaml.gz")}`,
          `--config-envsubst-file=${join(this.dir, "config_out", "prometheus.env.yaml")}`,
          `--reload-url=http://${prometheusAddress}/-/reload`,
          `--runtimeinfo-url=http://${prometheusAddress}/api/v1/status/runtimeinfo`,
          "--watch-interval=1s",
        ],
        { POD_NAME: `${statefulSet.metadata?.name}-0`, SHARD: shard },
      ),
    );
    const rendered = join(this.dir, "config_out", "prometheus.env.yaml");
    await waitFor("the config-reloader's rendered configuration", async () => readFileSync(rendered).length > 0);
    this.watchExit(
      "prometheus",
      this.daemons.start("prometheus", PROMETHEUS(), [
        `--config.file=${rendered}`,
        `--storage.tsdb.path=${join(this.dir, "data")}`,
        `--web.listen-address=${prometheusAddress}`,
        "--web.enable-lifecycle",
      ]),
    );
    await waitFor("Prometheus ready", async () => (await fetch(`${this.url}/-/ready`)).ok);
  }

  /** Copies the operator's configuration Secret where the reloader reads it (a Secret volume's job); true when it changed. */
  async syncConfigSecret(): Promise<boolean> {
    const { namespace, prometheus } = KUBE_PROMETHEUS_STACK;
    const secret = await this.eventuallyJson<{ data?: Record<string, string> }>(
      "the operator's Prometheus configuration Secret",
      "secret",
      `prometheus-${prometheus}`,
      "-n",
      namespace,
    );
    const gzipped = secret.data?.["prometheus.yaml.gz"];
    if (gzipped === undefined) throw new Error("the configuration Secret has no prometheus.yaml.gz");
    const file = join(this.dir, "prometheus.yaml.gz");
    const next = Buffer.from(gzipped, "base64");
    if (existsSync(file) && readFileSync(file).equals(next)) return false;
    writeFileSync(file, next);
    return true;
  }

  /** The scrape jobs of the configuration Prometheus runs now (what the operator generated, rendered). */
  async scrapeJobs(): Promise<string[]> {
    const response = await fetch(`${this.url}/api/v1/status/config`);
    const body = (await response.json()) as { data: { yaml: string } };
    const config = parse(body.data.yaml) as { scrape_configs?: { job_name: string }[] };
    return (config.scrape_configs ?? []).map((job) => job.job_name);
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

  /** The targets Prometheus discovered, with their health (up/down), last error and labels. */
  async targets(): Promise<ScrapeTarget[]> {
    const response = await fetch(`${this.url}/api/v1/targets?state=active`);
    const body = (await response.json()) as { data: { activeTargets: ScrapeTarget[] } };
    return body.data.activeTargets;
  }

  /** A daemon's log in the stack's folder. */
  private log(name: string): string {
    return readFileSync(join(this.dir, `${name}.log`), "utf8");
  }

  async stop(): Promise<void> {
    for (const name of ["prometheus", "prometheus-config-reloader", "prometheus-operator"]) {
      await this.daemons.stop(name);
    }
  }

  /** A program that dies while the stack runs fails what waits on it, with its log's tail. */
  private watchExit(name: string, child: ReturnType<Daemons["start"]>): void {
    void once(child, "exit").then(([code]) => {
      if (this.daemons.has(name)) console.error(`${name} exited (${code}): ${this.log(name).slice(-2000)}`);
    });
  }

  private async eventuallyJson<T>(what: string, ...args: string[]): Promise<T> {
    let found: T | undefined;
    await waitFor(what, async () => {
      found = this.cluster.kubectlGet<T>(...args);
      return true;
    });
    return found!;
  }
}

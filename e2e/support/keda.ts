import { once } from "node:events";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { goModuleDir, pinnedVersion, type TestCluster } from "../cluster/cluster.js";
import { Daemons, waitFor } from "../cluster/daemons.js";
import { createTestCa, type Pem } from "./certificates.js";
import {
  aggregatedApiCertDir,
  KEDA_ADAPTER,
  KEDA_OPERATOR,
  startAggregatedApiServer,
  unregisterAggregatedApi,
} from "./platform.js";
import { accepts, freePorts } from "./ports.js";

/**
 * The real KEDA (built from its pinned Go module by e2e/platform/build.sh) against a test
 * cluster, as the other platform pieces run: host processes with the cluster's kubeconfig.
 * - its CRDs, read from the Go module's config/crd/bases at test time;
 * - the operator (ScaledObject controller, scale loop, the HPAs it makes), leader election
 *   off, its gRPC metrics service on loopback with mutual TLS;
 * - the metrics API server ("adapter"), registered for external.metrics.k8s.io through the
 *   aggregation layer, which asks the operator's metrics service for each value with a client
 *   certificate of the same CA.
 * Not run: the admission webhooks (nothing here validates ScaledObjects before KEDA sees them).
 */

/** Where KEDA's own objects would live (its Services, the Secrets a ClusterTriggerAuthentication reads). */
export const KEDA_NAMESPACE = "keda";
const EXTERNAL_METRICS = { group: "external.metrics.k8s.io", version: "v1beta1" } as const;
/** The adapter as an aggregated API: the name KEDA's own manifests give its Service. */
const ADAPTER_API = {
  name: "keda-operator-metrics-apiserver",
  namespace: KEDA_NAMESPACE,
  ...EXTERNAL_METRICS,
} as const;
const OPERATOR = "keda-operator";
/** The names the operator's serving certificate carries (the adapter dials its loopback address). */
const OPERATOR_DNS_NAMES = [
  OPERATOR,
  `${OPERATOR}.${KEDA_NAMESPACE}.svc`,
  `${OPERATOR}.${KEDA_NAMESPACE}.svc.cluster.local`,
];
/** How long each piece may take to come up before start() gives up and says which. */
const STARTUP_MS = 90_000;
/** How much of a program's log an error carries. */
const LOG_TAIL_CHARS = 3000;

/** A condition KEDA writes on a ScaledObject (Ready, Active, Fallback, Paused, HPAActive). */
export interface KedaCondition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
}

/** The parts of a ScaledObject's status tests read. */
export interface ScaledObjectStatus {
  readonly conditions?: readonly KedaCondition[];
  /** The HorizontalPodAutoscaler KEDA made (keda-hpa-<name> unless the spec names it). */
  readonly hpaName?: string;
  /** The external metrics the HPA reads, one per trigger: `s<index>-<metric>`. */
  readonly externalMetricNames?: readonly string[];
  readonly lastActiveTime?: string;
}

/** KEDA's CRD files in its pinned Go module (never copied into this repository). */
export function kedaCrdFiles(): string[] {
  const dir = join(goModuleDir("github.com/kedacore/keda/v2", pinnedVersion("KEDA_VERSION")), "config", "crd", "bases");
  return readdirSync(dir)
    .filter((file) => file.endsWith(".yaml"))
    .sort()
    .map((file) => join(dir, file));
}

/** `keda.sh_scaledobjects.yaml` -> `scaledobjects.keda.sh` (kubebuilder's file naming). */
function crdName(file: string): string {
  const [group, plural] = basename(file, ".yaml").split("_");
  return `${plural}.${group}`;
}

export class Keda {
  private readonly daemons: Daemons;
  private adapter: Daemons | undefined;
  /** The CRDs this instance installed (and so removes): a cluster that had them keeps them. */
  private readonly installedCrds: string[] = [];

  private constructor(
    private readonly cluster: TestCluster,
    private readonly dir: string,
  ) {
    this.daemons = new Daemons(dir);
  }

  /**
   * Installs KEDA's CRDs, starts the operator and the metrics API server and resolves once the
   * API server calls external.metrics.k8s.io Available; each step is bounded and a failure
   * names the step, with the tail of the program's log.
   */
  static async start(cluster: TestCluster): Promise<Keda> {
    const dir = join(cluster.dir, "keda");
    mkdirSync(dir, { recursive: true });
    const keda = new Keda(cluster, dir);
    try {
      await keda.boot();
    } catch (error) {
      await keda.stop();
      throw error;
    }
    return keda;
  }

  /** A ScaledObject's status, read from the API server. */
  async scaledObjectStatus(namespace: string, name: string): Promise<ScaledObjectStatus> {
    const { status, body } = await this.cluster.request(
      "GET",
      `/apis/keda.sh/v1alpha1/namespaces/${namespace}/scaledobjects/${name}`,
    );
    if (status !== 200) throw new Error(`ScaledObject ${namespace}/${name}: HTTP ${status}: ${body}`);
    return (JSON.parse(body) as { status?: ScaledObjectStatus }).status ?? {};
  }

  /** One condition of a ScaledObject, if KEDA has written it. */
  async condition(namespace: string, name: string, type: string): Promise<KedaCondition | undefined> {
    return (await this.scaledObjectStatus(namespace, name)).conditions?.find((c) => c.type === type);
  }

  /**
   * The value of a ScaledObject's external metric, read through the API server as the HPA
   * controller reads it (the label selector KEDA puts in its HPA's metric). One value per
   * metric: KEDA answers with a list.
   */
  async externalMetric(namespace: string, scaledObject: string, metricName: string): Promise<number[]> {
    const selector = encodeURIComponent(`scaledobject.keda.sh/name=${scaledObject}`);
    const { status, body } = await this.cluster.request(
      "GET",
      `/apis/${EXTERNAL_METRICS.group}/${EXTERNAL_METRICS.version}/namespaces/${namespace}/${metricName}?labelSelector=${selector}`,
    );
    if (status !== 200) throw new Error(`external metrics API: HTTP ${status}: ${body}`);
    return (JSON.parse(body) as { items: { value: string }[] }).items.map((item) => quantity(item.value));
  }

  /**
   * Removes KEDA's CRDs while the operator still runs (so its finalizers on what remains are
   * honoured and the deletion finishes), then unregisters and stops the metrics API server and
   * stops the operator: a shared cluster is left as it was found.
   */
  async stop(): Promise<void> {
    try {
      if (this.daemons.has(OPERATOR)) {
        for (const name of this.installedCrds.splice(0).reverse()) await this.cluster.deleteCrd(name);
      }
    } finally {
      // Also after a failed start: the registration may be half made.
      unregisterAggregatedApi(this.cluster, ADAPTER_API);
      await this.adapter?.stop(ADAPTER_API.name);
      await this.daemons.stop(OPERATOR);
    }
  }

  private async boot(): Promise<void> {
    for (const file of kedaCrdFiles()) {
      const name = crdName(file);
      if (await this.cluster.hasCrd(name)) continue;
      await this.cluster.installCrdFile(file);
      this.installedCrds.push(name);
    }
    const [grpcPort, probePort, metricsPort, adapterMetricsPort] = (await freePorts(4)) as [
      number,
      number,
      number,
      number,
    ];
    const { operatorCertDir, scalerCaDir } = await this.writeCertificates();
    const environment = {
      KUBECONFIG: this.cluster.adminKubeconfig,
      // Every namespace; KEDA's own namespace (where it reads cluster-wide trigger secrets).
      WATCH_NAMESPACE: "",
      POD_NAMESPACE: KEDA_NAMESPACE,
      KEDA_CLUSTER_OBJECT_NAMESPACE: KEDA_NAMESPACE,
    };
    const operator = this.daemons.start(
      OPERATOR,
      KEDA_OPERATOR(),
      [
        "--leader-elect=false",
        `--metrics-bind-address=127.0.0.1:${metricsPort}`,
        `--health-probe-bind-address=127.0.0.1:${probePort}`,
        // The gRPC service the adapter asks for metric values (mutual TLS from --cert-dir).
        `--metrics-service-bind-address=127.0.0.1:${grpcPort}`,
        `--cert-dir=${operatorCertDir}`,
        // CAs scalers trust besides the system's: none (its default is /custom/ca).
        `--ca-dir=${scalerCaDir}`,
      ],
      environment,
    );
    await this.bounded("the KEDA operator ready", OPERATOR, operator, async () => {
      const ready = await fetch(`http://127.0.0.1:${probePort}/readyz`);
      return ready.ok && (await accepts(grpcPort));
    });
    try {
      this.adapter = await startAggregatedApiServer(this.cluster, {
        ...ADAPTER_API,
        binary: KEDA_ADAPTER(),
        args: [
          `--lister-kubeconfig=${this.cluster.adminKubeconfig}`,
          `--metrics-service-address=127.0.0.1:${grpcPort}`,
          // Its own /metrics (it binds every address: it takes a port only).
          `--port=${adapterMetricsPort}`,
        ],
        env: environment,
      });
    } catch (error) {
      throw new Error(
        `KEDA: the metrics API server (external.metrics.k8s.io) did not come up: ${(error as Error).message}; ${this.logTail(join(this.cluster.dir, ADAPTER_API.name, `${ADAPTER_API.name}.log`))}`,
      );
    }
  }

  /**
   * The mutual TLS between adapter and operator: both read ca.crt, tls.crt and tls.key from a
   * folder (the operator its --cert-dir, the adapter the --cert-dir it also serves from), and
   * each verifies the other against ca.crt.
   */
  private async writeCertificates(): Promise<{ operatorCertDir: string; scalerCaDir: string }> {
    const ca = await createTestCa("KEDA test CA");
    const operatorCertDir = join(this.dir, "certs");
    const scalerCaDir = join(this.dir, "scaler-cas");
    writeKeyPair(
      operatorCertDir,
      ca.certificate,
      await ca.issue(OPERATOR, { dns: OPERATOR_DNS_NAMES, ips: ["127.0.0.1"] }),
    );
    writeKeyPair(
      aggregatedApiCertDir(this.cluster, ADAPTER_API.name),
      ca.certificate,
      await ca.issue(ADAPTER_API.name, { client: true }),
    );
    mkdirSync(scalerCaDir, { recursive: true });
    return { operatorCertDir, scalerCaDir };
  }

  /** Waits for `check`, failing early if `child` exits; the error names `what` and carries the log's tail. */
  private async bounded(what: string, name: string, child: ChildProcess, check: () => Promise<boolean>): Promise<void> {
    const exited = once(child, "exit").then(([code, signal]) => {
      throw new Error(`${name} exited (${String(code ?? signal)})`);
    });
    try {
      await Promise.race([waitFor(what, check, STARTUP_MS), exited]);
    } catch (error) {
      throw new Error(
        `KEDA: ${what} did not come up: ${(error as Error).message}; ${this.logTail(join(this.dir, `${name}.log`))}`,
      );
    } finally {
      exited.catch(() => undefined);
    }
  }

  private logTail(file: string): string {
    const log = existsSync(file) ? readFileSync(file, "utf8") : "";
    return `its log, ${file}, ends:\n${log.slice(-LOG_TAIL_CHARS)}`;
  }
}

function writeKeyPair(dir: string, caCertificate: string, pair: Pem): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "ca.crt"), caCertificate);
  writeFileSync(join(dir, "tls.crt"), pair.certificate);
  writeFileSync(join(dir, "tls.key"), pair.privateKey, { mode: 0o600 });
}

/** A Kubernetes quantity as the external metrics API writes one ("3", "2500m", "1k") -> a number. */
export function quantity(text: string): number {
  const match = /^(-?[0-9.]+)(m|k|M|G)?$/.exec(text);
  if (match === null) throw new Error(`not a quantity the external metrics API writes: ${text}`);
  const scale = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9 }[match[2] as "m" | "k" | "M" | "G"] ?? 1;
  return Number(match[1]) * scale;
}

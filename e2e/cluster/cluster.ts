import { execFileSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../support/ports.js";
import { createTestCa } from "../support/certificates.js";
import { Daemons, waitFor } from "./daemons.js";
import { KubeConfig, KubernetesObjectApi, loadAllYaml, type KubernetesObject } from "@kubernetes/client-node";

/**
 * A real Kubernetes control plane on loopback for tests: etcd, kube-apiserver (RBAC on,
 * token authentication, an audit log of the operator's writes), kube-controller-manager,
 * kube-scheduler and kwok with fake nodes so pods get scheduled and become Ready. The
 * binaries come from build.sh (built from pinned upstream Go modules, cached).
 */

const HERE = fileURLToPath(new URL(".", import.meta.url));
/** Source folder of this file (the compiled file sits in dist/e2e/cluster). */
const SOURCE_DIR = existsSync(join(HERE, "build.sh")) ? HERE : join(HERE, "..", "..", "..", "e2e", "cluster");
export const REPO_ROOT = join(SOURCE_DIR, "..", "..");

/** The identity the operator uses in tests; the audit log records its writes. */
export const OPERATOR_USER = "dynamo-kserve-operator";
const ADMIN_TOKEN = "admin-token-for-tests";
const OPERATOR_TOKEN = "operator-token-for-tests";
const FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node";
/** The name in the client certificate the API server proxies aggregated API requests with. */
const FRONT_PROXY_CLIENT = "front-proxy-client";
const WRITE_VERBS = new Set(["create", "update", "patch", "delete", "deletecollection"]);

export interface AuditEvent {
  readonly verb: string;
  readonly user: { readonly username: string };
  readonly objectRef?: {
    readonly resource?: string;
    readonly namespace?: string;
    readonly name?: string;
    readonly subresource?: string;
  };
  readonly stage: string;
  readonly responseStatus?: { readonly code?: number };
}

/** Builds (or finds cached) binaries and returns their folder. */
export function clusterBinaries(): string {
  if (process.env["DYNAMO_KSERVE_CLUSTER_BIN"]) return process.env["DYNAMO_KSERVE_CLUSTER_BIN"];
  const output = execFileSync("bash", [join(SOURCE_DIR, "build.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  return output.trim().split("\n").at(-1)!;
}

/** Reads a pinned version from versions.env. */
export function pinnedVersion(name: string): string {
  const line = readFileSync(join(SOURCE_DIR, "versions.env"), "utf8")
    .split("\n")
    .find((candidate) => candidate.startsWith(`${name}=`));
  if (line === undefined) throw new Error(`${name} is not pinned in e2e/cluster/versions.env`);
  return line.slice(name.length + 1).trim();
}

export interface ClusterOptions {
  /** kwok-managed fake nodes (pods on them become Ready without running); default 2. */
  readonly fakeNodes?: number;
  /**
   * Serve the API on this machine's own address (not only loopback) and advertise it, so pods
   * of a real node (node.ts) reach it through the `kubernetes` Service.
   */
  readonly reachableFromPods?: boolean;
}

export class TestCluster {
  readonly dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-cluster-"));
  readonly adminKubeconfig = join(this.dir, "admin.kubeconfig");
  readonly operatorKubeconfig = join(this.dir, "operator.kubeconfig");
  private readonly auditLog = join(this.dir, "audit.log");
  private readonly daemons = new Daemons(this.dir);
  private apiServerPort = 0;
  private etcdPort = 0;

  /** The address the API server advertises (the `kubernetes` Service's endpoint). */
  readonly advertiseAddress: string;

  private constructor(
    readonly bin: string,
    private readonly options: ClusterOptions,
  ) {
    this.advertiseAddress = options.reachableFromPods ? hostAddress() : "127.0.0.1";
  }

  static async start(options: ClusterOptions = {}): Promise<TestCluster> {
    const cluster = new TestCluster(clusterBinaries(), options);
    try {
      await cluster.boot();
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  /** Runs the pinned kubectl as admin and returns its output. */
  kubectl(...args: string[]): string {
    return this.kubectlWithInput(undefined, ...args);
  }

  /** `kubectl get <args> -o json`, parsed: an object, or a list as `{ items }`. */
  kubectlGet<T>(...args: string[]): T {
    return JSON.parse(this.kubectl("get", ...args, "-o", "json")) as T;
  }

  /** kubectl with `input` on its standard input (`apply -f -`). */
  kubectlWithInput(input: string | undefined, ...args: string[]): string {
    return execFileSync(join(this.bin, "kubectl"), ["--kubeconfig", this.adminKubeconfig, ...args], {
      encoding: "utf8",
      ...(input !== undefined ? { input } : {}),
    });
  }

  /** kubectl apply of `objects` (as one List), as admin; returns kubectl's output. */
  apply(...objects: readonly object[]): string {
    return this.kubectlWithInput(
      JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
      "apply",
      "-f",
      "-",
    );
  }

  /** Writes a kubeconfig that talks to this cluster with a bearer token; returns its path. */
  writeKubeconfig(file: string, token: string): string {
    writeFileSync(
      file,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [
          {
            name: "test",
            cluster: { server: `https://127.0.0.1:${this.apiServerPort}`, "insecure-skip-tls-verify": true },
          },
        ],
        users: [{ name: "user", user: { token } }],
        contexts: [{ name: "test", context: { cluster: "test", user: "user" } }],
        "current-context": "test",
      }),
    );
    return file;
  }

  /** The API server's URL at the address it advertises (what its serving certificate names). */
  apiServerUrl(): string {
    return `https://${this.advertiseAddress}:${this.apiServerPort}`;
  }

  /** The API server's self-signed serving certificate with its CA: what a client outside the cluster trusts. */
  apiServerCaFile(): string {
    return join(this.dir, "pki", "apiserver.crt");
  }

  /** A file holding an admin bearer token, for programs that take a token file (Prometheus). */
  adminTokenFile(): string {
    const file = join(this.dir, "admin.token");
    writeFileSync(file, ADMIN_TOKEN, { mode: 0o600 });
    return file;
  }

  /** Requests `username` made since `fromLine` (an auditMark) that RBAC refused. */
  forbiddenRequests(username: string, fromLine = 0): AuditEvent[] {
    return this.auditEvents()
      .slice(fromLine)
      .filter((event) => event.user.username === username && event.responseStatus?.code === 403);
  }

  /** An admin KubeConfig for the test code itself. */
  adminConfig(): KubeConfig {
    const config = new KubeConfig();
    config.loadFromFile(this.adminKubeconfig);
    return config;
  }

  /** The operator's writes (create/update/patch/delete) recorded by the API server since `since` lines. */
  operatorWrites(fromLine = 0): AuditEvent[] {
    return this.auditEvents()
      .slice(fromLine)
      .filter((event) => event.user.username === OPERATOR_USER && WRITE_VERBS.has(event.verb));
  }

  /** How many audit events exist now: pass it to operatorWrites to count only what follows. */
  auditMark(): number {
    return this.auditEvents().length;
  }

  async stopApiServer(): Promise<void> {
    await this.stopProcess("kube-apiserver");
  }

  async startApiServer(): Promise<void> {
    this.spawn("kube-apiserver", this.apiServerArgs());
    await this.waitForApiServer();
  }

  async stop(): Promise<void> {
    for (const name of ["kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]) {
      await this.stopProcess(name);
    }
    if (process.env["DYNAMO_KSERVE_KEEP_CLUSTER"] === undefined) rmSync(this.dir, { recursive: true, force: true });
  }

  private auditEvents(): AuditEvent[] {
    if (!existsSync(this.auditLog)) return [];
    return readFileSync(this.auditLog, "utf8")
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as AuditEvent)
      .filter((event) => event.stage === "ResponseComplete");
  }

  private async boot(): Promise<void> {
    [this.etcdPort, this.apiServerPort] = await Promise.all([freePort(), freePort()]);
    this.writeCredentials();
    await this.writeFrontProxyCredentials();
    await this.startEtcd();
    await this.startApiServer();
    const kubeconfig = this.adminKubeconfig;
    // What controller-manager and scheduler share: who they are, no leader election, a
    // loopback serving port of their own.
    const controlPlaneArgs = async (): Promise<string[]> => [
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
      // The default client limits (20 requests/s) make the controller manager, not the
      // operator, the bottleneck of the scale tests: 1,000 Deployments took ~15 minutes.
      "--kube-api-qps=200",
      "--kube-api-burst=400",
      `--secure-port=${await freePort()}`,
    ];
    this.spawn("kube-controller-manager", [
      ...(await controlPlaneArgs()),
      `--service-account-private-key-file=${join(this.dir, "sa.key")}`,
      `--root-ca-file=${join(this.dir, "pki", "apiserver.crt")}`,
      // kwok posts node status rarely; with the default 50 s grace the node lifecycle
      // controller would flap fake nodes NotReady and mark their pods NotReady for good.
      "--node-monitor-grace-period=1h",
      "--node-startup-grace-period=1h",
      // The HPA controller looks every 15 s by default; tests of autoscaling should not wait that long.
      "--horizontal-pod-autoscaler-sync-period=2s",
      "--controllers=*,-nodeipam,-attachdetach,-persistentvolume-expander,-cloud-node-lifecycle,-ttl",
    ]);
    this.spawn("kube-scheduler", await controlPlaneArgs());
    const fakeNodes = this.options.fakeNodes ?? 2;
    if (fakeNodes > 0) {
      this.spawn("kwok", [
        `--kubeconfig=${kubeconfig}`,
        `--manage-nodes-with-annotation-selector=${FAKE_NODE_ANNOTATION}=fake`,
        `--server-address=127.0.0.1:${await freePort()}`,
      ]);
      await this.createFakeNodes(fakeNodes);
    }
    await this.installCrds();
  }

  private writeCredentials(): void {
    const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    writeFileSync(join(this.dir, "sa.key"), privateKey.export({ type: "pkcs8", format: "pem" }));
    writeFileSync(join(this.dir, "sa.pub"), publicKey.export({ type: "spki", format: "pem" }));
    writeFileSync(
      join(this.dir, "tokens.csv"),
      [
        `${ADMIN_TOKEN},admin,admin,"system:masters"`,
        `${OPERATOR_TOKEN},${OPERATOR_USER},${OPERATOR_USER},"system:masters"`,
        "",
      ].join("\n"),
    );
    writeFileSync(
      join(this.dir, "audit-policy.yaml"),
      [
        "apiVersion: audit.k8s.io/v1",
        "kind: Policy",
        "omitStages: [RequestReceived]",
        "rules:",
        "  - level: Metadata",
        `    users: [${OPERATOR_USER}]`,
        "    verbs: [create, update, patch, delete, deletecollection]",
        // Service accounts' requests, to see whether an RBAC role let the operator do everything.
        "  - level: Metadata",
        "    userGroups: [system:serviceaccounts]",
        "  - level: None",
        "",
      ].join("\n"),
    );
    for (const [file, token] of [
      [this.adminKubeconfig, ADMIN_TOKEN],
      [this.operatorKubeconfig, OPERATOR_TOKEN],
    ] as const) {
      this.writeKubeconfig(file, token);
    }
  }

  /**
   * The aggregation layer's credentials: the API server proxies requests for an APIService
   * (the custom metrics API of prometheus-adapter, the resource metrics API of metrics-server)
   * with this client certificate, and the extension server trusts the user it names because
   * this CA signed it.
   */
  private async writeFrontProxyCredentials(): Promise<void> {
    const ca = await createTestCa("front-proxy-ca");
    const client = await ca.issue(FRONT_PROXY_CLIENT, { client: true });
    const pki = join(this.dir, "pki");
    mkdirSync(pki, { recursive: true });
    writeFileSync(join(pki, "front-proxy-ca.crt"), ca.certificate);
    writeFileSync(join(pki, "front-proxy-client.crt"), client.certificate);
    writeFileSync(join(pki, "front-proxy-client.key"), client.privateKey, { mode: 0o600 });
  }

  private async startEtcd(): Promise<void> {
    const peerPort = await freePort();
    this.spawn("etcd", [
      "--name=test",
      `--data-dir=${join(this.dir, "etcd")}`,
      `--listen-client-urls=http://127.0.0.1:${this.etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${this.etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=test=http://127.0.0.1:${peerPort}`,
      "--unsafe-no-fsync",
      "--log-level=warn",
    ]);
    await waitFor("etcd", async () => (await fetch(`http://127.0.0.1:${this.etcdPort}/health`)).ok);
  }

  private apiServerArgs(): string[] {
    mkdirSync(join(this.dir, "pki"), { recursive: true });
    return [
      `--etcd-servers=http://127.0.0.1:${this.etcdPort}`,
      `--bind-address=${this.options.reachableFromPods ? "0.0.0.0" : "127.0.0.1"}`,
      `--advertise-address=${this.advertiseAddress}`,
      // Logs, exec and port-forward reach a real node (node.ts) by its IP: its name is not in DNS.
      "--kubelet-preferred-address-types=InternalIP,Hostname",
      `--secure-port=${this.apiServerPort}`,
      `--cert-dir=${join(this.dir, "pki")}`,
      `--token-auth-file=${join(this.dir, "tokens.csv")}`,
      "--authorization-mode=RBAC",
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      `--service-account-key-file=${join(this.dir, "sa.pub")}`,
      `--service-account-signing-key-file=${join(this.dir, "sa.key")}`,
      "--service-cluster-ip-range=10.96.0.0/16",
      `--audit-policy-file=${join(this.dir, "audit-policy.yaml")}`,
      `--audit-log-path=${this.auditLog}`,
      "--audit-log-format=json",
      // The aggregation layer (APIServices such as custom.metrics.k8s.io), routed to the
      // extension server's endpoints rather than its ClusterIP.
      `--requestheader-client-ca-file=${join(this.dir, "pki", "front-proxy-ca.crt")}`,
      `--requestheader-allowed-names=${FRONT_PROXY_CLIENT}`,
      "--requestheader-username-headers=X-Remote-User",
      "--requestheader-group-headers=X-Remote-Group",
      "--requestheader-extra-headers-prefix=X-Remote-Extra-",
      `--proxy-client-cert-file=${join(this.dir, "pki", "front-proxy-client.crt")}`,
      `--proxy-client-key-file=${join(this.dir, "pki", "front-proxy-client.key")}`,
      "--enable-aggregator-routing=true",
      "--enable-priority-and-fairness=false",
      "--profiling=false",
    ];
  }

  private async waitForApiServer(): Promise<void> {
    const url = `https://127.0.0.1:${this.apiServerPort}/readyz`;
    await waitFor("kube-apiserver", async () => {
      const { status } = await apiRequest(url);
      return status === 200;
    });
  }

  private async createFakeNodes(count: number): Promise<void> {
    const api = KubernetesObjectApi.makeApiClient(this.adminConfig());
    for (let i = 0; i < count; i++) {
      await api.create({
        apiVersion: "v1",
        kind: "Node",
        metadata: {
          name: `kwok-node-${i}`,
          annotations: { [FAKE_NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
          labels: { type: "kwok", "kubernetes.io/hostname": `kwok-node-${i}`, "kubernetes.io/os": "linux" },
        },
        status: {
          allocatable: { cpu: "64", memory: "512Gi", pods: "1000" },
          capacity: { cpu: "64", memory: "512Gi", pods: "1000" },
        },
      } as KubernetesObject);
    }
  }

  /** Our CRDs from crds/, and the upstream ones later work needs, from their Go modules. */
  private async installCrds(): Promise<void> {
    const ours = join(REPO_ROOT, "crds");
    for (const file of readdirSync(ours)
      .filter((name) => name.endsWith(".yaml"))
      .sort()) {
      await this.installCrdFile(join(ours, file));
    }
    await this.installCrdFile(upstreamCrdFile("inferencepools"));
    await this.installCrdFile(upstreamCrdFile("servicemonitors"));
  }

  /** Creates the CRDs in a YAML file and waits until they are established. */
  async installCrdFile(file: string): Promise<void> {
    for (const crd of loadAllYaml(readFileSync(file, "utf8")) as (KubernetesObject | null)[]) {
      if (crd === null) continue;
      // cert-manager ships its CRDs as Helm templates: drop the templated labels and annotations.
      const templated = (values: Record<string, string> | undefined): boolean =>
        JSON.stringify(values ?? {}).includes("{{");
      if (crd.metadata !== undefined && templated(crd.metadata.labels)) crd.metadata.labels = {};
      if (crd.metadata !== undefined && templated(crd.metadata.annotations)) crd.metadata.annotations = {};
      // Sent as raw JSON: client-node's typed serializer would drop x-kubernetes-* keys.
      const created = await this.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
      if (created.status !== 201) throw new Error(`creating CRD ${crd.metadata?.name}: ${created.body}`);
      await waitFor(`CRD ${crd.metadata?.name} established`, async () => {
        const live = await this.request(
          "GET",
          `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata?.name}`,
        );
        const conditions = (JSON.parse(live.body) as { status?: { conditions?: { type: string; status: string }[] } })
          .status?.conditions;
        return conditions?.some((c) => c.type === "Established" && c.status === "True") ?? false;
      });
    }
  }

  /** Whether a CRD exists. */
  async hasCrd(name: string): Promise<boolean> {
    return (
      (await this.request("GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`)).status === 200
    );
  }

  /** Deletes a CRD (and so every object of its kind) and waits until it is gone. */
  async deleteCrd(name: string): Promise<void> {
    const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`;
    const deleted = await this.request("DELETE", path);
    if (deleted.status !== 200 && deleted.status !== 404) throw new Error(`deleting CRD ${name}: ${deleted.body}`);
    await waitFor(`CRD ${name} deleted`, async () => (await this.request("GET", path)).status === 404);
  }

  /** A raw request to the API server as admin (test setup only). */
  request(method: string, path: string, body?: unknown, accept?: string): Promise<{ status: number; body: string }> {
    return apiRequest(`https://127.0.0.1:${this.apiServerPort}${path}`, method, body, accept);
  }

  private spawn(name: string, args: string[]): void {
    this.daemons.start(name, join(this.bin, name), args);
  }

  private stopProcess(name: string): Promise<void> {
    return this.daemons.stop(name);
  }
}

/** This machine's address on the interface of its default route (what pods can reach). */
export function hostAddress(): string {
  const routes = readFileSync("/proc/net/route", "utf8").split("\n").slice(1);
  const device = routes.map((line) => line.trim().split(/\s+/)).find((fields) => fields[1] === "00000000")?.[0];
  const address = networkInterfaces()[device ?? ""]?.find(
    (candidate) => candidate.family === "IPv4" && !candidate.internal,
  )?.address;
  if (address === undefined)
    throw new Error("no default route with an IPv4 address: pods could not reach the API server");
  return address;
}

/**
 * An upstream CRD file from its pinned Go module: the InferencePool (Gateway API Inference
 * Extension; `old` is a release before appProtocol) and its InferenceObjective, the ServiceMonitor (Prometheus Operator) or
 * cert-manager's Certificate.
 */
export function upstreamCrdFile(
  kind: "inferencepools" | "inferenceobjectives" | "servicemonitors" | "certificates",
  old = false,
): string {
  if (kind === "certificates") {
    return join(
      goModuleDir("github.com/cert-manager/cert-manager", pinnedVersion("CERT_MANAGER_VERSION")),
      "deploy/crds/crd-certificates.yaml",
    );
  }
  if (kind === "inferenceobjectives") {
    return join(
      goModuleDir(
        "sigs.k8s.io/gateway-api-inference-extension",
        pinnedVersion("GATEWAY_API_INFERENCE_EXTENSION_VERSION"),
      ),
      "config/crd/bases/inference.networking.x-k8s.io_inferenceobjectives.yaml",
    );
  }
  if (kind === "inferencepools") {
    const version = pinnedVersion(
      old ? "GATEWAY_API_INFERENCE_EXTENSION_OLD_VERSION" : "GATEWAY_API_INFERENCE_EXTENSION_VERSION",
    );
    return join(
      goModuleDir("sigs.k8s.io/gateway-api-inference-extension", version),
      "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml",
    );
  }
  return join(
    goModuleDir("github.com/prometheus-operator/prometheus-operator", pinnedVersion("PROMETHEUS_OPERATOR_VERSION")),
    "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
  );
}

/** The folder of a Go module version, downloaded by the Go toolchain into its module cache. */
export function goModuleDir(module: string, version: string): string {
  const output = execFileSync("go", ["mod", "download", "-json", `${module}@${version}`], { encoding: "utf8" });
  return (JSON.parse(output) as { Dir: string }).Dir;
}

/** A request to the API server as admin, skipping its self-signed certificate's verification. */
async function apiRequest(
  url: string,
  method = "GET",
  body?: unknown,
  accept = "application/json",
): Promise<{ status: number; body: string }> {
  const { request } = await import("node:https");
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      {
        method,
        rejectUnauthorized: false,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json", accept },
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => (text += chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: text }));
      },
    );
    outgoing.on("error", reject);
    outgoing.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

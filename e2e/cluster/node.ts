import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, type V1Node } from "@kubernetes/client-node";
import { freePort } from "../support/ports.js";
import type { TestCluster } from "./cluster.js";
import { Daemons, waitFor } from "./daemons.js";

/**
 * A real node for the test cluster: the kubelet and kube-proxy built from the same pinned
 * Kubernetes module, Debian's containerd (CRI) and CNI plugins (a bridge network with
 * host-local addresses). Pods really run — the locally built images are loaded into the
 * node's containerd, since no registry is reachable — and the machine reaches them at their
 * pod IPs and through Service ClusterIPs (kube-proxy's iptables rules).
 *
 * Every piece of state lives under the cluster's folder, except what the kernel keeps: the
 * bridge, kube-proxy's and the CNI firewall's iptables chains and the CNI network namespaces,
 * which stop() removes.
 */

export const NODE_NAME = "real-node";
const BRIDGE = "dks0";
const POD_SUBNET = "10.244.0.0/24";
const CNI_BIN = "/usr/lib/cni";
const NAMESPACE = "k8s.io";

/** What the node needs from this machine (Debian packages; .ci/run installs them). */
const REQUIRED = [
  ["containerd", "/usr/bin/containerd"],
  ["ctr", "/usr/bin/ctr"],
  ["runc", "/usr/sbin/runc"],
  ["the CNI plugins", join(CNI_BIN, "bridge")],
  ["conntrack", "/usr/sbin/conntrack"],
  ["iptables", "/usr/sbin/iptables"],
] as const;

/** Why this machine cannot run a real node, or undefined when it can. */
export function realNodeUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "the kubelet and containerd need root";
  const missing = REQUIRED.filter(([, path]) => !existsSync(path)).map(([what]) => what);
  if (missing.length > 0) {
    return `missing ${missing.join(", ")} (apt-get install containerd runc containernetworking-plugins conntrack iptables)`;
  }
  return undefined;
}

/**
 * An image of one static binary (`/<name>`, its entrypoint) imported into the Docker Engine,
 * tagged by the binary's content so a rebuilt binary gets a new image: what a distroless image
 * of it would run, where no registry is reachable to pull one. `scratch` is a folder to make
 * the root filesystem in.
 */
export function binaryImage(binary: string, name: string, scratch: string): string {
  const tag = `dynamo-kserve.dev/${name}:${createHash("sha256").update(readFileSync(binary)).digest("hex").slice(0, 12)}`;
  if (spawnSync("docker", ["image", "inspect", tag]).status !== 0) {
    const rootfs = join(scratch, `${name}-rootfs`);
    mkdirSync(rootfs, { recursive: true });
    execFileSync("install", ["-m", "0755", binary, join(rootfs, name)]);
    const tarball = execFileSync("tar", ["-C", rootfs, "-c", "."], { maxBuffer: 512 * 1024 * 1024 });
    execFileSync("docker", ["import", "--change", `ENTRYPOINT ["/${name}"]`, "-", tag], {
      input: tarball,
      maxBuffer: 64 * 1024 * 1024,
    });
  }
  return tag;
}

export class RealNode {
  private readonly dir: string;
  private readonly socket: string;
  private readonly daemons: Daemons;

  private constructor(private readonly cluster: TestCluster) {
    this.dir = join(cluster.dir, "node");
    this.socket = join(this.dir, "containerd.sock");
    this.daemons = new Daemons(cluster.dir);
  }

  /** Starts containerd, loads `images` (tags of the local Docker Engine), the kubelet and kube-proxy. */
  static async start(cluster: TestCluster, images: readonly string[]): Promise<RealNode> {
    const node = new RealNode(cluster);
    try {
      await node.boot(images);
    } catch (error) {
      await node.stop();
      throw error;
    }
    return node;
  }

  /** Cordons the node, deletes its pods (the kubelet tears their sandboxes down), then stops everything. */
  async stop(): Promise<void> {
    if (this.daemons.has("kubelet")) await this.drain().catch(() => undefined);
    for (const name of ["kube-proxy", "kubelet"]) await this.daemons.stop(name);
    if (this.daemons.has("containerd")) {
      // Whatever the kubelet left running (a failed drain): kill it so nothing outlives the test.
      for (const task of this.ctr("tasks", "ls", "-q").split("\n").filter(Boolean)) {
        spawnSync("ctr", ["-a", this.socket, "-n", NAMESPACE, "tasks", "kill", "-s", "SIGKILL", task]);
      }
    }
    await this.daemons.stop("containerd");
    this.cleanUpKernelState();
  }

  private async boot(images: readonly string[]): Promise<void> {
    mkdirSync(join(this.dir, "cni"), { recursive: true });
    this.cleanUpKernelState();
    const pauseImage = this.pauseImage();
    this.writeContainerdConfig(pauseImage);
    this.daemons.start("containerd", "/usr/bin/containerd", ["--config", join(this.dir, "containerd.toml")]);
    await waitFor("containerd", async () => spawnSync("ctr", ["-a", this.socket, "version"]).status === 0);
    for (const image of [pauseImage, ...images]) this.loadImage(image);
    const [kubeletPort, healthzPort, proxyHealthPort, proxyMetricsPort] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    writeFileSync(join(this.dir, "kubelet.json"), JSON.stringify(this.kubeletConfig(kubeletPort, healthzPort)));
    this.daemons.start("kubelet", join(this.cluster.bin, "kubelet"), [
      `--kubeconfig=${this.cluster.adminKubeconfig}`,
      `--config=${join(this.dir, "kubelet.json")}`,
      `--root-dir=${join(this.dir, "kubelet")}`,
      `--hostname-override=${NODE_NAME}`,
      `--node-ip=${this.cluster.advertiseAddress}`,
    ]);
    writeFileSync(
      join(this.dir, "kube-proxy.json"),
      JSON.stringify({
        apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
        kind: "KubeProxyConfiguration",
        clientConnection: { kubeconfig: this.cluster.adminKubeconfig },
        hostnameOverride: NODE_NAME,
        mode: "iptables",
        clusterCIDR: POD_SUBNET,
        // The machine's conntrack table is not ours to resize.
        conntrack: { maxPerCore: 0 },
        healthzBindAddress: `127.0.0.1:${proxyHealthPort}`,
        metricsBindAddress: `127.0.0.1:${proxyMetricsPort}`,
      }),
    );
    this.daemons.start("kube-proxy", join(this.cluster.bin, "kube-proxy"), [
      `--config=${join(this.dir, "kube-proxy.json")}`,
      // Each rule sync and how long it took: what a test waiting on a ClusterIP needs to read.
      "--v=2",
    ]);
    const core = this.cluster.adminConfig().makeApiClient(CoreV1Api);
    await waitFor("the real node Ready", async () => {
      const node: V1Node = await core.readNode({ name: NODE_NAME });
      return node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
    });
  }

  /** The sandbox image, from the pause binary build.sh made. */
  private pauseImage(): string {
    return binaryImage(join(this.cluster.bin, "pause"), "pause", this.dir);
  }

  /**
   * Whether kube-proxy has programmed `clusterIP:port` to the Service's endpoints (its nat rule
   * jumping to the Service's chain). Until then a connection to the address leaves the machine,
   * and this machine's network answers an address nothing routes with an HTTP 404 of its own,
   * which a test would take for the data plane's.
   */
  serviceRouted(clusterIP: string, port: number): boolean {
    return this.natRules().some(
      (rule) =>
        rule.startsWith("-A KUBE-SERVICES ") &&
        rule.includes(` -d ${clusterIP}/32 `) &&
        rule.includes(` --dport ${port} `) &&
        rule.includes(" -j KUBE-SVC-"),
    );
  }

  /**
   * Whether kube-proxy sends a Service's connections to `podIP:port` (an endpoint's DNAT rule):
   * a pod that just became Ready is in the EndpointSlice before it is in the rules, and a
   * Service with no endpoint in its rules refuses connections.
   */
  endpointRouted(podIP: string, port: number): boolean {
    return this.natRules().some(
      (rule) =>
        rule.startsWith("-A KUBE-SEP-") &&
        rule.includes(" -j DNAT ") &&
        rule.endsWith(` --to-destination ${podIP}:${port}`),
    );
  }

  private natRules(): string[] {
    return execFileSync("iptables-save", ["-t", "nat"], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }).split("\n");
  }

  /** kube-proxy's last log lines (at -v=2 each rule sync and its duration; a failed sync says why). */
  kubeProxyLogTail(lines = 10): string {
    return readFileSync(this.daemons.logFile("kube-proxy"), "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  }

  /** Copies an image from the Docker Engine into the node's containerd (what `kind load` does). */
  loadImage(image: string): void {
    const loaded = spawnSync(
      "bash",
      [
        "-c",
        'set -o pipefail; docker save "$1" | ctr -a "$2" -n "$3" images import -',
        "load",
        image,
        this.socket,
        NAMESPACE,
      ],
      { encoding: "utf8" },
    );
    if (loaded.status !== 0) throw new Error(`loading ${image} into the node: ${loaded.stderr}`);
  }

  private writeContainerdConfig(pauseImage: string): void {
    writeFileSync(
      join(this.dir, "cni", "10-dynamo-kserve.conflist"),
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "dynamo-kserve",
        plugins: [
          {
            type: "bridge",
            bridge: BRIDGE,
            isGateway: true,
            ipMasq: true,
            ipam: {
              type: "host-local",
              dataDir: join(this.dir, "ipam"),
              ranges: [[{ subnet: POD_SUBNET }]],
              routes: [{ dst: "0.0.0.0/0" }],
            },
          },
          // Lets pods' traffic through a FORWARD chain whose policy is DROP (Docker sets it),
          // so pods reach each other, e.g. the operator's pod a data plane's.
          { type: "firewall", backend: "iptables" },
          { type: "portmap", capabilities: { portMappings: true } },
        ],
      }),
    );
    writeFileSync(
      join(this.dir, "containerd.toml"),
      [
        "version = 2",
        `root = ${JSON.stringify(join(this.dir, "containerd"))}`,
        `state = ${JSON.stringify(join(this.dir, "containerd-state"))}`,
        "[grpc]",
        `  address = ${JSON.stringify(this.socket)}`,
        '[plugins."io.containerd.grpc.v1.cri"]',
        `  sandbox_image = ${JSON.stringify(pauseImage)}`,
        // This machine is itself a container: it may not lower a process's OOM score below
        // its own, which the CRI does for sandboxes (runc then fails with "can't get final
        // child's PID from pipe").
        "  restrict_oom_score_adj = true",
        '  stream_server_port = "0"',
        '  [plugins."io.containerd.grpc.v1.cri".containerd]',
        '    snapshotter = "overlayfs"',
        '  [plugins."io.containerd.grpc.v1.cri".cni]',
        `    bin_dir = ${JSON.stringify(CNI_BIN)}`,
        `    conf_dir = ${JSON.stringify(join(this.dir, "cni"))}`,
        "",
      ].join("\n"),
    );
  }

  private kubeletConfig(port: number, healthzPort: number): object {
    return {
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      containerRuntimeEndpoint: `unix://${this.socket}`,
      port,
      healthzPort,
      readOnlyPort: 0,
      // The API server's requests (logs, exec, port-forward) are trusted on this loopback-only node.
      authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
      authorization: { mode: "AlwaysAllow" },
      // This machine is a container on cgroup v1 with swap: the kubelet may not manage its
      // cgroups, QoS tiers, node allocatable or evictions, only run pods.
      cgroupDriver: "cgroupfs",
      failCgroupV1: false,
      failSwapOn: false,
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      localStorageCapacityIsolation: false,
      evictionHard: {},
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      resolvConf: "",
      podLogsDir: join(this.dir, "pod-logs"),
      nodeStatusUpdateFrequency: "2s",
      syncFrequency: "5s",
    };
  }

  /** Cordons the node and deletes its pods, waiting until the kubelet has torn them down. */
  private async drain(): Promise<void> {
    const core = this.cluster.adminConfig().makeApiClient(CoreV1Api);
    this.cluster.kubectl("cordon", NODE_NAME);
    const onNode = async (): Promise<{ name: string; namespace: string }[]> =>
      (await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${NODE_NAME}` })).items.map((pod) => ({
        name: pod.metadata!.name!,
        namespace: pod.metadata!.namespace!,
      }));
    for (const pod of await onNode()) {
      await core.deleteNamespacedPod({ ...pod, gracePeriodSeconds: 1 }).catch(() => undefined);
    }
    await waitFor("the node's pods deleted", async () => (await onNode()).length === 0, 60_000);
    await waitFor("the node's sandboxes stopped", async () => this.ctr("tasks", "ls", "-q").trim() === "", 30_000);
  }

  /** Removes what outlives the processes: mounts, network namespaces, iptables chains, the bridge. */
  private cleanUpKernelState(): void {
    const mounts = readFileSync("/proc/mounts", "utf8")
      .split("\n")
      .map((line) => line.split(" ")[1] ?? "")
      .filter((target) => target.startsWith(this.dir))
      .reverse();
    for (const target of mounts) spawnSync("umount", ["--lazy", target]);
    if (existsSync(join(this.cluster.bin, "kube-proxy"))) {
      spawnSync(join(this.cluster.bin, "kube-proxy"), ["--cleanup"], { stdio: "ignore" });
    }
    // The kubelet's own chains (kube-proxy --cleanup leaves them): its canaries, its hint and the
    // firewall rule against martian packets to 127.0.0.0/8; and the CNI firewall plugin's.
    for (const iptables of ["iptables", "ip6tables"]) {
      for (const hook of ["INPUT", "OUTPUT"]) {
        spawnSync(iptables, ["-t", "filter", "-D", hook, "-j", "KUBE-FIREWALL"], { stdio: "ignore" });
      }
      spawnSync(iptables, ["-t", "filter", "-D", "FORWARD", "-j", "CNI-FORWARD"], { stdio: "ignore" });
      for (const chain of ["CNI-FORWARD", "CNI-ADMIN"]) {
        spawnSync(iptables, ["-t", "filter", "-F", chain], { stdio: "ignore" });
        spawnSync(iptables, ["-t", "filter", "-X", chain], { stdio: "ignore" });
      }
      for (const table of ["filter", "nat", "mangle"]) {
        for (const chain of ["KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"]) {
          spawnSync(iptables, ["-t", table, "-F", chain], { stdio: "ignore" });
          spawnSync(iptables, ["-t", table, "-X", chain], { stdio: "ignore" });
        }
      }
    }
    spawnSync("ip", ["link", "delete", BRIDGE], { stdio: "ignore" });
  }

  private ctr(...args: string[]): string {
    const result = spawnSync("ctr", ["-a", this.socket, "-n", NAMESPACE, ...args], { encoding: "utf8" });
    return result.status === 0 ? result.stdout : "";
  }
}

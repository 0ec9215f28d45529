import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { hostAddress, pinnedVersion, REPO_ROOT, type TestCluster } from "../cluster/cluster.js";
import { Daemons, waitFor } from "../cluster/daemons.js";
import { freePort } from "./ports.js";
import { CACHE_DIR, requireProgram } from "./prerequisites.js";

/** A binary e2e/platform/build.sh builds: `component` of `name` at the version pinned as `pin`. */
function platformBinary(name: string, pin: string, component = name): string {
  return join(CACHE_DIR, "platform", `${name}-${pinnedVersion(pin)}`, "bin", component);
}

export const PROMETHEUS_OPERATOR = (): string =>
  platformBinary("prometheus-operator", "PROMETHEUS_OPERATOR_VERSION", "operator");
export const CONFIG_RELOADER = (): string =>
  platformBinary("prometheus-operator", "PROMETHEUS_OPERATOR_VERSION", "prometheus-config-reloader");
export const PROMETHEUS = (): string => platformBinary("prometheus", "PROMETHEUS_VERSION");
export const PROMETHEUS_ADAPTER = (): string =>
  platformBinary("prometheus-adapter", "PROMETHEUS_ADAPTER_VERSION", "adapter");
export const METRICS_SERVER = (): string => platformBinary("metrics-server", "METRICS_SERVER_VERSION");
export const LWEPP = (): string => platformBinary("lwepp", "GATEWAY_API_INFERENCE_EXTENSION_LWEPP_VERSION");
export const EPP = (): string => platformBinary("epp", "GATEWAY_API_INFERENCE_EXTENSION_VERSION");
export const TRAEFIK = (): string => platformBinary("traefik", "TRAEFIK_VERSION");
export const KEDA_OPERATOR = (): string => platformBinary("keda", "KEDA_VERSION", "operator");
export const KEDA_ADAPTER = (): string => platformBinary("keda", "KEDA_VERSION", "adapter");

/** What e2e/platform/build.sh builds, by its names there, and the binaries each gives. */
const COMPONENTS = {
  keda: () => [KEDA_OPERATOR(), KEDA_ADAPTER()],
  "prometheus-operator": () => [PROMETHEUS_OPERATOR(), CONFIG_RELOADER()],
  prometheus: () => [PROMETHEUS()],
  "prometheus-adapter": () => [PROMETHEUS_ADAPTER()],
  "metrics-server": () => [METRICS_SERVER()],
  lwepp: () => [LWEPP()],
  epp: () => [EPP()],
  traefik: () => [TRAEFIK()],
} satisfies Record<string, () => string[]>;
export type PlatformComponent = keyof typeof COMPONENTS;

/** Longer than any one component's cold build on 2 cores (KEDA's, the longest, took 15 minutes). */
const BUILD_TIMEOUT_MS = 3_600_000;

/**
 * Makes sure e2e/platform/build.sh has built `component` before a test runs it. Under CI the
 * platform is built in the background while the tiers that do not need it run (.ci/run), so a
 * test may ask before its component is there: it then runs build.sh for that component, which
 * waits for the build under way (a lock per component) or builds it at once, and the wait does
 * not count against the test's timeout. Elsewhere a missing component skips, as requireProgram
 * does (a build takes minutes).
 */
export async function requirePlatform(context: Mocha.Context, component: PlatformComponent): Promise<void> {
  const binaries = COMPONENTS[component]();
  if (process.env["CI"] === "true" && !binaries.every((binary) => existsSync(binary))) {
    const timeout = context.timeout();
    // Not 0: mocha's timeout(0) leaves the running timer armed. Restoring it re-arms it whole.
    context.timeout(BUILD_TIMEOUT_MS);
    try {
      await buildPlatform(component);
    } finally {
      context.timeout(timeout);
    }
  }
  for (const binary of binaries) {
    requireProgram(context, binary, component, `run bash e2e/platform/build.sh ${component}`);
  }
}

async function buildPlatform(component: PlatformComponent): Promise<void> {
  const started = Date.now();
  const build = spawn("bash", [join(REPO_ROOT, "e2e", "platform", "build.sh"), component], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const [code] = (await once(build, "exit")) as [number | null];
  if (code !== 0) throw new Error(`e2e/platform/build.sh ${component} failed (exit ${code}; its output is above)`);
  console.log(`      waited ${((Date.now() - started) / 1000).toFixed(0)} s for the platform's ${component}`);
}

/** An API group that a Kubernetes aggregated API server on this machine serves to the test cluster. */
export interface AggregatedApi {
  /** The program's name (its folder, its daemon, its Service). */
  readonly name: string;
  readonly binary: string;
  readonly namespace: string;
  readonly group: string;
  readonly version: string;
  /** Its own flags (the generic API server's serving and delegated auth flags are added). */
  readonly args: readonly string[];
  /** Added to its environment. */
  readonly env?: Record<string, string>;
}

/** The folder an aggregated API server is given as --cert-dir (its serving certificate is made there). */
export function aggregatedApiCertDir(cluster: TestCluster, name: string): string {
  return join(cluster.dir, name, "certs");
}

/**
 * Starts an aggregated API server (prometheus-adapter, metrics-server: both built on
 * k8s.io/apiserver) on this machine and registers its API group with the cluster's
 * aggregation layer: an APIService whose Service has this machine as its one endpoint (the
 * API server reaches it through the endpoints: --enable-aggregator-routing). Resolves once
 * the API server calls it Available; the returned daemons stop it (`stop(api.name)`).
 */
export async function startAggregatedApiServer(cluster: TestCluster, api: AggregatedApi): Promise<Daemons> {
  const dir = join(cluster.dir, api.name);
  const certDir = aggregatedApiCertDir(cluster, api.name);
  mkdirSync(certDir, { recursive: true });
  const port = await freePort();
  // An Endpoints address may not be loopback: on a loopback-only cluster (the Kubernetes
  // tier's) the server listens on this machine's own address, which the API server reaches too.
  const address = cluster.advertiseAddress === "127.0.0.1" ? hostAddress() : cluster.advertiseAddress;
  const daemons = new Daemons(dir);
  daemons.start(
    api.name,
    api.binary,
    [
      `--secure-port=${port}`,
      `--bind-address=${address}`,
      `--cert-dir=${certDir}`,
      `--authentication-kubeconfig=${cluster.adminKubeconfig}`,
      `--authorization-kubeconfig=${cluster.adminKubeconfig}`,
      ...api.args,
    ],
    api.env,
  );
  try {
    await register(cluster, api, address, port);
  } catch (error) {
    await daemons.stop(api.name);
    throw error;
  }
  return daemons;
}

async function register(cluster: TestCluster, api: AggregatedApi, address: string, port: number): Promise<void> {
  const { name, namespace, group, version } = api;
  cluster.apply(
    ...(namespace === "kube-system" ? [] : [{ apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }]),
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
      subsets: [{ addresses: [{ ip: address }], ports: [{ port, protocol: "TCP" }] }],
    },
    {
      apiVersion: "apiregistration.k8s.io/v1",
      kind: "APIService",
      metadata: { name: `${version}.${group}` },
      spec: {
        group,
        version,
        service: { name, namespace, port: 443 },
        // The server's certificate is self-signed (its --cert-dir).
        insecureSkipTLSVerify: true,
        groupPriorityMinimum: 100,
        versionPriority: 100,
      },
    },
  );
  await waitFor(
    `the ${group} APIService Available`,
    async () => {
      const service = cluster.kubectlGet<{ status?: { conditions?: { type: string; status: string }[] } }>(
        "apiservice",
        `${version}.${group}`,
      );
      return service.status?.conditions?.some((c) => c.type === "Available" && c.status === "True") ?? false;
    },
    60_000,
  );
}

/**
 * Removes what startAggregatedApiServer registered (the APIService, its Service and
 * Endpoints), so a shared cluster's discovery does not keep failing on an API nobody serves
 * any more (the namespace and garbage collectors would stall on it).
 */
export function unregisterAggregatedApi(
  cluster: TestCluster,
  api: Pick<AggregatedApi, "name" | "namespace" | "group" | "version">,
): void {
  cluster.kubectl("delete", "apiservice", `${api.version}.${api.group}`, "--ignore-not-found");
  cluster.kubectl("delete", "service,endpoints", api.name, "-n", api.namespace, "--ignore-not-found");
}

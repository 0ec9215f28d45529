import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiException, KubeConfig, VersionApi } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import { makeApiClient } from "./api-clients.js";

/** What a pod's service account mounts (client-node's in-cluster configuration reads it). */
const SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/** Between two looks at an API server that is not answering yet. */
const RETRY_MS = 1_000;

/** A kubeconfig, and where it came from: the words an error about the cluster starts with. */
export interface ClusterConfig {
  readonly config: KubeConfig;
  /** e.g. `kubeconfig /home/me/.kube/config, context kind-dev, server https://127.0.0.1:6443`. */
  readonly description: string;
}

/**
 * The cluster to talk to: the kubeconfig at `path` (--kubeconfig or $KUBECONFIG), else
 * ~/.kube/config, else the pod's service account — client-node's order. With none of them
 * this says so at once: client-node would fall back to http://localhost:8080, which it then
 * refuses to use ("HTTP protocol is not allowed when skipTLSVerify is not set"), forever.
 */
export function loadCluster(path: string | undefined): ClusterConfig {
  const config = new KubeConfig();
  const file = path ?? defaultKubeconfig();
  if (file !== undefined) {
    config.loadFromFile(file);
    return { config, description: `kubeconfig ${file}, ${contextAndServer(config)}` };
  }
  if (existsSync(SERVICE_ACCOUNT_TOKEN)) {
    config.loadFromCluster();
    return { config, description: `in-cluster service account, ${contextAndServer(config)}` };
  }
  throw new Error(
    "no Kubernetes cluster configured: no --kubeconfig, $KUBECONFIG is unset, ~/.kube/config does not exist, " +
      `and this is not a pod (no ${SERVICE_ACCOUNT_TOKEN}); point --kubeconfig at a cluster's kubeconfig`,
  );
}

function defaultKubeconfig(): string | undefined {
  const file = join(homedir(), ".kube", "config");
  return existsSync(file) ? file : undefined;
}

function contextAndServer(config: KubeConfig): string {
  return `context ${config.getCurrentContext() || "(none)"}, server ${config.getCurrentCluster()?.server ?? "(none)"}`;
}

/**
 * Resolves once the API server answers (any HTTP status: it is there; what it refuses, the
 * watches report). Until then it logs once that it is waiting, and it rejects after
 * `timeoutMs` with what it tried and the last error — a start without a cluster ends
 * instead of retrying forever. A kubeconfig the client cannot use fails at once.
 */
export async function waitForApiServer(
  { config, description }: ClusterConfig,
  { timeoutMs, logger }: { timeoutMs: number; logger: Logger },
): Promise<void> {
  const cluster = config.getCurrentCluster();
  if (cluster === null) throw new Error(`the kubeconfig names no current cluster (${description})`);
  if (cluster.server.startsWith("http:") && cluster.skipTLSVerify !== true) {
    throw new Error(
      `${description}: the Kubernetes client talks plain HTTP only to a cluster marked insecure-skip-tls-verify: true`,
    );
  }
  const version = makeApiClient(config, VersionApi);
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    // Each look gets at least RETRY_MS, so the last one can still tell why it failed.
    const problem = await lookAt(version, Math.max(deadline - Date.now(), RETRY_MS));
    if (problem === undefined) return;
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new Error(
        `no Kubernetes API server reachable (${description}) within ${Math.round(timeoutMs / 1000)} s: ${problem}`,
      );
    }
    if (attempt === 1) {
      logger.warn(
        { cluster: description, err: problem, waitSecs: Math.round(timeoutMs / 1000) },
        "Kubernetes API server not reachable yet; waiting",
      );
    }
    await sleep(Math.min(RETRY_MS, left));
  }
}

/**
 * One GET /version: undefined when the server answered (any HTTP status), else why not. A
 * server that takes connections and never answers is given up on after `timeoutMs`.
 */
async function lookAt(version: VersionApi, timeoutMs: number): Promise<string | undefined> {
  const giveUp = new AbortController();
  const problem = await Promise.race([
    version.getCode().then(
      () => undefined,
      (error: unknown) => (error instanceof ApiException ? undefined : errorMessage(error)),
    ),
    sleep(timeoutMs, `no answer in ${timeoutMs} ms`, { signal: giveUp.signal }).catch(() => "stopped"),
  ]);
  giveUp.abort();
  return problem;
}

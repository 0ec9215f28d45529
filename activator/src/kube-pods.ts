import {
  CoreV1Api,
  KubeConfig,
  makeInformer,
  type Informer,
  type V1Pod,
  type ObjectCache,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../lib/errors.js";
import type { PodWatch, ReadyPod } from "./pods.js";

/** Delays before a failed watch is started again: the first, and the most. */
const RESTART_MS = { first: 500, most: 30_000 };

/** A pod takes requests when it is Ready, has an IP and is not being deleted (what an EndpointSlice calls ready). */
export function readyPodOf(pod: V1Pod): ReadyPod | undefined {
  const name = pod.metadata?.name;
  const ip = pod.status?.podIP;
  if (name === undefined || ip === undefined || ip === "" || pod.metadata?.deletionTimestamp !== undefined)
    return undefined;
  const ready = pod.status?.conditions?.some((condition) => condition.type === "Ready" && condition.status === "True");
  return ready === true ? { name, ip } : undefined;
}

/** A kubeconfig: `path` if given, else client-node's default order ($KUBECONFIG, ~/.kube/config, in-cluster). */
export function kubeConfigFrom(path: string | undefined): KubeConfig {
  const config = new KubeConfig();
  if (path !== undefined) config.loadFromFile(path);
  else config.loadFromDefault();
  return config;
}

/**
 * The model's data-plane pods, from a watch of Pods by label selector in one namespace
 * (client-node's informer: a list, then a watch, relisting when the watch expires). A watch
 * that fails is started again with backoff, resuming from where it was; until the first list
 * the activator does not claim to know that no pod is ready (`synced`).
 */
export class KubePods implements PodWatch {
  private readonly informer: Informer<V1Pod> & ObjectCache<V1Pod>;
  private readonly listeners: (() => void)[] = [];
  private ready: readonly ReadyPod[] = [];
  private stopped = false;
  private failures = 0;
  private announcedSynced = false;
  synced = false;

  constructor(
    config: KubeConfig,
    namespace: string,
    selector: string,
    private readonly logger: Logger,
  ) {
    const api = config.makeApiClient(CoreV1Api);
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
    const list = async () => {
      const pods = await api.listNamespacedPod({ namespace, labelSelector: selector });
      queueMicrotask(() => {
        this.synced = true;
        this.failures = 0;
        this.refresh();
      });
      return pods;
    };
    this.informer = makeInformer<V1Pod>(config, path, list, selector) as Informer<V1Pod> & ObjectCache<V1Pod>;
    for (const event of ["add", "update", "delete"] as const) this.informer.on(event, () => this.refresh());
    this.informer.on("error", (error: unknown) => this.restartLater(error));
  }

  /** Starts the watch; resolves once the pods were listed once. */
  async start(): Promise<void> {
    await this.informer.start();
    this.refresh();
  }

  readyPods(): readonly ReadyPod[] {
    return this.ready;
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.informer.stop();
  }

  private refresh(): void {
    const ready = this.informer
      .list()
      .map(readyPodOf)
      .filter((pod): pod is ReadyPod => pod !== undefined)
      .sort((a, b) => a.name.localeCompare(b.name));
    const same = ready.length === this.ready.length && ready.every((pod, i) => pod.ip === this.ready[i]!.ip);
    this.ready = ready;
    if (same && this.synced === this.announcedSynced) return;
    this.announcedSynced = this.synced;
    for (const listener of this.listeners) listener();
  }

  private restartLater(error: unknown): void {
    if (this.stopped) return;
    const delay = Math.min(RESTART_MS.most, RESTART_MS.first * 2 ** this.failures++);
    this.logger.warn({ err: errorMessage(error), retryInMs: delay }, "pod watch failed; restarting");
    setTimeout(() => {
      if (!this.stopped) this.informer.start().catch((failure: unknown) => this.restartLater(failure));
    }, delay).unref();
  }
}

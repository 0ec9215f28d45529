import {
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type KubernetesObjectApi,
  type ObjectCache,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";

/** A kind to watch: its API version, kind and REST path segment (plural). */
export interface WatchedKind {
  readonly apiVersion: string;
  readonly kind: string;
  readonly plural: string;
}

export type WatchEvent = "add" | "update" | "delete";

export interface WatchOptions {
  /** Namespaces to watch; empty means all. */
  readonly namespaces: readonly string[];
  readonly labelSelector?: string;
  readonly logger: Logger;
  readonly onEvent: (event: WatchEvent, object: KubernetesObject) => void;
  /** First and largest delay before a failed watch is restarted. */
  readonly backoff?: { readonly initialMs: number; readonly maxMs: number };
}

type CachedInformer<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

/**
 * A cache of one kind, kept current by client-node informers (one per namespace, or one
 * for all). client-node relists by itself when a watch expires (410 Gone); on any other
 * failure its informer stops, so we restart it with exponential backoff: the watch is
 * never silently dead, and a restart resumes from the last resourceVersion.
 */
export class WatchedObjects<T extends KubernetesObject> {
  private readonly informers: CachedInformer<T>[] = [];
  private stopped = false;

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly api: KubernetesObjectApi,
    readonly kind: WatchedKind,
    private readonly options: WatchOptions,
  ) {}

  /** Starts watching; resolves once every informer has listed (the cache is synced). */
  async start(): Promise<void> {
    const scopes = this.options.namespaces.length > 0 ? this.options.namespaces : [undefined];
    await Promise.all(scopes.map((namespace) => this.startInformer(namespace)));
  }

  get(namespace: string, name: string): T | undefined {
    for (const informer of this.informers) {
      const found = informer.get(name, namespace);
      if (found !== undefined) return found;
    }
    return undefined;
  }

  list(namespace?: string): T[] {
    return this.informers.flatMap((informer) => informer.list(namespace));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.informers.map((informer) => informer.stop()));
  }

  private async startInformer(namespace: string | undefined): Promise<void> {
    const { apiVersion, kind, plural } = this.kind;
    const prefix = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    const path = namespace === undefined ? `${prefix}/${plural}` : `${prefix}/namespaces/${namespace}/${plural}`;
    let markSynced: () => void = () => undefined;
    const synced = new Promise<void>((resolve) => (markSynced = resolve));
    const list = async (): Promise<KubernetesListObject<T>> => {
      const result = await this.api.list<T>(
        apiVersion,
        kind,
        namespace,
        undefined,
        undefined,
        undefined,
        undefined,
        this.options.labelSelector,
      );
      for (const item of result.items) withoutManagedFields(item);
      markSynced();
      return result;
    };
    // client-node's informer is also the object cache (its ListWatch implements both).
    const informer = makeInformer<T>(this.kubeConfig, path, list, this.options.labelSelector) as CachedInformer<T>;
    this.informers.push(informer);
    for (const event of ["add", "update", "delete"] as const) {
      informer.on(event, (object) => this.options.onEvent(event, withoutManagedFields(object)));
    }
    const { initialMs, maxMs } = this.options.backoff ?? { initialMs: 500, maxMs: 30_000 };
    let failures = 0;
    let failedSinceStart = false;
    const restart = async (): Promise<void> => {
      if (this.stopped) return;
      failedSinceStart = false;
      await informer.start().catch(onFailure);
      if (!failedSinceStart) failures = 0;
    };
    const onFailure = (error: unknown): void => {
      failedSinceStart = true;
      if (this.stopped) return;
      const delay = Math.min(maxMs, initialMs * 2 ** failures);
      failures++;
      this.options.logger.warn(
        { kind, namespace, err: errorMessage(error), retryInMs: delay },
        "watch failed; restarting",
      );
      setTimeout(() => void restart(), delay).unref();
    };
    informer.on("error", onFailure);
    await restart();
    await synced;
  }
}

/**
 * Drops metadata.managedFields from an object the cache holds, in place (as
 * controller-runtime's TransformStripManagedFields): nothing here reads them, and they are
 * the largest part of a cached Deployment. client-node's informer stores the very object it
 * passes to event handlers, and the list items we return, so this shrinks the cache itself.
 */
function withoutManagedFields<T extends KubernetesObject>(object: T): T {
  if (object.metadata !== undefined) delete object.metadata.managedFields;
  return object;
}

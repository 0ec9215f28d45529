import type { KubernetesObject, V1Service } from "@kubernetes/client-node";
import type { WatchedObjects } from "../kube/informer.js";
import type { OptionalKind } from "../kube/optional-kind.js";
import type { KubeWriter } from "../kube/writer.js";
import { desiredPoolService, poolServiceName, POOL_LABEL, type InferencePool } from "../resources/inference-pool.js";
import { keyOf } from "./shared.js";

/**
 * Keeps a Service in front of every InferencePool in scope, ours or a user's, with the
 * pool's target ports and the appProtocol its pods speak. The Service is owned by the
 * pool, so it goes when the pool goes.
 */
export class InferencePoolController {
  constructor(
    private readonly pools: OptionalKind<InferencePool>,
    private readonly services: WatchedObjects<V1Service & KubernetesObject>,
    private readonly writer: KubeWriter,
  ) {}

  /** Keys of the pools an event on an object of `kind` concerns. */
  keysFor(kind: string, object: KubernetesObject): string[] {
    const namespace = object.metadata?.namespace ?? "";
    if (kind === "InferencePool") return [keyOf(namespace, object.metadata?.name ?? "")];
    const pool = kind === "Service" ? object.metadata?.labels?.[POOL_LABEL] : undefined;
    return pool === undefined ? [] : [keyOf(namespace, pool)];
  }

  /** Every pool's key (after its CRD appears or changes). */
  allKeys(): string[] {
    return (this.pools.objects()?.list() ?? []).map((pool) => keyOf(pool.metadata.namespace, pool.metadata.name));
  }

  async reconcile(key: string): Promise<void> {
    const [namespace, name] = key.split("/") as [string, string];
    const pool = this.pools.objects()?.get(namespace, name);
    if (pool === undefined || pool.metadata.deletionTimestamp !== undefined) {
      // The Service goes with its pool (owner reference).
      this.writer.forget(namespace, [poolServiceName(name)]);
      return;
    }
    const desired = desiredPoolService(pool);
    await this.writer.apply(desired, this.services.get(namespace, desired.metadata!.name!));
  }
}

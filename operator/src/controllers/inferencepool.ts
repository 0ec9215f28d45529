import { keyOf, mapped, type Controller, type ObjectSource, type Planned, type Watch } from "../kube/controller.js";
import type { OwnedKind, PlanGroup } from "../kube/owned.js";
import type { OptionalKind } from "../kube/optional-kind.js";
import { SERVICE_KIND } from "../resources/dataplane-pods.js";
import {
  desiredPoolService,
  INFERENCE_POOL_KIND,
  poolServiceName,
  POOL_LABEL,
  type InferencePool,
  type PoolOwner,
} from "../resources/inference-pool.js";

/**
 * The watch an owner kind that asks for pools (DynamoKserveModel, DynamoKserveRepository)
 * keeps on the InferencePools that are not its own: one taking or freeing the name its pool
 * would have (the owner's name) requeues that owner, when it asks for a pool. Its own pools'
 * events reach it by its owner label. `find` looks an owner up (a function: the watch is made
 * before the controller's caches are assigned).
 */
export function namesakePoolWatch(
  ownerLabel: string,
  find: (namespace: string, name: string) => PoolOwner | undefined,
): Watch {
  return mapped([INFERENCE_POOL_KIND.kind], (pool) => {
    if (pool.metadata?.labels?.[ownerLabel] !== undefined) return [];
    const owner = find(pool.metadata?.namespace ?? "", pool.metadata?.name ?? "");
    return owner?.spec.inferencePool !== undefined ? [keyOf(owner.metadata.namespace, owner.metadata.name)] : [];
  });
}

/** What an InferencePool (ours or a user's) gets from the operator: the Service in front of it. */
export const POOL_OWNS: readonly OwnedKind[] = [SERVICE_KIND];

/**
 * Keeps a Service in front of every InferencePool in scope, ours or a user's, with the
 * pool's target ports and the appProtocol its pods speak. The Service is owned by the
 * pool, so it goes when the pool goes.
 */
export class InferencePoolController implements Controller<InferencePool> {
  readonly name = "inferencepool";
  readonly kind = INFERENCE_POOL_KIND.kind;
  readonly owns = POOL_OWNS;
  readonly ownerLabel = POOL_LABEL;
  readonly watches: readonly Watch[] = [];

  constructor(private readonly pools: OptionalKind<InferencePool>) {}

  objects(): ObjectSource<InferencePool> | undefined {
    return this.pools.objects();
  }

  ownedNames(name: string): readonly string[] {
    return [poolServiceName(name)];
  }

  reconcile(pool: InferencePool): Promise<Planned<never>> {
    const service: PlanGroup = [{ apply: desiredPoolService(pool) }];
    return Promise.resolve({
      plan: [service],
      settle: (outcomes) => {
        // A pool has no status to say it in: the reconcile fails, so it is logged, counted
        // and retried with backoff (a user's Service of that name goes without an event here).
        const stopped = outcomes.stopped(service);
        if (stopped !== undefined) throw new Error(stopped.message);
        return {};
      },
    });
  }
}

import type { KubernetesObject, V1Service } from "@kubernetes/client-node";
import { ownedByLabel, type Controller, type ObjectSource, type Reconciled, type Watch } from "../kube/controller.js";
import type { WatchedObjects } from "../kube/informer.js";
import type { OptionalKind } from "../kube/optional-kind.js";
import type { KubeWriter } from "../kube/writer.js";
import {
  desiredPoolService,
  INFERENCE_POOL_KIND,
  poolServiceName,
  POOL_LABEL,
  type InferencePool,
} from "../resources/inference-pool.js";

/**
 * Keeps a Service in front of every InferencePool in scope, ours or a user's, with the
 * pool's target ports and the appProtocol its pods speak. The Service is owned by the
 * pool, so it goes when the pool goes.
 */
export class InferencePoolController implements Controller<InferencePool> {
  readonly name = "inferencepool";
  readonly kind = INFERENCE_POOL_KIND.kind;
  readonly watches: readonly Watch[] = [ownedByLabel(POOL_LABEL, "Service")];

  constructor(
    private readonly pools: OptionalKind<InferencePool>,
    private readonly services: WatchedObjects<V1Service & KubernetesObject>,
    private readonly writer: KubeWriter,
  ) {}

  objects(): ObjectSource<InferencePool> | undefined {
    return this.pools.objects();
  }

  ownedNames(name: string): readonly string[] {
    return [poolServiceName(name)];
  }

  async reconcile(pool: InferencePool): Promise<Reconciled<never>> {
    const desired = desiredPoolService(pool);
    await this.writer.apply(desired, this.services.get(pool.metadata.namespace, desired.metadata!.name!));
    return {};
  }
}

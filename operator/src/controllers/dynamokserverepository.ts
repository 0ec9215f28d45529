import type { KubernetesObject, V1ConfigMap, V1Deployment, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import {
  REPOSITORY_KIND,
  REPOSITORY_PLURAL,
  type DynamoKserveRepository,
  type DynamoKserveRepositoryStatus,
} from "../api/v1alpha1.js";
import type { WatchedObjects } from "../kube/informer.js";
import { objectLeftRunning, uniqueKinds, type OwnedKind } from "../kube/owned.js";
import { INFERENCE_POOL_KIND } from "../resources/inference-pool.js";
import { POOL_PLAN_OWNS, poolOutcome, poolPlan } from "../resources/pool-plan.js";
import { endpointPickerName } from "../resources/endpoint-picker.js";
import type { RepositoryIndexReader } from "../probes/repository-index.js";
import { REPOSITORY_LABEL } from "../resources/names.js";
import { DEPLOYMENT_KIND, portsOf, type BuildSettings } from "../resources/dataplane-pods.js";
import { DATAPLANE_OWNS, dataplanePlan, monitoringOutcome } from "../resources/dataplane.js";
import {
  desiredRepositoryDeployment,
  desiredRepositoryStatus,
  repositoryObjectName,
  type IndexOutcome,
} from "../resources/repository.js";
import { SERVICE_MONITOR_KIND } from "../resources/service-monitor.js";
import { namesakePoolWatch } from "./inferencepool.js";
import { keyOf, labelledKey, mapped, type Controller, type Planned, type Watch } from "../kube/controller.js";
import { earliest, timestamp } from "./timing.js";
import type { SecretReader } from "../kube/secrets.js";
import type { OwnedCaches } from "../kube/owned-caches.js";
import { activatorName } from "../resources/activator.js";
import { autoscalingInputs, autoscalingObserved } from "./autoscaling.js";
import type { ModelFilesChecking } from "../probes/model-files.js";
import { modelFilesRecheck, observeModelFiles } from "./model-files.js";

/** The caches the repository controller reads besides what it owns (which the manager caches from `owns`). */
export interface RepositoryCaches {
  readonly repositories: WatchedObjects<DynamoKserveRepository & KubernetesObject>;
  /** Every ConfigMap: a repository may name any of its namespace (configMapRef, storage.caBundle). */
  readonly configMaps: WatchedObjects<V1ConfigMap & KubernetesObject>;
  /** The data-plane pods of repositories (label dynamokserve.dev/repository). */
  readonly pods: WatchedObjects<V1Pod & KubernetesObject>;
}

/** What a DynamoKserveRepository makes objects of. */
export const REPOSITORY_OWNS: readonly OwnedKind[] = uniqueKinds([...DATAPLANE_OWNS, ...POOL_PLAN_OWNS]);

/** How the controller learns which models a repository's data plane serves. */
export interface RepositoryProbing {
  readonly reader: RepositoryIndexReader;
  /** host:port of a pod's gRPC port: its IP by default (tests may route elsewhere). */
  readonly addressOf: (pod: V1Pod, grpcPort: number) => string;
  /** Models change without Kubernetes noticing (files on the claim, the upstream): ask this often. */
  readonly intervalMs: number;
}

export const podIpAddress = (pod: V1Pod, grpcPort: number): string => `${pod.status?.podIP}:${grpcPort}`;

/**
 * Reconciles one DynamoKserveRepository: its data-plane Deployment and Service (and
 * ServiceMonitor), then asks a ready pod which models it serves and writes that, model
 * by model, into the status. Runs again every probing interval.
 */
export class DynamoKserveRepositoryController implements Controller<
  DynamoKserveRepository,
  DynamoKserveRepositoryStatus
> {
  readonly name = "dynamokserverepository";
  readonly kind = REPOSITORY_KIND;
  readonly statusPlural = REPOSITORY_PLURAL;
  readonly owns = REPOSITORY_OWNS;
  readonly ownerLabel = REPOSITORY_LABEL;
  readonly watches: readonly Watch[] = [
    // Its data-plane pods (not owned: their ReplicaSet owns them): one turning ready can be asked.
    mapped(["Pod"], (pod) => labelledKey(REPOSITORY_LABEL, pod)),
    // A user's ConfigMap of configs (or CA bundle): every repository whose configMapRef (or storage.caBundle) names it.
    mapped(["ConfigMap"], (configMap) =>
      this.caches.repositories
        .list(configMap.metadata?.namespace)
        .filter(
          (repository) =>
            repository.spec.configMapRef?.name === configMap.metadata?.name ||
            repository.spec.storage?.caBundle?.configMapName === configMap.metadata?.name,
        )
        .map((repository) => keyOf(repository.metadata.namespace, repository.metadata.name)),
    ),
    namesakePoolWatch(REPOSITORY_LABEL, (namespace, name) => this.caches.repositories.get(namespace, name)),
  ];

  constructor(
    private readonly caches: RepositoryCaches,
    /** Which optional kinds are installed, and the owned objects as cached. */
    private readonly owned: Pick<OwnedCaches, "installed" | "specHasField" | "get" | "takenByAnother">,
    private readonly settings: BuildSettings,
    private readonly probing: RepositoryProbing,
    /** spec.storageUri's Secret is read when needed, never watched; the checker lists the location. */
    private readonly storage: { readonly secrets: SecretReader; readonly checker: ModelFilesChecking },
    private readonly logger: Logger,
  ) {}

  objects(): WatchedObjects<DynamoKserveRepository & KubernetesObject> {
    return this.caches.repositories;
  }

  ownedNames(name: string): readonly string[] {
    return [name, activatorName(name), endpointPickerName(name)];
  }

  async reconcile(repository: DynamoKserveRepository): Promise<Planned<DynamoKserveRepositoryStatus>> {
    const { namespace } = repository.metadata;
    const objectName = repositoryObjectName(repository);
    const planned = dataplanePlan(
      {
        owner: repository,
        name: objectName,
        tls: false,
        // A repository's series are all its models'; it has no tokens or TLS of its own.
        autoscaling: autoscalingInputs(repository, objectName, {
          owned: this.owned,
          settings: this.settings,
          activator: {},
        }),
      },
      { configMaps: [], deployment: desiredRepositoryDeployment(repository, this.settings) },
    );
    const { dataplane, monitoring } = planned;
    const appProtocolSupported = this.owned.specHasField(INFERENCE_POOL_KIND, "appProtocol");
    const pool = poolPlan(repository, {
      installed: this.owned.installed(INFERENCE_POOL_KIND),
      poolTakenByAnother: this.owned.takenByAnother(
        INFERENCE_POOL_KIND,
        repository.metadata.namespace,
        repository.metadata.name,
        repository.metadata.uid,
      ),
      appProtocolSupported,
      settings: this.settings,
    });
    const { storageUri } = repository.spec;
    const modelFiles =
      storageUri === undefined
        ? undefined
        : await observeModelFiles(repository, storageUri, "repository", repository.spec.storage, {
            ...this.storage,
            configMaps: this.caches.configMaps,
          });
    return {
      plan: [dataplane, pool, monitoring, planned.autoscaling, planned.activation],
      settle: async (outcomes) => {
        const stopped = outcomes.stopped(dataplane);
        const index =
          stopped?.reason !== "NameTaken" ? await this.readIndex(repository) : ({ state: "NoReadyPod" } as const);
        // Read after the pod answered (which can take seconds): a ConfigMap made meanwhile must
        // not be reported missing beside a model list that already reflects it.
        const ref = repository.spec.configMapRef;
        const missingConfigMap =
          ref !== undefined && this.caches.configMaps.get(namespace, ref.name) === undefined ? ref.name : undefined;
        const monitored = monitoringOutcome(outcomes.of(SERVICE_MONITOR_KIND, objectName));
        const inferencePool = poolOutcome(repository, pool, outcomes, appProtocolSupported);
        const autoscaling = autoscalingObserved(repository, objectName, planned, outcomes);
        const { status, transitions } = desiredRepositoryStatus(
          repository,
          {
            deployment: objectLeftRunning(outcomes, dataplane, { kind: DEPLOYMENT_KIND, name: objectName }, () =>
              this.owned.get<V1Deployment & KubernetesObject>(DEPLOYMENT_KIND, namespace, objectName),
            ),
            index,
            ...(missingConfigMap !== undefined ? { missingConfigMap } : {}),
            ...(stopped !== undefined ? { stopped } : {}),
            ...(monitored !== undefined ? { monitoring: monitored } : {}),
            ...(inferencePool !== undefined ? { inferencePool } : {}),
            ...(modelFiles !== undefined ? { modelFiles } : {}),
            ...(autoscaling !== undefined ? { autoscaling } : {}),
          },
          timestamp(),
        );
        // The checker's cache keeps each probe from listing the bucket again.
        return {
          status,
          transitions,
          requeueAfterMs: earliest(this.probing.intervalMs, modelFilesRecheck(modelFiles, this.storage.checker))!,
        };
      },
    };
  }

  /** The models as the first ready pod (by name) reports them. */
  private async readIndex(repository: DynamoKserveRepository): Promise<IndexOutcome> {
    const { namespace, name } = repository.metadata;
    const ready = this.caches.pods
      .list(namespace)
      .filter((pod) => pod.metadata?.labels?.[REPOSITORY_LABEL] === name && isServing(pod))
      .sort((a, b) => (a.metadata?.name ?? "").localeCompare(b.metadata?.name ?? ""));
    const pod = ready[0];
    if (pod === undefined) return { state: "NoReadyPod" };
    const podName = pod.metadata?.name ?? "";
    try {
      const address = this.probing.addressOf(pod, portsOf(repository).grpc);
      return { state: "Listed", pod: podName, models: await this.probing.reader.read(address) };
    } catch (error) {
      this.logger.warn(
        { repository: `${namespace}/${name}`, pod: podName, err: errorMessage(error) },
        "RepositoryIndex failed",
      );
      return { state: "Failed", pod: podName, message: errorMessage(error) };
    }
  }
}

/** A pod that takes traffic: Ready, with an IP, not on its way out. */
function isServing(pod: V1Pod): boolean {
  return (
    pod.metadata?.deletionTimestamp === undefined &&
    pod.status?.podIP !== undefined &&
    (pod.status.conditions ?? []).some((condition) => condition.type === "Ready" && condition.status === "True")
  );
}

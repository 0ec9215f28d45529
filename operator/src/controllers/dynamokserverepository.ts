import type { KubernetesObject, V1ConfigMap, V1Deployment, V1Pod, V1Service } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import {
  REPOSITORY_KIND,
  REPOSITORY_PLURAL,
  type DynamoKserveRepository,
  type DynamoKserveRepositoryStatus,
} from "../api/v1alpha1.js";
import { NameTakenError } from "../kube/apply.js";
import type { WatchedObjects } from "../kube/informer.js";
import type { OptionalKind } from "../kube/optional-kind.js";
import type { Requeue } from "../kube/queue.js";
import type { KubeWriter } from "../kube/writer.js";
import type { RepositoryIndexReader } from "../probes/repository-index.js";
import { REPOSITORY_LABEL } from "../resources/names.js";
import { portsOf, type BuildSettings } from "../resources/objects.js";
import {
  desiredRepositoryDeployment,
  desiredRepositoryService,
  desiredRepositoryStatus,
  repositoryObjectName,
  type IndexOutcome,
} from "../resources/repository.js";
import type { ServiceMonitor } from "../resources/service-monitor.js";
import { keyOf, reconcileServiceMonitor, timestamp } from "./shared.js";

/** The caches the repository controller reads (all kept current by watches). */
export interface RepositoryCaches {
  readonly repositories: WatchedObjects<DynamoKserveRepository & KubernetesObject>;
  readonly deployments: WatchedObjects<V1Deployment & KubernetesObject>;
  readonly services: WatchedObjects<V1Service & KubernetesObject>;
  readonly configMaps: WatchedObjects<V1ConfigMap & KubernetesObject>;
  /** The data-plane pods of repositories (label dynamokserve.dev/repository). */
  readonly pods: WatchedObjects<V1Pod & KubernetesObject>;
  readonly monitors: OptionalKind<ServiceMonitor>;
}

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
export class DynamoKserveRepositoryController {
  /** The status this controller last wrote per repository: the cache may not show it yet. */
  private readonly writtenStatus = new Map<string, DynamoKserveRepositoryStatus>();

  constructor(
    private readonly caches: RepositoryCaches,
    private readonly writer: KubeWriter,
    private readonly settings: BuildSettings,
    private readonly probing: RepositoryProbing,
    private readonly logger: Logger,
  ) {}

  /** Keys of the repositories an event on an object of `kind` concerns. */
  keysFor(kind: string, object: KubernetesObject): string[] {
    const namespace = object.metadata?.namespace ?? "";
    if (kind === REPOSITORY_KIND) return [keyOf(namespace, object.metadata?.name ?? "")];
    const owner = object.metadata?.labels?.[REPOSITORY_LABEL];
    if (owner !== undefined) return [keyOf(namespace, owner)];
    if (kind !== "ConfigMap") return [];
    // A user's ConfigMap of configs: every repository whose configMapRef names it.
    return this.caches.repositories
      .list(namespace)
      .filter((repository) => repository.spec.configMapRef?.name === object.metadata?.name)
      .map((repository) => keyOf(namespace, repository.metadata.name));
  }

  allKeys(): string[] {
    return this.caches.repositories
      .list()
      .map((repository) => keyOf(repository.metadata.namespace, repository.metadata.name));
  }

  async reconcile(key: string): Promise<Requeue | undefined> {
    const [namespace, name] = key.split("/") as [string, string];
    const cached = this.caches.repositories.get(namespace, name);
    if (cached === undefined || cached.metadata.deletionTimestamp !== undefined) {
      // Owned objects go with the repository (owner references); forget what we wrote for it.
      this.writtenStatus.delete(key);
      this.writer.forget(namespace, [name]);
      return undefined;
    }
    const written = this.writtenStatus.get(key);
    const repository: DynamoKserveRepository = written !== undefined ? { ...cached, status: written } : cached;
    const objectName = repositoryObjectName(repository);
    const ref = repository.spec.configMapRef;
    const missingConfigMap =
      ref !== undefined && this.caches.configMaps.get(namespace, ref.name) === undefined ? ref.name : undefined;

    let nameTaken: string | undefined;
    let deployment = this.caches.deployments.get(namespace, objectName);
    try {
      await this.writer.apply(desiredRepositoryService(repository), this.caches.services.get(namespace, objectName));
      const applied = await this.writer.apply(desiredRepositoryDeployment(repository, this.settings), deployment);
      deployment = applied.object as V1Deployment & KubernetesObject;
    } catch (error) {
      if (!(error instanceof NameTakenError)) throw error;
      nameTaken = error.message;
    }
    const monitoring = await reconcileServiceMonitor(repository, objectName, this.caches.monitors, this.writer);
    const index = nameTaken === undefined ? await this.readIndex(repository) : ({ state: "NoReadyPod" } as const);
    const { status, transitions } = desiredRepositoryStatus(
      repository,
      {
        deployment,
        index,
        ...(missingConfigMap !== undefined ? { missingConfigMap } : {}),
        ...(nameTaken !== undefined ? { nameTaken } : {}),
        ...(monitoring !== undefined ? { monitoring } : {}),
      },
      timestamp(),
    );
    await this.writer.status(repository, REPOSITORY_PLURAL, status);
    this.writtenStatus.set(key, status);
    for (const transition of transitions) {
      await this.writer
        .event(repository, transition)
        .catch((error: unknown) =>
          this.logger.warn({ repository: key, err: errorMessage(error) }, "could not record an event"),
        );
    }
    return { afterMs: this.probing.intervalMs };
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

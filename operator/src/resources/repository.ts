import type { Transition } from "../api/objects.js";
import type { V1Deployment } from "@kubernetes/client-node";
import type { Stopped } from "../kube/owned.js";
import {
  REPOSITORY_SPEC_DEFAULTS,
  type DynamoKserveRepository,
  type DynamoKserveRepositoryStatus,
  type RepositoryConditionType,
  type RepositoryModelStatus,
} from "../api/v1alpha1.js";
import { autoscalingStatus, availabilityAtZero, type AutoscalingObserved } from "./autoscaling-status.js";
import { CLAIM_REPOSITORY_PATH, MODEL_REPOSITORY_PATH, selectorTextFor } from "./names.js";
import { modelFilesCondition, objectStoragePods, type ModelFilesOutcome } from "./storage.js";
import { dataplaneDeployment, endpointsOf, type BuildSettings, type MountedVolume } from "./dataplane-pods.js";
import {
  availabilityOf,
  conditionsOf,
  firstModelFilesEvent,
  monitoringCondition,
  notAvailable,
  poolCondition,
  poolStatus,
  type ConditionValue,
  type MonitoringOutcome,
  type PoolOutcome,
} from "./status.js";

/**
 * Pure desired-state builders for a DynamoKserveRepository: one data-plane Deployment
 * serving every model of a Triton model repository (a ConfigMap of `<model>.pbtxt` keys
 * and/or a PersistentVolumeClaim in Triton's layout), what it cannot run forwarded to the
 * upstream Triton, and the status that says how each model fared. Its Service, budget,
 * autoscaler and ServiceMonitor are every data plane's (dataplane.ts).
 */

/** Names of the objects the repository called `name` owns: its Deployment and Service share its name. */
export const repositoryObjectName = (repository: DynamoKserveRepository): string => repository.metadata.name;

/** The upstream's gRPC address, as the data plane's --forward-unsupported takes it. */
export function upstreamAddress(repository: DynamoKserveRepository): string | undefined {
  const { upstream } = repository.spec;
  if (upstream === undefined) return undefined;
  if (upstream.address !== undefined) return upstream.address;
  const port = upstream.port ?? REPOSITORY_SPEC_DEFAULTS.upstream.port;
  return `${upstream.serviceName}.${repository.metadata.namespace}.svc:${port}`;
}

/**
 * The data plane over the repository: the ConfigMap mounted at /models, the claim at
 * /repository. With both, the ConfigMap comes first, so its `<model>.pbtxt` overrides the
 * claim's config of that model, and /repository is also where single-file configs find
 * their version folders (--model-files-root). A storageUri is the repository itself: the
 * data plane syncs it into its cache (objectStoragePods).
 */
export function desiredRepositoryDeployment(repository: DynamoKserveRepository, settings: BuildSettings): V1Deployment {
  const { configMapRef, persistentVolumeClaim: claim } = repository.spec;
  const configs: MountedVolume | undefined =
    configMapRef === undefined
      ? undefined
      : {
          volume: { name: "model-configs", configMap: { name: configMapRef.name } },
          mount: { name: "model-configs", mountPath: MODEL_REPOSITORY_PATH, readOnly: true },
        };
  const files: MountedVolume | undefined =
    claim === undefined
      ? undefined
      : {
          volume: { name: "repository", persistentVolumeClaim: { claimName: claim.claimName, readOnly: true } },
          mount: {
            name: "repository",
            mountPath: CLAIM_REPOSITORY_PATH,
            readOnly: true,
            ...(claim.subPath !== undefined ? { subPath: claim.subPath } : {}),
          },
        };
  const upstream = upstreamAddress(repository);
  const { storageUri } = repository.spec;
  const storage = storageUri !== undefined ? objectStoragePods(repository.spec.storage) : undefined;
  return dataplaneDeployment(
    repository,
    repository.spec,
    repositoryObjectName(repository),
    {
      arguments: {
        // With both, the ConfigMap's configs come first: they override the claim's.
        modelRepository: [
          ...(configs !== undefined ? [MODEL_REPOSITORY_PATH] : []),
          ...(files !== undefined ? [CLAIM_REPOSITORY_PATH] : []),
          ...(storageUri !== undefined ? [storageUri] : []),
        ],
        ...(configs !== undefined && files !== undefined ? { modelFilesRoot: CLAIM_REPOSITORY_PATH } : {}),
        ...(upstream !== undefined ? { forwardUnsupported: upstream } : {}),
        ...storage?.arguments,
      },
      sourceVolumes: [...(configs !== undefined ? [configs] : []), ...(files !== undefined ? [files] : [])],
      extraVolumes: storage?.volumes ?? [],
    },
    settings,
  );
}

/** What a ready data-plane pod said of the repository's models. */
export type IndexOutcome =
  | { readonly state: "Listed"; readonly pod: string; readonly models: readonly RepositoryModelStatus[] }
  | { readonly state: "NoReadyPod" }
  | { readonly state: "Failed"; readonly pod: string; readonly message: string };

/** What the repository controller observed, the input of the status builder. */
export interface RepositoryObserved {
  readonly deployment: V1Deployment | undefined;
  readonly index: IndexOutcome;
  /** Set when the referenced ConfigMap does not exist (pods cannot start without it). */
  readonly missingConfigMap?: string;
  /** Set when an object the repository needs belongs to somebody else, or the API server refused one. */
  readonly stopped?: Stopped;
  readonly monitoring?: MonitoringOutcome;
  /** What became of spec.inferencePool (undefined when the repository asks for none). */
  readonly inferencePool?: PoolOutcome;
  /** The operator's look at spec.storageUri (undefined without one). */
  readonly modelFiles?: ModelFilesOutcome;
  /** What became of spec.autoscaling's objects (undefined when the repository asks for none). */
  readonly autoscaling?: AutoscalingObserved;
}

/** The most model reasons a condition message lists; status.models has them all. */
const REASONS_IN_MESSAGE = 5;

export function desiredRepositoryStatus(
  repository: DynamoKserveRepository,
  observed: RepositoryObserved,
  now: string,
): { status: DynamoKserveRepositoryStatus; transitions: Transition[] } {
  const endpoints = endpointsOf(repository, repositoryObjectName(repository), false);
  const endpoint = endpoints.grpc;
  // A pod that cannot be asked leaves the last list it gave (ModelsReady says it is not current).
  const models = observed.index.state === "Listed" ? [...observed.index.models] : repository.status?.models;
  const atZero = availabilityAtZero(observed.autoscaling, observed.deployment);
  const available = atZero ?? availabilityOf(observed.deployment);
  const autoscaling =
    observed.autoscaling === undefined ? {} : autoscalingStatus(observed.autoscaling, observed.deployment);
  const modelsReady = modelsCondition(observed, repositoryObjectName(repository));
  const modelFiles = observed.modelFiles === undefined ? undefined : modelFilesCondition(observed.modelFiles);
  const ready: ConditionValue =
    observed.stopped !== undefined
      ? { status: "False", reason: observed.stopped.reason, message: observed.stopped.message }
      : observed.missingConfigMap !== undefined
        ? {
            status: "False",
            reason: "ConfigMapNotFound",
            message: `ConfigMap ${observed.missingConfigMap} (spec.configMapRef) does not exist; pods cannot start without it`,
          }
        : available.status !== "True"
          ? notAvailable(available, modelFiles)
          : atZero !== undefined
            ? { status: "True", reason: "ScaledToZero", message: `${atZero.message}; served at ${endpoint}` }
            : modelsReady.status !== "True"
              ? { status: "False", reason: modelsReady.reason, message: modelsReady.message }
              : { status: "True", reason: "Ready", message: `${modelsReady.message}, served at ${endpoint}` };
  const values: Partial<Record<RepositoryConditionType, ConditionValue>> = {
    Ready: ready,
    Available: available,
    ModelsReady: modelsReady,
    ...(modelFiles !== undefined ? { ModelFilesReady: modelFiles } : {}),
    ...(observed.inferencePool !== undefined
      ? { InferencePoolReady: poolCondition(observed.inferencePool, "repository") }
      : {}),
    ...(observed.monitoring !== undefined ? { MonitoringReady: monitoringCondition(observed.monitoring) } : {}),
    ...(autoscaling.autoscalerReady !== undefined ? { AutoscalerReady: autoscaling.autoscalerReady } : {}),
    ...(autoscaling.scaledToZero !== undefined ? { ScaledToZero: autoscaling.scaledToZero } : {}),
  };
  const generation = repository.metadata.generation ?? 0;
  const { conditions, transitions } = conditionsOf(repository.status?.conditions ?? [], values, {
    generation,
    now,
    eventOnFirst: firstModelFilesEvent(modelFiles),
  });
  const deploymentStatus = observed.deployment?.status;
  return {
    status: {
      observedGeneration: generation,
      endpoint,
      httpEndpoint: endpoints.http,
      replicas: deploymentStatus?.replicas ?? 0,
      // The scale subresource's selector, for an HPA or KEDA targeting the repository.
      selector: selectorTextFor(repository),
      readyReplicas: deploymentStatus?.readyReplicas ?? 0,
      ...(autoscaling.summary !== undefined ? { autoscaler: autoscaling.summary } : {}),
      ...poolStatus(observed.inferencePool),
      ...(models !== undefined ? { modelsReady: `${models.filter(isReady).length}/${models.length}`, models } : {}),
      conditions,
    },
    transitions,
  };
}

const isReady = (model: RepositoryModelStatus): boolean => model.state === "READY";

function modelsCondition({ index }: RepositoryObserved, deployment: string): ConditionValue {
  switch (index.state) {
    case "NoReadyPod":
      return {
        status: "Unknown",
        reason: "NoReadyPod",
        message: `no data-plane pod is ready to ask (a pod is ready once one model is); see \`kubectl logs deployment/${deployment}\``,
      };
    case "Failed":
      return {
        status: "Unknown",
        reason: "IndexFailed",
        message: `pod ${index.pod} did not answer RepositoryIndex: ${index.message}`,
      };
    case "Listed": {
      const { models } = index;
      if (models.length === 0) {
        return {
          status: "False",
          reason: "NoModels",
          message:
            "the data plane found no model: the ConfigMap needs <model>.pbtxt keys, the claim or storageUri <model>/ folders",
        };
      }
      const failing = models.filter((model) => !isReady(model));
      if (failing.length === 0)
        return { status: "True", reason: "AllModelsReady", message: `${models.length} models ready` };
      const listed = failing
        .slice(0, REASONS_IN_MESSAGE)
        .map((model) => `${model.name}${model.version ? ` v${model.version}` : ""}: ${model.reason || model.state}`);
      const more = failing.length > REASONS_IN_MESSAGE ? `; and ${failing.length - REASONS_IN_MESSAGE} more` : "";
      return {
        status: "False",
        reason: "ModelsUnavailable",
        message: `${failing.length} of ${models.length} not ready: ${listed.join("; ")}${more}`,
      };
    }
  }
}

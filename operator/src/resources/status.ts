import type { V1Deployment } from "@kubernetes/client-node";
import type { Stopped } from "../kube/owned.js";
import type { Transition } from "../api/objects.js";
import type {
  Condition,
  ConditionType,
  ConditionValue,
  DynamoKserveModel,
  DynamoKserveModelStatus,
} from "../api/v1alpha1.js";
import type { ConfigCheck } from "./model-config.js";
import { objectNames, selectorTextFor, servedModelName } from "./names.js";
import { endpointsOf } from "./dataplane-pods.js";
import { routesCondition, routesStatus, type RoutesOutcome } from "./routes.js";
import { canaryCondition, canaryStatus, type CanaryOutcome } from "./canary.js";
import { tlsSecretName } from "./credentials.js";
import { modelFilesCondition, type ModelFilesOutcome } from "./storage.js";
import { autoscalingStatus, availabilityAtZero, type AutoscalingObserved } from "./autoscaling-status.js";

/** What the controller observed for one model, the input of the status builder. */
export interface Observed {
  readonly config: ConfigCheck;
  /** The owned Deployment, if it exists. */
  readonly deployment: V1Deployment | undefined;
  /** What became of spec.inferencePool (undefined when the model asks for none). */
  readonly inferencePool?: PoolOutcome;
  /** What became of spec.routes (undefined when the model asks for none). */
  readonly routes?: RoutesOutcome;
  /** What became of spec.canary (undefined when there is none, running or retiring). */
  readonly canary?: CanaryOutcome;
  /** What became of spec.monitoring (undefined when the model asks for none). */
  readonly monitoring?: MonitoringOutcome;
  /** The TLS and token Secrets (undefined when the model uses neither). */
  readonly credentials?: CredentialsOutcome;
  /**
   * Set when an object the model needs (its Service, ConfigMap or Deployment) belongs to
   * somebody else, or the API server refused one as written.
   */
  readonly stopped?: Stopped;
  /** The operator's look at modelFiles.storageUri (undefined without one). */
  readonly modelFiles?: ModelFilesOutcome;
  /** What became of spec.autoscaling's objects (undefined when the model asks for none). */
  readonly autoscaling?: AutoscalingObserved;
}

export type CredentialsOutcome =
  | { readonly ready: true; readonly message: string; readonly tlsSecret?: string; readonly notAfter?: string }
  | { readonly ready: false; readonly reason: string; readonly message: string };

export type MonitoringOutcome =
  | { readonly state: "Created"; readonly name: string }
  | { readonly state: "CRDNotInstalled" }
  | { readonly state: "NameTaken" | "Refused"; readonly message: string };

/** The endpoint picker the operator runs for a pool (spec.inferencePool.endpointPicker). */
export interface PickerOutcome {
  /** Its Deployment's and Service's name. */
  readonly name: string;
  readonly image: string;
  /** Whether a pod of it is available. */
  readonly available: boolean;
}

/** The InferenceObjective of a pool (spec.inferencePool.objective). */
export type ObjectiveOutcome =
  | { readonly state: "Written"; readonly name: string; readonly priority: number }
  | { readonly state: "CRDNotInstalled" };

/** The InferencePool step of a reconcile. */
export type PoolOutcome =
  | {
      readonly state: "Created";
      readonly name: string;
      readonly appProtocol: string;
      readonly service: string;
      readonly endpointPicker?: PickerOutcome;
      readonly objective?: ObjectiveOutcome;
    }
  | {
      readonly state: "CreatedWithoutAppProtocol";
      readonly name: string;
      /** What the Service fronting it says instead. */
      readonly appProtocol: string;
      readonly service: string;
      readonly endpointPicker?: PickerOutcome;
      readonly objective?: ObjectiveOutcome;
    }
  | { readonly state: "CRDNotInstalled" }
  /** The pool's name, or one of its picker's objects' (`message` says which), is somebody else's. */
  | { readonly state: "NameTaken" | "Refused"; readonly name: string; readonly message: string };

export type { ConditionValue };

/**
 * Conditions from their values, keeping each one's lastTransitionTime while its status
 * does not change (so an unchanged world yields identical conditions), and the changes
 * worth an Event: every change of a condition that existed, and the first value of the
 * types in `eventOnFirst`. Degraded is the one condition that is good when False.
 */
export function conditionsOf<T extends string>(
  previous: readonly Condition[],
  values: Partial<Record<T, ConditionValue>>,
  { generation, now, eventOnFirst }: { generation: number; now: string; eventOnFirst: readonly T[] },
): { conditions: Condition[]; transitions: Transition[] } {
  const transitions: Transition[] = [];
  const conditions = (Object.keys(values) as T[]).map((type): Condition => {
    const value = values[type]!;
    const before = previous.find((condition) => condition.type === type);
    const changed = before?.status !== value.status;
    if (changed && (before !== undefined || eventOnFirst.includes(type))) transitions.push(transitionOf(type, value));
    return {
      type,
      ...value,
      observedGeneration: generation,
      lastTransitionTime: changed || before === undefined ? now : before.lastTransitionTime,
    };
  });
  return { conditions, transitions };
}

/**
 * The status a model should have given what was observed, and the condition changes
 * worth an Event. Pure: `now` is passed in; a condition keeps its lastTransitionTime
 * while its status does not change, so an unchanged world yields an identical status.
 */
export function desiredStatus(
  model: DynamoKserveModel,
  observed: Observed,
  now: string,
): { status: DynamoKserveModelStatus; transitions: Transition[] } {
  const endpoints = endpointsOf(model, objectNames(model).service, tlsSecretName(model) !== undefined);
  const endpoint = endpoints.grpc;
  const configValid = configCondition(observed.config);
  const available = availabilityAtZero(observed.autoscaling, observed.deployment) ?? availableCondition(observed);
  const autoscaling =
    observed.autoscaling === undefined ? {} : autoscalingStatus(observed.autoscaling, observed.deployment);
  const degraded = degradedCondition(observed);
  const routes = observed.routes !== undefined ? routesCondition(observed.routes, model) : undefined;
  const credentials = observed.credentials === undefined ? undefined : credentialsCondition(observed.credentials);
  const modelFiles = observed.modelFiles === undefined ? undefined : modelFilesCondition(observed.modelFiles);
  const ready: ConditionValue =
    observed.stopped !== undefined
      ? { status: "False", reason: observed.stopped.reason, message: observed.stopped.message }
      : configValid.status !== "True"
        ? { status: "False", reason: "ConfigInvalid", message: `ConfigValid is False: ${configValid.message}` }
        : credentials !== undefined && credentials.status !== "True"
          ? {
              status: "False",
              reason: credentials.reason,
              message: `CredentialsReady is False: ${credentials.message}`,
            }
          : available.status !== "True"
            ? notAvailable(available, modelFiles)
            : {
                status: "True",
                reason: "Ready",
                message: `model '${servedModelName(model)}' is served at ${endpoint}`,
              };
  const values: Partial<Record<ConditionType, ConditionValue>> = {
    Ready: ready,
    ConfigValid: configValid,
    Available: available,
    Degraded: degraded,
    ...(observed.inferencePool !== undefined
      ? { InferencePoolReady: poolCondition(observed.inferencePool, "model") }
      : {}),
    ...(routes !== undefined ? { RoutesReady: routes } : {}),
    ...(observed.canary !== undefined ? { CanaryReady: canaryCondition(model, observed.canary, routes) } : {}),
    ...(observed.monitoring !== undefined ? { MonitoringReady: monitoringCondition(observed.monitoring) } : {}),
    ...(credentials !== undefined ? { CredentialsReady: credentials } : {}),
    ...(modelFiles !== undefined ? { ModelFilesReady: modelFiles } : {}),
    ...(autoscaling.autoscalerReady !== undefined ? { AutoscalerReady: autoscaling.autoscalerReady } : {}),
    ...(autoscaling.scaledToZero !== undefined ? { ScaledToZero: autoscaling.scaledToZero } : {}),
  };
  const generation = model.metadata.generation ?? 0;
  // Events tell of changes; of a model's first conditions, whether its config is valid and
  // what the operator found at its files' location (when it could look).
  const { conditions, transitions } = conditionsOf(model.status?.conditions ?? [], values, {
    generation,
    now,
    eventOnFirst: ["ConfigValid", ...firstModelFilesEvent(modelFiles)],
  });
  const deploymentStatus = observed.deployment?.status;
  return {
    status: {
      observedGeneration: generation,
      modelName: servedModelName(model),
      ...(observed.config.valid
        ? { backend: observed.config.backend }
        : model.status?.backend !== undefined
          ? { backend: model.status.backend }
          : {}),
      endpoint,
      httpEndpoint: endpoints.http,
      replicas: deploymentStatus?.replicas ?? 0,
      readyReplicas: deploymentStatus?.readyReplicas ?? 0,
      // The scale subresource's selector, for an HPA or KEDA targeting the model.
      selector: selectorTextFor(model),
      ...(autoscaling.summary !== undefined ? { autoscaler: autoscaling.summary } : {}),
      ...poolStatus(observed.inferencePool),
      ...routesStatus(observed.routes),
      ...canaryStatus(model, observed.canary),
      ...(observed.credentials?.ready === true && observed.credentials.tlsSecret !== undefined
        ? {
            tls: {
              secretName: observed.credentials.tlsSecret,
              ...(observed.credentials.notAfter !== undefined ? { notAfter: observed.credentials.notAfter } : {}),
            },
          }
        : {}),
      conditions,
    },
    transitions,
  };
}

/**
 * Ready while no pod is available: why not. When the operator found the models' location
 * wanting (access denied, no bucket, ...), that is the likelier cause than the pods' state.
 */
export function notAvailable(available: ConditionValue, modelFiles: ConditionValue | undefined): ConditionValue {
  return modelFiles?.status === "False"
    ? { status: "False", reason: modelFiles.reason, message: `ModelFilesReady is False: ${modelFiles.message}` }
    : { status: "False", reason: available.reason, message: available.message };
}

/** ModelFilesReady's first value is worth an Event, unless it is only "the pods will tell". */
export const firstModelFilesEvent = (modelFiles: ConditionValue | undefined): "ModelFilesReady"[] =>
  modelFiles !== undefined && modelFiles.status !== "Unknown" ? ["ModelFilesReady"] : [];

/** InferencePoolReady, for a model or a repository (`noun`). */
export function poolCondition(outcome: PoolOutcome, noun: "model" | "repository"): ConditionValue {
  switch (outcome.state) {
    case "Created":
      return withPicker(outcome.endpointPicker, outcome.objective, {
        status: "True",
        reason: "Created",
        message: `InferencePool ${outcome.name} selects this ${noun}'s pods with appProtocol ${outcome.appProtocol}; Service ${outcome.service} fronts it`,
      });
    case "CreatedWithoutAppProtocol":
      return withPicker(outcome.endpointPicker, outcome.objective, {
        status: "True",
        reason: "AppProtocolUnsupported",
        message: `InferencePool ${outcome.name} was created without appProtocol: the installed InferencePool CRD has no such field (Gateway API Inference Extension before v1.4); Service ${outcome.service} fronts it with appProtocol ${outcome.appProtocol}`,
      });
    case "CRDNotInstalled":
      return {
        status: "False",
        reason: "CRDNotInstalled",
        message:
          "the InferencePool CRD (inferencepools.inference.networking.k8s.io, v1) is not installed; install the Gateway API Inference Extension and the pool is created without a restart",
      };
    case "NameTaken":
    case "Refused":
      return { status: "False", reason: outcome.state, message: outcome.message };
  }
}

/**
 * A pool whose picker the operator runs is ready once a pod of the picker is available: until
 * then a gateway asking it (FailClose, the default) refuses the pool's requests.
 */
function withPicker(
  picker: PickerOutcome | undefined,
  objective: ObjectiveOutcome | undefined,
  pool: ConditionValue,
): ConditionValue {
  const created = objective === undefined ? pool : { ...pool, message: `${pool.message}; ${objectiveText(objective)}` };
  if (picker === undefined) return created;
  if (!picker.available) {
    return {
      status: "False",
      reason: "EndpointPickerUnavailable",
      message: `${created.message}; its endpoint picker (Deployment ${picker.name}, image ${picker.image}) has no available pod yet`,
    };
  }
  return {
    ...created,
    message: `${created.message}; endpoint picker ${picker.name} (image ${picker.image}) picks its pods`,
  };
}

function objectiveText(objective: ObjectiveOutcome): string {
  return objective.state === "Written"
    ? `InferenceObjective ${objective.name} gives requests that name it priority ${objective.priority}`
    : "no InferenceObjective: its CRD (inferenceobjectives.inference.networking.x-k8s.io, v1alpha2) is not installed; it is written without a restart once it is";
}

function credentialsCondition(outcome: CredentialsOutcome): ConditionValue {
  return outcome.ready
    ? { status: "True", reason: "SecretsReady", message: outcome.message }
    : { status: "False", reason: outcome.reason, message: outcome.message };
}

export function monitoringCondition(outcome: MonitoringOutcome): ConditionValue {
  switch (outcome.state) {
    case "Created":
      return {
        status: "True",
        reason: "Created",
        message: `ServiceMonitor ${outcome.name} has Prometheus scrape the model's metrics port at /metrics`,
      };
    case "CRDNotInstalled":
      return {
        status: "False",
        reason: "CRDNotInstalled",
        message:
          "the ServiceMonitor CRD (servicemonitors.monitoring.coreos.com, v1) is not installed; install the Prometheus Operator and the ServiceMonitor is created without a restart",
      };
    case "NameTaken":
    case "Refused":
      return { status: "False", reason: outcome.state, message: outcome.message };
  }
}

/** status.inferencePool: the pool and its Service as last made (the same for both kinds). */
export function poolStatus(outcome: PoolOutcome | undefined): Pick<DynamoKserveModelStatus, "inferencePool"> {
  if (outcome?.state !== "Created" && outcome?.state !== "CreatedWithoutAppProtocol") return {};
  return {
    inferencePool: {
      name: outcome.name,
      appProtocol: outcome.state === "Created" ? outcome.appProtocol : "",
      service: outcome.service,
      ...(outcome.endpointPicker !== undefined ? { endpointPicker: outcome.endpointPicker.name } : {}),
      ...(outcome.objective?.state === "Written" ? { objective: outcome.objective.name } : {}),
    },
  };
}

function configCondition(config: ConfigCheck): ConditionValue {
  return config.valid
    ? { status: "True", reason: "Valid", message: `the config parses and backend '${config.backend}' can run it` }
    : { status: "False", reason: config.reason, message: config.message };
}

function availableCondition({ deployment, config }: Observed): ConditionValue {
  if (deployment === undefined && !config.valid) {
    return {
      status: "False",
      reason: "NoValidConfig",
      message: "no data plane runs: the model has never had a valid config",
    };
  }
  return availabilityOf(deployment);
}

/** Available: whether the data-plane Deployment has a pod ready to serve. */
export function availabilityOf(deployment: V1Deployment | undefined): ConditionValue {
  if (deployment === undefined) {
    return { status: "False", reason: "DeploymentPending", message: "the data-plane Deployment is being created" };
  }
  const wanted = deployment.spec?.replicas ?? 1;
  const ready = deployment.status?.readyReplicas ?? 0;
  const available = deployment.status?.availableReplicas ?? 0;
  if (wanted === 0)
    return { status: "False", reason: "ScaledToZero", message: "replicas is 0; no pod serves the model" };
  if (available > 0) {
    return { status: "True", reason: "MinimumReplicasAvailable", message: `${ready}/${wanted} data-plane pods ready` };
  }
  return {
    status: "False",
    reason: "NoReplicasAvailable",
    message: `0/${wanted} data-plane pods ready; see \`kubectl describe deployment ${deployment.metadata?.name}\``,
  };
}

function degradedCondition({ deployment, config }: Observed): ConditionValue {
  if (!config.valid && deployment !== undefined) {
    return {
      status: "True",
      reason: "ServingLastValidConfig",
      message: `the new config is rejected (${config.reason}); pods keep serving the last valid one`,
    };
  }
  const failing = deployment?.status?.conditions?.find(
    (condition) =>
      (condition.type === "Progressing" && condition.status === "False") ||
      (condition.type === "ReplicaFailure" && condition.status === "True"),
  );
  if (failing !== undefined) {
    return {
      status: "True",
      reason: failing.reason ?? "DeploymentFailing",
      message: failing.message ?? `Deployment condition ${failing.type} is ${failing.status}`,
    };
  }
  return { status: "False", reason: "AsExpected", message: "nothing needs attention" };
}

function transitionOf(type: string, value: ConditionValue): Transition {
  const good = type === "Degraded" ? value.status === "False" : value.status === "True";
  return {
    type: good ? "Normal" : "Warning",
    reason: value.reason,
    message: `${type}=${value.status}: ${value.message}`,
  };
}

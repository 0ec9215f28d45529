import type { V1ConfigMap, V1Deployment } from "@kubernetes/client-node";
import type { Owner } from "../api/objects.js";
import type { DynamoKserveModelSpec } from "../api/v1alpha1.js";
import type { OwnedKind, PlanGroup, PlannedOutcome } from "../kube/owned.js";
import {
  activatorDeployment,
  activatorName,
  activatorRole,
  activatorRoleBinding,
  ACTIVATOR_SCALER_PORT,
  activatorService,
  activatorServiceAccount,
  type ActivatorInputs,
} from "./activator.js";
import { ROLE_BINDING_KIND, ROLE_KIND, SERVICE_ACCOUNT_KIND } from "./pod-identity.js";
import {
  AUTOSCALER_KIND,
  DEPLOYMENT_KIND,
  DISRUPTION_BUDGET_KIND,
  SERVICE_KIND,
  dataplaneAutoscaler,
  dataplaneDisruptionBudget,
  dataplaneService,
  scalesToZero,
  withSharedServiceLabel,
  type BuildSettings,
  type DataplaneSpec,
} from "./dataplane-pods.js";
import { dataplaneScaledObject, SCALED_OBJECT_KIND } from "./scaled-object.js";
import type { AutoscalingPlanned } from "./autoscaling-status.js";
import { CONFIG_MAP_KIND } from "./model.js";
import { desiredServiceMonitor, SERVICE_MONITOR_KIND } from "./service-monitor.js";
import type { MonitoringOutcome } from "./status.js";

/**
 * The data-plane objects of either kind (a DynamoKserveModel's, a DynamoKserveRepository's),
 * as one plan: the sequence both owners share, built once. What differs between them (the
 * ConfigMap, the pods' volumes and arguments) comes in built. Pure.
 */

/**
 * The kinds of every data plane's objects, which both owners declare (their `owns`): a
 * kind added to the plan below is added here, and the chart's RBAC test then asks for its rule.
 */
export const DATAPLANE_OWNS: readonly OwnedKind[] = [
  SERVICE_KIND,
  DEPLOYMENT_KIND,
  DISRUPTION_BUDGET_KIND,
  AUTOSCALER_KIND,
  SERVICE_MONITOR_KIND,
  SCALED_OBJECT_KIND,
  // The activator of a data plane that scales to zero (its Deployment and Service are of the kinds above).
  SERVICE_ACCOUNT_KIND,
  ROLE_KIND,
  ROLE_BINDING_KIND,
];

/** A data plane's owner as the plan needs it. */
export interface DataplaneOwner {
  readonly owner: Owner & { readonly spec: DataplaneSpec & Pick<DynamoKserveModelSpec, "monitoring"> };
  /** The name of its Service, Deployment, PodDisruptionBudget, HorizontalPodAutoscaler and ServiceMonitor. */
  readonly name: string;
  /** Whether its ports speak TLS. */
  readonly tls: boolean;
  /** What spec.autoscaling with class KEDA needs besides the spec. */
  readonly autoscaling: AutoscalingInputs;
}

/** What the KEDA objects and the activator read besides the owner's spec. */
export interface AutoscalingInputs {
  /** Whether KEDA's ScaledObject CRD is installed: without it nothing of class KEDA is written. */
  readonly kedaInstalled: boolean;
  /** spec.autoscaling.keda.prometheusAddress, else the operator's default; undefined when neither is set. */
  readonly prometheusAddress: string | undefined;
  /** The served model's name (its series' `model` label); undefined for a repository. */
  readonly model?: string;
  /** The ServiceMonitor's scrape interval, in seconds. */
  readonly scrapeIntervalSeconds: number;
  /** The activator's tokens and certificate (the owner's Secrets). */
  readonly activator: ActivatorInputs;
  /**
   * The activator Service's cluster IP, once it has one: KEDA reaches the scaler by it, so a
   * KEDA that runs where the cluster's DNS does not answer reaches it too. Until then the
   * ScaledObject has no push trigger (the Service's creation runs this plan again).
   */
  readonly activatorClusterIp?: string;
  /**
   * Whether the Service may select the activator too: it already does, or every data-plane
   * pod carries the Service label (the Deployment rolled), so switching never empties it.
   */
  readonly serviceReachesActivator: boolean;
  /**
   * The Service selects the label the activator shares and no data-plane pod is ready. If the
   * plan no longer scales to zero (turned off, or KEDA's objects cannot be written), the
   * activator, the Service's selector and the pods' label stay until a pod is ready, so the
   * Service never selects nothing while the model wakes.
   */
  readonly leavingZero?: boolean;
  /** The live Deployment wants no pod (an HPA is disabled at zero replicas: nothing else lifts it). */
  readonly deploymentAtZero?: boolean;
  readonly settings: BuildSettings;
}

export type { AutoscalingPlanned };

/**
 * What runs: the ConfigMaps the pods mount (applied before the Deployment, so a new pod
 * never starts without them) and the Deployment; or `keep`, which leaves the running
 * ConfigMaps, Deployment and its autoscaling objects exactly as they are (a refused config:
 * pods keep serving the last valid one).
 */
export type DataplaneWorkload =
  | { readonly configMaps: readonly V1ConfigMap[]; readonly deployment: V1Deployment }
  | { readonly keep: { readonly configMaps: readonly string[] } };

export interface DataplanePlan {
  /** Service -> ConfigMaps -> Deployment -> PodDisruptionBudget -> HorizontalPodAutoscaler: a NameTaken stops the rest. */
  readonly dataplane: PlanGroup;
  /** The ServiceMonitor (spec.monitoring), a group of its own: its NameTaken is MonitoringReady's, not Ready's. */
  readonly monitoring: PlanGroup;
  /** KEDA's ScaledObject (class KEDA). */
  readonly autoscaling: PlanGroup;
  /** The activator (minReplicas 0): its ServiceAccount, Role and RoleBinding, Service, Deployment. */
  readonly activation: PlanGroup;
  readonly autoscalingPlanned: AutoscalingPlanned;
}

/** The plan of a data plane: what a model and a repository both want, in order. */
export function dataplanePlan(dataplane: DataplaneOwner, workload: DataplaneWorkload): DataplanePlan {
  const { owner, name, tls } = dataplane;
  const autoscalingPlanned = autoscalingPlannedOf(dataplane);
  const toZero = autoscalingPlanned === "KEDA" && scalesToZero(owner.spec);
  const leaving = !toZero && dataplane.autoscaling.leavingZero === true;
  const service = dataplaneService(
    owner,
    owner.spec,
    name,
    tls,
    (toZero && dataplane.autoscaling.serviceReachesActivator) || leaving,
  );
  const budget = dataplaneDisruptionBudget(owner, owner.spec, name);
  const autoscaler = dataplaneAutoscaler(owner, owner.spec, name);
  const keep = "keep" in workload;
  const pods: PlanGroup = keep
    ? [
        ...workload.keep.configMaps.map((configMap) => ({ keep: CONFIG_MAP_KIND, name: configMap })),
        { keep: DEPLOYMENT_KIND, name },
        { keep: DISRUPTION_BUDGET_KIND, name },
        { keep: AUTOSCALER_KIND, name },
      ]
    : [
        ...workload.configMaps.map((configMap) => ({ apply: configMap })),
        { apply: leaving ? leavingDeployment(dataplane, workload.deployment) : workload.deployment },
        ...(budget !== undefined ? [{ apply: budget }] : []),
        ...(autoscaler !== undefined ? [{ apply: autoscaler }] : []),
      ];
  return {
    dataplane: [{ apply: service }, ...pods],
    monitoring: owner.spec.monitoring !== undefined ? [{ apply: desiredServiceMonitor(owner, name) }] : [],
    // A refused config keeps what scales the running pods, as it keeps the pods.
    autoscaling: keep ? [{ keep: SCALED_OBJECT_KIND, name }] : kedaGroup(dataplane, autoscalingPlanned),
    activation: keep ? keepActivator(name) : toZero || leaving ? activatorGroup(dataplane) : [],
    autoscalingPlanned,
  };
}

/**
 * The Deployment of a data plane leaving scale to zero before a pod is ready: its pods keep
 * the label the Service still selects, and one at zero is lifted to one pod (unless
 * spec.replicas says otherwise) for its autoscaler to take from there. The field is applied
 * only until a pod is ready; dropped then, it defaults to the same one.
 */
function leavingDeployment({ owner, autoscaling }: DataplaneOwner, deployment: V1Deployment): V1Deployment {
  const labelled = withSharedServiceLabel(owner, deployment);
  if (autoscaling.deploymentAtZero !== true || owner.spec.replicas !== undefined) return labelled;
  return { ...labelled, spec: { ...labelled.spec!, replicas: 1 } };
}

function autoscalingPlannedOf({ owner, autoscaling }: DataplaneOwner): AutoscalingPlanned {
  const spec = owner.spec.autoscaling;
  if (spec === undefined) return "None";
  if (spec.class !== "KEDA") return "HPA";
  if (!autoscaling.kedaInstalled) return "KEDANotInstalled";
  return autoscaling.prometheusAddress === undefined ? "PrometheusAddressMissing" : "KEDA";
}

/** The ScaledObject, when KEDA is there and its triggers know their Prometheus. */
function kedaGroup({ owner, name, autoscaling }: DataplaneOwner, planned: AutoscalingPlanned): PlanGroup {
  if (planned !== "KEDA") return [];
  const scaledObject = dataplaneScaledObject(owner, owner.spec, name, {
    prometheusAddress: autoscaling.prometheusAddress!,
    service: name,
    ...(autoscaling.model !== undefined ? { model: autoscaling.model } : {}),
    scrapeIntervalSeconds: autoscaling.scrapeIntervalSeconds,
    ...(scalesToZero(owner.spec) && autoscaling.activatorClusterIp !== undefined
      ? { activatorScaler: `${autoscaling.activatorClusterIp}:${ACTIVATOR_SCALER_PORT}` }
      : {}),
  });
  return scaledObject !== undefined ? [{ apply: scaledObject }] : [];
}

/** The activator's objects, its identity and rights before the pod that uses them. */
function activatorGroup({ owner, name, autoscaling }: DataplaneOwner): PlanGroup {
  return [
    { apply: activatorServiceAccount(owner, name) },
    { apply: activatorRole(owner, name) },
    { apply: activatorRoleBinding(owner, name) },
    { apply: activatorService(owner, name) },
    { apply: activatorDeployment(owner, owner.spec, name, autoscaling.activator, autoscaling.settings) },
  ];
}

function keepActivator(name: string): PlanGroup {
  const activator = activatorName(name);
  return [SERVICE_ACCOUNT_KIND, ROLE_KIND, ROLE_BINDING_KIND, SERVICE_KIND, DEPLOYMENT_KIND].map((kind) => ({
    keep: kind,
    name: activator,
  }));
}

/** MonitoringReady's input from what became of the ServiceMonitor; undefined when none was planned. */
export function monitoringOutcome(outcome: PlannedOutcome | undefined): MonitoringOutcome | undefined {
  switch (outcome?.state) {
    case "Applied":
      return { state: "Created", name: outcome.object.metadata?.name ?? "" };
    case "CRDNotInstalled":
      return { state: "CRDNotInstalled" };
    case "NameTaken":
    case "Refused":
      return { state: outcome.state, message: outcome.message };
    default:
      return undefined;
  }
}

import type { KubernetesObject, V1Deployment, V1Service } from "@kubernetes/client-node";
import { SPEC_DEFAULTS, type DynamoKserveModelSpec } from "../api/v1alpha1.js";
import type { Owner } from "../api/objects.js";
import type { OwnedCaches } from "../kube/owned-caches.js";
import { objectOf, type PlanOutcomes } from "../kube/owned.js";
import { activatorName, type ActivatorInputs } from "../resources/activator.js";
import type { AutoscalingObserved } from "../resources/autoscaling-status.js";
import {
  DEPLOYMENT_KIND,
  SERVICE_KIND,
  scalesToZero,
  type BuildSettings,
  type DataplaneSpec,
} from "../resources/dataplane-pods.js";
import type { AutoscalingInputs, DataplanePlan } from "../resources/dataplane.js";
import { serviceLabel } from "../resources/names.js";
import { durationSeconds, SCALED_OBJECT_KIND, type ScaledObject } from "../resources/scaled-object.js";

/** What both kinds' controllers do alike for spec.autoscaling: its inputs from the caches, its outcome from the plan's. */

type AutoscaledOwner = Owner & { readonly spec: DataplaneSpec & Pick<DynamoKserveModelSpec, "monitoring"> };

/** The plan's inputs for spec.autoscaling, read from what is installed and what runs. */
export function autoscalingInputs(
  owner: AutoscaledOwner,
  name: string,
  context: {
    readonly owned: Pick<OwnedCaches, "installed" | "get">;
    readonly settings: BuildSettings;
    readonly model?: string;
    readonly activator: ActivatorInputs;
  },
): AutoscalingInputs {
  const { owned, settings } = context;
  const { namespace, name: ownerName } = owner.metadata;
  const interval = owner.spec.monitoring?.interval ?? SPEC_DEFAULTS.monitoring.interval;
  // The live Service and Deployment, read once: what the Service selects and how far the pods are.
  const service = owned.get<V1Service & KubernetesObject>(SERVICE_KIND, namespace, name);
  const deployment = owned.get<V1Deployment & KubernetesObject>(DEPLOYMENT_KIND, namespace, name);
  const selectsShared = service?.spec?.selector?.[serviceLabel(owner)] === ownerName;
  return {
    kedaInstalled: owned.installed(SCALED_OBJECT_KIND),
    prometheusAddress: owner.spec.autoscaling?.keda?.prometheusAddress ?? settings.kedaPrometheusAddress,
    ...(context.model !== undefined ? { model: context.model } : {}),
    scrapeIntervalSeconds: durationSeconds(interval),
    activator: context.activator,
    ...activatorClusterIp(owner, name, owned),
    // The switch sticks once made; before, it waits until every pod carries the label.
    serviceReachesActivator: scalesToZero(owner.spec) && (selectsShared || rolledWithSharedLabel(owner, deployment)),
    // The activator alone serves the Service now: leaving scale to zero must keep it until a pod is ready.
    leavingZero: selectsShared && (deployment?.status?.readyReplicas ?? 0) === 0,
    deploymentAtZero: deployment?.spec?.replicas === 0,
    settings,
  };
}

/**
 * Whether every data-plane pod carries the label the activator shares: the Deployment's
 * template has it and its rollout is complete. Until then the Service keeps the pod
 * selector, so the switch never leaves it without the pods that serve now. (Once the Service
 * selects the shared label, leaving scale to zero — turned off, or KEDA's objects no longer
 * writable — keeps the activator and that selector until a pod is ready: moving back and
 * pruning the activator at once would leave the Service selecting nothing, or for good at
 * zero with nothing to wake the model.)
 */
function rolledWithSharedLabel(owner: Owner, deployment: V1Deployment | undefined): boolean {
  if (deployment?.spec?.template.metadata?.labels?.[serviceLabel(owner)] !== owner.metadata.name) return false;
  const status = deployment.status ?? {};
  return (
    (status.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? 0) &&
    (status.updatedReplicas ?? 0) === (status.replicas ?? 0)
  );
}

/** What became of the autoscaling objects; undefined without spec.autoscaling. */
export function autoscalingObserved(
  owner: AutoscaledOwner,
  name: string,
  plan: DataplanePlan,
  outcomes: PlanOutcomes,
): AutoscalingObserved | undefined {
  if (plan.autoscalingPlanned === "None") return undefined;
  const stopped = outcomes.stopped(plan.autoscaling) ?? outcomes.stopped(plan.activation);
  const scaledObject = objectOf<ScaledObject>(outcomes.of(SCALED_OBJECT_KIND, name));
  const activator = objectOf<V1Deployment & KubernetesObject>(outcomes.of(DEPLOYMENT_KIND, activatorName(name)));
  return {
    planned: plan.autoscalingPlanned,
    toZero: scalesToZero(owner.spec),
    name,
    ...(scaledObject !== undefined ? { scaledObject } : {}),
    ...(activator !== undefined ? { activator } : {}),
    ...(stopped !== undefined ? { stopped } : {}),
  };
}

/** The activator Service's cluster IP, once the API server has given it one. */
function activatorClusterIp(
  owner: Owner,
  name: string,
  owned: Pick<OwnedCaches, "get">,
): { activatorClusterIp?: string } {
  const service = owned.get<V1Service & KubernetesObject>(SERVICE_KIND, owner.metadata.namespace, activatorName(name));
  const ip = service?.spec?.clusterIP;
  return ip !== undefined && ip !== "" && ip !== "None" ? { activatorClusterIp: ip } : {};
}

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
  const interval = owner.spec.monitoring?.interval ?? SPEC_DEFAULTS.monitoring.interval;
  return {
    kedaInstalled: owned.installed(SCALED_OBJECT_KIND),
    prometheusAddress: owner.spec.autoscaling?.keda?.prometheusAddress ?? settings.kedaPrometheusAddress,
    ...(context.model !== undefined ? { model: context.model } : {}),
    scrapeIntervalSeconds: durationSeconds(interval),
    activator: context.activator,
    ...activatorClusterIp(owner, name, owned),
    serviceReachesActivator: scalesToZero(owner.spec) && serviceMayReachActivator(owner, name, owned),
    leavingZero: leavingZero(owner, name, owned),
    deploymentAtZero:
      owned.get<V1Deployment & KubernetesObject>(DEPLOYMENT_KIND, owner.metadata.namespace, name)?.spec?.replicas === 0,
    settings,
  };
}

/**
 * Whether the Service may switch to the label the activator shares: once it has (the
 * switch sticks), or once every data-plane pod carries that label — the Deployment's
 * template has it and its rollout is complete — so the switch never leaves the Service
 * without the pods that serve now.
 */
function serviceMayReachActivator(owner: Owner, name: string, owned: Pick<OwnedCaches, "get">): boolean {
  const { namespace } = owner.metadata;
  const label = serviceLabel(owner);
  const service = owned.get<V1Service & KubernetesObject>(SERVICE_KIND, namespace, name);
  if (service?.spec?.selector?.[label] === owner.metadata.name) return true;
  const deployment = owned.get<V1Deployment & KubernetesObject>(DEPLOYMENT_KIND, namespace, name);
  if (deployment?.spec?.template.metadata?.labels?.[label] !== owner.metadata.name) return false;
  const status = deployment.status ?? {};
  return (
    (status.observedGeneration ?? 0) >= (deployment.metadata?.generation ?? 0) &&
    (status.updatedReplicas ?? 0) === (status.replicas ?? 0)
  );
}

/**
 * Whether the activator alone can serve the Service now: it still selects the label the
 * activator shares and no data-plane pod is ready. If scale to zero is left (turned off, or
 * KEDA's objects can no longer be written), moving the Service back to the pod selector and
 * pruning the activator now would leave it selecting nothing until the first pod is ready
 * (or for good, at zero with nothing to wake the model).
 */
function leavingZero(owner: Owner, name: string, owned: Pick<OwnedCaches, "get">): boolean {
  const { namespace } = owner.metadata;
  const service = owned.get<V1Service & KubernetesObject>(SERVICE_KIND, namespace, name);
  if (service?.spec?.selector?.[serviceLabel(owner)] !== owner.metadata.name) return false;
  const deployment = owned.get<V1Deployment & KubernetesObject>(DEPLOYMENT_KIND, namespace, name);
  return (deployment?.status?.readyReplicas ?? 0) === 0;
}

/** What became of the autoscaling objects; undefined without spec.autoscaling. */
export function autoscalingObserved(
  owner: AutoscaledOwner,
  name: string,
  plan: DataplanePlan,
  outcomes: PlanOutcomes,
): AutoscalingObserved | undefined {
  if (plan.autoscalingPlanned === "None") return undefined;
  const nameTaken = outcomes.nameTaken(plan.autoscaling) ?? outcomes.nameTaken(plan.activation);
  const scaledObject = objectOf<ScaledObject>(outcomes.of(SCALED_OBJECT_KIND, name));
  const activator = objectOf<V1Deployment & KubernetesObject>(outcomes.of(DEPLOYMENT_KIND, activatorName(name)));
  return {
    planned: plan.autoscalingPlanned,
    toZero: scalesToZero(owner.spec),
    name,
    ...(scaledObject !== undefined ? { scaledObject } : {}),
    ...(activator !== undefined ? { activator } : {}),
    ...(nameTaken !== undefined ? { nameTaken } : {}),
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

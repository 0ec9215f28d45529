import type { V1ConfigMap, V1Deployment } from "@kubernetes/client-node";
import type { Owner } from "../api/objects.js";
import type { DynamoKserveModelSpec } from "../api/v1alpha1.js";
import type { OwnedKind, PlanGroup, PlannedOutcome } from "../kube/owned.js";
import {
  AUTOSCALER_KIND,
  DEPLOYMENT_KIND,
  DISRUPTION_BUDGET_KIND,
  SERVICE_KIND,
  dataplaneAutoscaler,
  dataplaneDisruptionBudget,
  dataplaneService,
  type DataplaneSpec,
} from "./dataplane-pods.js";
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
];

/** A data plane's owner as the plan needs it. */
export interface DataplaneOwner {
  readonly owner: Owner & { readonly spec: DataplaneSpec & Pick<DynamoKserveModelSpec, "monitoring"> };
  /** The name of its Service, Deployment, PodDisruptionBudget, HorizontalPodAutoscaler and ServiceMonitor. */
  readonly name: string;
  /** Whether its ports speak TLS. */
  readonly tls: boolean;
}

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
}

/** The plan of a data plane: what a model and a repository both want, in order. */
export function dataplanePlan({ owner, name, tls }: DataplaneOwner, workload: DataplaneWorkload): DataplanePlan {
  const service = dataplaneService(owner, owner.spec, name, tls);
  const budget = dataplaneDisruptionBudget(owner, owner.spec, name);
  const autoscaler = dataplaneAutoscaler(owner, owner.spec, name);
  const pods: PlanGroup =
    "keep" in workload
      ? [
          ...workload.keep.configMaps.map((configMap) => ({ keep: CONFIG_MAP_KIND, name: configMap })),
          { keep: DEPLOYMENT_KIND, name },
          { keep: DISRUPTION_BUDGET_KIND, name },
          { keep: AUTOSCALER_KIND, name },
        ]
      : [
          ...workload.configMaps.map((configMap) => ({ apply: configMap })),
          { apply: workload.deployment },
          ...(budget !== undefined ? [{ apply: budget }] : []),
          ...(autoscaler !== undefined ? [{ apply: autoscaler }] : []),
        ];
  return {
    dataplane: [{ apply: service }, ...pods],
    monitoring: owner.spec.monitoring !== undefined ? [{ apply: desiredServiceMonitor(owner, name) }] : [],
  };
}

/** MonitoringReady's input from what became of the ServiceMonitor; undefined when none was planned. */
export function monitoringOutcome(outcome: PlannedOutcome | undefined): MonitoringOutcome | undefined {
  switch (outcome?.state) {
    case "Applied":
      return { state: "Created", name: outcome.object.metadata?.name ?? "" };
    case "CRDNotInstalled":
      return { state: "CRDNotInstalled" };
    case "NameTaken":
      return { state: "NameTaken", message: outcome.message };
    default:
      return undefined;
  }
}

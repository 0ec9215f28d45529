import type { V1Deployment } from "@kubernetes/client-node";
import type { ConditionValue, DynamoKserveModel, DynamoKserveModelStatus } from "../api/v1alpha1.js";
import type { PlanGroup, Stopped } from "../kube/owned.js";
import {
  DEPLOYMENT_KIND,
  DISRUPTION_BUDGET_KIND,
  SERVICE_KIND,
  dataplaneDisruptionBudget,
  dataplaneService,
  type BuildSettings,
} from "./dataplane-pods.js";
import type { ConfigCheck } from "./model-config.js";
import { CONFIG_MAP_KIND, desiredConfigMap, desiredDeployment } from "./model.js";
import { objectNames } from "./names.js";
import { routesSendCanaryNothing, type Route } from "./routes.js";

/**
 * A model's canary (spec.canary): a second variant with its own pods, Service and ConfigMap
 * (`<name>-canary…`), serving the same model name, to which the routes send a share of the
 * requests by weight. Its life: Running (the routes give it its share once a pod of it is
 * available), then, when spec.canary goes (a promotion or a rollback), Retiring: the routes
 * send it nothing while its objects stay, until the gateway has taken the new weights and
 * the drain period is over; then its objects are pruned. Pure builders and status.
 */

/** After the routes stop sending to a retired canary, how long its pods keep answering what they took. */
export const CANARY_DRAIN_MS = 10_000;

/**
 * A retiring canary goes after this long even if the gateway never confirms routes that send
 * it nothing (a Gateway that does not exist, a controller that writes no status).
 */
export const CANARY_RETIRE_LIMIT_MS = 120_000;

/** What the controller observed of the canary, which decides its phase. */
export type CanaryState =
  | { readonly phase: "None" }
  | {
      readonly phase: "Running";
      /** The canary's config (canary.modelConfig, else the model's), checked as the stable's is. */
      readonly config: ConfigCheck;
      /** The canary's live Deployment, if it exists. */
      readonly deployment: V1Deployment | undefined;
    }
  | {
      readonly phase: "Retiring";
      /** When the routes stopped sending to it (status.canary.retiringSince). */
      readonly since: string;
      readonly deployment: V1Deployment;
    };

/** What the controller read for the canary's phase. */
export interface CanaryObserved {
  /** The live Deployment of the canary's name, whoever's it is. */
  readonly deployment: V1Deployment | undefined;
  /** The canary's config, checked (only read while spec.canary is set). */
  readonly config: () => ConfigCheck;
  /** The model's live routes (GRPCRoute, HTTPRoute), each undefined when there is none. */
  readonly routes: readonly (Route | undefined)[];
  /** Now, in ms since the epoch, and as Kubernetes writes it. */
  readonly now: number;
  readonly nowText: string;
}

/**
 * The canary's phase: Running while spec.canary is set; once it is removed, Retiring while the
 * canary's Deployment (this model's, not already going) is there, until the routes that send
 * it nothing are accepted and the drain is over (or the limit passes); then None, and the prune.
 */
export function canaryStateOf(model: DynamoKserveModel, observed: CanaryObserved): CanaryState {
  const live = observed.deployment;
  const ours =
    live?.metadata?.ownerReferences?.some((ref) => ref.uid === model.metadata.uid) === true &&
    live.metadata.deletionTimestamp === undefined
      ? live
      : undefined;
  if (model.spec.canary !== undefined) return { phase: "Running", config: observed.config(), deployment: ours };
  if (ours === undefined) return { phase: "None" };
  const since = model.status?.canary?.retiringSince ?? observed.nowText;
  const elapsed = observed.now - Date.parse(since);
  const retired =
    elapsed >= CANARY_RETIRE_LIMIT_MS ||
    (elapsed >= CANARY_DRAIN_MS && routesSendCanaryNothing(model, observed.routes));
  return retired ? { phase: "None" } : { phase: "Retiring", since, deployment: ours };
}

/**
 * When a retiring canary is looked at again: when its drain is over, then at the limit (a
 * route's status change, which also triggers a reconcile, usually comes first).
 */
export function canaryRecheckMs(state: CanaryState, now: number): number | undefined {
  if (state.phase !== "Retiring") return undefined;
  const since = Date.parse(state.since);
  const due = now < since + CANARY_DRAIN_MS ? since + CANARY_DRAIN_MS : since + CANARY_RETIRE_LIMIT_MS;
  return Math.max(1000, due - now);
}

/**
 * The model as its canary runs it: the spec with the canary's image, config, model files and resources,
 * a fixed number of pods and no autoscaler (which scales the stable Deployment only).
 */
export function canaryView(model: DynamoKserveModel): DynamoKserveModel {
  const canary = model.spec.canary!;
  const { autoscaling: _autoscaling, ...spec } = model.spec;
  return {
    ...model,
    spec: {
      ...spec,
      replicas: canary.replicas ?? 1,
      ...(canary.image !== undefined ? { image: canary.image } : {}),
      ...(canary.modelConfig !== undefined ? { modelConfig: canary.modelConfig } : {}),
      ...(canary.resources !== undefined ? { resources: canary.resources } : {}),
      ...(canary.modelFiles !== undefined ? { modelFiles: canary.modelFiles } : {}),
    },
  };
}

/** Whether a pod of the canary is available (before that the routes give it nothing). */
const available = (deployment: V1Deployment | undefined): boolean => (deployment?.status?.availableReplicas ?? 0) > 0;

/** The canary's share of the routes' requests now, 0–100; undefined when there is no canary. */
export function canaryWeight(model: DynamoKserveModel, state: CanaryState): number | undefined {
  switch (state.phase) {
    case "None":
      return undefined;
    case "Retiring":
      return 0;
    case "Running":
      return available(state.deployment) ? model.spec.canary!.trafficPercent : 0;
  }
}

/**
 * The canary's objects: Service, ConfigMap, Deployment and (more than one pod) its disruption
 * budget; a refused config keeps the running ConfigMap and Deployment as they are, as the
 * stable's does; a retiring canary keeps everything until the drain is over.
 */
export function canaryPlan(model: DynamoKserveModel, state: CanaryState, settings: BuildSettings): PlanGroup {
  const names = objectNames(model, "canary");
  // What runs, left exactly as it is (a refused config; a canary being retired).
  const runningPods: PlanGroup = [
    { keep: CONFIG_MAP_KIND, name: names.configMap },
    { keep: DEPLOYMENT_KIND, name: names.deployment },
    { keep: DISRUPTION_BUDGET_KIND, name: names.deployment },
  ];
  switch (state.phase) {
    case "None":
      return [];
    case "Retiring":
      return [{ keep: SERVICE_KIND, name: names.service }, ...runningPods];
    case "Running": {
      const canary = canaryView(model);
      const service = dataplaneService(canary, canary.spec, names.service, false, false, "canary");
      if (!state.config.valid) return [{ apply: service }, ...runningPods];
      const budget = dataplaneDisruptionBudget(canary, canary.spec, names.deployment, "canary");
      return [
        { apply: service },
        { apply: desiredConfigMap(canary, state.config, "canary") },
        { apply: desiredDeployment(canary, settings, "canary") },
        ...(budget !== undefined ? [{ apply: budget }] : []),
      ];
    }
  }
}

/** What became of the canary's objects, for its condition and status. */
export interface CanaryOutcome {
  readonly state: CanaryState;
  /** The routes' share for it now. */
  readonly weight: number;
  /** Its Deployment as applied or kept. */
  readonly deployment: V1Deployment | undefined;
  /** Set when one of its objects' names belongs to somebody else, or the API server refused one. */
  readonly stopped?: Stopped;
}

/**
 * CanaryReady: whether the canary serves its share, or why not; `routes` is RoutesReady (the
 * share is the routes': while they carry nothing, neither does the canary).
 */
export function canaryCondition(
  model: DynamoKserveModel,
  outcome: CanaryOutcome,
  routes: ConditionValue | undefined,
): ConditionValue {
  const { state } = outcome;
  const names = objectNames(model, "canary");
  if (outcome.stopped !== undefined) {
    return { status: "False", reason: outcome.stopped.reason, message: outcome.stopped.message };
  }
  if (state.phase === "Retiring") {
    return {
      status: "False",
      reason: "Retiring",
      message: `spec.canary was removed: the routes send Service ${names.service} nothing since ${state.since}; its objects are removed once the gateway has taken that and ${CANARY_DRAIN_MS / 1000} s have passed`,
    };
  }
  if (state.phase !== "Running") return { status: "False", reason: "NoCanary", message: "no canary" };
  const replicas = model.spec.canary!.replicas ?? 1;
  const ready = outcome.deployment?.status?.readyReplicas ?? 0;
  if (!state.config.valid) {
    const source =
      model.spec.canary!.modelConfig !== undefined
        ? "canary.modelConfig"
        : "spec.modelConfig (the canary has none of its own)";
    return {
      status: "False",
      reason: "ConfigInvalid",
      message: `the canary's config, ${source}, is refused (${state.config.reason}: ${state.config.message})${outcome.deployment !== undefined ? "; its pods keep serving the last valid one" : ""}`,
    };
  }
  if (!available(outcome.deployment)) {
    return {
      status: "False",
      reason: "Starting",
      message: `0/${replicas} canary pods ready (Deployment ${names.deployment}); the routes send it nothing until one is`,
    };
  }
  if (routes?.status !== "True") {
    return {
      status: "False",
      reason: "RoutesNotReady",
      message: `${ready}/${replicas} canary pods ready, but no request reaches them while the routes carry none (RoutesReady: ${routes?.reason ?? "none"})`,
    };
  }
  return {
    status: "True",
    reason: "Serving",
    message: `canary Service ${names.service} gets ${outcome.weight}% of the routes' requests; ${ready}/${replicas} pods ready`,
  };
}

/** status.canary. */
export function canaryStatus(
  model: DynamoKserveModel,
  outcome: CanaryOutcome | undefined,
): Pick<DynamoKserveModelStatus, "canary"> {
  if (outcome === undefined || outcome.state.phase === "None") return {};
  const deploymentStatus = outcome.deployment?.status;
  const ready = deploymentStatus?.readyReplicas ?? 0;
  const wanted = outcome.deployment?.spec?.replicas ?? model.spec.canary?.replicas ?? 1;
  const retiring = outcome.state.phase === "Retiring" ? outcome.state.since : undefined;
  return {
    canary: {
      service: objectNames(model, "canary").service,
      trafficPercent: outcome.weight,
      replicas: deploymentStatus?.replicas ?? 0,
      readyReplicas: ready,
      ...(retiring !== undefined ? { retiringSince: retiring } : {}),
      summary:
        retiring !== undefined
          ? "retiring"
          : available(outcome.deployment)
            ? `${outcome.weight}% ${ready}/${wanted} ready`
            : `${outcome.weight}% starting`,
    },
  };
}

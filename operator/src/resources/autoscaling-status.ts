import type { V1Deployment } from "@kubernetes/client-node";
import type { ScaledObject, ScaledObjectCondition } from "./scaled-object.js";
import type { ConditionValue } from "../api/v1alpha1.js";
import type { Stopped } from "../kube/owned.js";

/**
 * What spec.autoscaling's objects say, for both kinds' status: the AutoscalerReady
 * condition (KEDA's own conditions read back), ScaledToZero, the word or two `kubectl get`
 * shows, and availability at zero (the activator standing in). Pure.
 */

/**
 * What a plan does about spec.autoscaling: nothing asked, an HPA, KEDA's objects, or
 * nothing written because KEDA is missing or no Prometheus is known to its triggers.
 */
export type AutoscalingPlanned = "None" | "HPA" | "KEDA" | "KEDANotInstalled" | "PrometheusAddressMissing";

/** What became of the autoscaling objects in a reconcile. */
export interface AutoscalingObserved {
  readonly planned: AutoscalingPlanned;
  /** Whether minReplicas is 0 (class KEDA): the activator stands in while no pod runs. */
  readonly toZero: boolean;
  /** The name of the HPA or ScaledObject (the Deployment's). */
  readonly name: string;
  /** The ScaledObject as applied (with KEDA's status), class KEDA. */
  readonly scaledObject?: ScaledObject;
  /** The activator's Deployment as applied (minReplicas 0). */
  readonly activator?: V1Deployment;
  /** Why the autoscaling or activator objects stopped short (a name somebody else holds, one refused). */
  readonly stopped?: Stopped;
}

export interface AutoscalingStatus {
  readonly autoscalerReady?: ConditionValue;
  readonly scaledToZero?: ConditionValue;
  /** status.autoscaler: "HPA", "KEDA Active", "KEDA ScaledToZero", ... */
  readonly summary?: string;
}

const conditionOf = (scaledObject: ScaledObject | undefined, type: string): ScaledObjectCondition | undefined =>
  scaledObject?.status?.conditions?.find((condition) => condition.type === type);

/** The autoscaler's conditions and summary; nothing without spec.autoscaling. */
export function autoscalingStatus(
  observed: AutoscalingObserved,
  deployment: V1Deployment | undefined,
): AutoscalingStatus {
  switch (observed.planned) {
    case "None":
      return {};
    case "HPA":
      return {
        autoscalerReady:
          observed.stopped !== undefined
            ? { status: "False", reason: observed.stopped.reason, message: observed.stopped.message }
            : {
                status: "True",
                reason: "HorizontalPodAutoscaler",
                message: `HorizontalPodAutoscaler ${observed.name} scales the Deployment`,
              },
        summary: "HPA",
      };
    case "KEDANotInstalled":
      return {
        autoscalerReady: {
          status: "False",
          reason: "KEDANotInstalled",
          message:
            "autoscaling.class KEDA needs KEDA (scaledobjects.keda.sh, v1alpha1); nothing is written for it until KEDA is installed, and then without a restart",
        },
        summary: "KEDA NotInstalled",
      };
    case "PrometheusAddressMissing":
      return {
        autoscalerReady: {
          status: "False",
          reason: "PrometheusAddressMissing",
          message:
            "KEDA's triggers need a Prometheus: set autoscaling.keda.prometheusAddress, or the operator's --keda-prometheus-address (the chart's autoscaling.keda.prometheusAddress)",
        },
        summary: "KEDA PrometheusAddressMissing",
      };
    case "KEDA":
      return kedaStatus(observed, deployment);
  }
}

function kedaStatus(observed: AutoscalingObserved, deployment: V1Deployment | undefined): AutoscalingStatus {
  const atZero = observed.toZero && deployment?.spec?.replicas === 0;
  const scaledToZero: ConditionValue | undefined = !observed.toZero
    ? undefined
    : atZero
      ? {
          status: "True",
          reason: "Idle",
          message: `no pod runs; the activator (${observed.name}-activator) holds requests and wakes the model`,
        }
      : { status: "False", reason: "Serving", message: `${deployment?.spec?.replicas ?? 0} pod(s) wanted by KEDA` };
  if (observed.stopped !== undefined) {
    return {
      autoscalerReady: { status: "False", reason: observed.stopped.reason, message: observed.stopped.message },
      ...(scaledToZero !== undefined ? { scaledToZero } : {}),
      summary: `KEDA ${observed.stopped.reason}`,
    };
  }
  const ready = conditionOf(observed.scaledObject, "Ready");
  const active = conditionOf(observed.scaledObject, "Active");
  const autoscalerReady: ConditionValue =
    ready === undefined || ready.status === "Unknown"
      ? {
          status: "Unknown",
          reason: "WaitingForKEDA",
          message: `KEDA has not reported on ScaledObject ${observed.name} yet`,
        }
      : ready.status === "True"
        ? {
            status: "True",
            reason: "KEDAReady",
            message: `ScaledObject ${observed.name}: ${active?.message ?? ready.message ?? "ready"}`,
          }
        : {
            status: "False",
            reason: "TriggerFailing",
            // KEDA's own condition is general ("Triggers defined in ScaledObject are not working
            // correctly"); the cause is in its KEDAScalerFailed Events.
            message: `ScaledObject ${observed.name}: ${ready.message ?? ready.reason ?? "not ready"} (the cause: kubectl describe scaledobject ${observed.name})`,
          };
  const summary =
    autoscalerReady.status === "False"
      ? "KEDA TriggerFailing"
      : atZero
        ? "KEDA ScaledToZero"
        : active?.status === "True"
          ? "KEDA Active"
          : "KEDA Idle";
  return { autoscalerReady, ...(scaledToZero !== undefined ? { scaledToZero } : {}), summary };
}

/**
 * Availability of a data plane at zero: no pod is wanted, and the activator (Ready exactly
 * while no data-plane pod is) stands in. Undefined when the data plane is not at zero by
 * its autoscaler, so the pods' own availability stands.
 */
export function availabilityAtZero(
  observed: AutoscalingObserved | undefined,
  deployment: V1Deployment | undefined,
): ConditionValue | undefined {
  if (observed?.planned !== "KEDA" || !observed.toZero || deployment?.spec?.replicas !== 0) return undefined;
  const activatorReady = (observed.activator?.status?.readyReplicas ?? 0) > 0;
  return activatorReady
    ? {
        status: "True",
        reason: "ScaledToZero",
        message: "no pod runs (minReplicas 0); the activator holds each request until one is ready",
      }
    : {
        status: "False",
        reason: "ActivatorNotReady",
        message: `no pod runs and the activator is not ready; see \`kubectl describe deployment ${observed.name}-activator\``,
      };
}

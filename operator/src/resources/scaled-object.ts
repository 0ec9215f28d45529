import type { KubernetesObject, V1ObjectMeta } from "@kubernetes/client-node";
import type { Owner } from "../api/objects.js";
import { SPEC_DEFAULTS, type DynamoKserveModelSpec } from "../api/v1alpha1.js";
import type { OwnedKind } from "../kube/owned.js";
import { DEPLOYMENT_KIND } from "./dataplane-pods.js";
import { labelsFor, ownedMetadata } from "./names.js";

/**
 * A data plane's KEDA ScaledObject (spec.autoscaling.class KEDA): KEDA scales the Deployment
 * between minReplicas (0 included) and maxReplicas on Prometheus queries of the data plane's
 * own series, through an HPA it makes and keeps, with no prometheus-adapter. Pure builder.
 */

export const SCALED_OBJECT_KIND = {
  apiVersion: "keda.sh/v1alpha1",
  kind: "ScaledObject",
  plural: "scaledobjects",
  // KEDA's CRD: used while it is installed.
  optional: true,
} as const satisfies OwnedKind;

/** One of a ScaledObject's triggers, as keda.sh/v1alpha1 takes it (metadata values are strings). */
export interface ScaledObjectTrigger {
  readonly type: string;
  readonly name: string;
  readonly metricType?: "AverageValue" | "Value" | "Utilization";
  readonly metadata: Readonly<Record<string, string>>;
}

export interface ScaledObjectCondition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
}

export interface ScaledObject extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: {
    scaleTargetRef: { apiVersion: string; kind: string; name: string };
    minReplicaCount: number;
    maxReplicaCount: number;
    pollingInterval: number;
    cooldownPeriod: number;
    initialCooldownPeriod: number;
    advanced?: { horizontalPodAutoscalerConfig: { behavior: object } };
    triggers: ScaledObjectTrigger[];
  };
  status?: { conditions?: ScaledObjectCondition[]; lastActiveTime?: string };
}

/** What a ScaledObject reads besides the owner's spec. */
export interface KedaInputs {
  /** The Prometheus the triggers query: spec.autoscaling.keda.prometheusAddress, else the operator's default. */
  readonly prometheusAddress: string;
  /** The Service Prometheus scrapes the pods through (the series' `service`; `namespace` is the owner's). */
  readonly service: string;
  /** The served model's name (a model's series carry `model`); undefined for a repository: all its models. */
  readonly model?: string;
  /** The ServiceMonitor's scrape interval, in seconds (sets the idle window). */
  readonly scrapeIntervalSeconds: number;
  /** With minReplicas 0: the activator's KEDA external-push scaler, host:port. */
  readonly activatorScaler?: string;
}

/** KEDA's annotation naming the ScaledObject labels its HPA must not carry. */
const HPA_EXCLUDED_LABELS = "scaledobject.keda.sh/hpa-excluded-labels";

/** The data plane's series each per-pod target reads, summed over the pods (KEDA's AverageValue divides by their count). */
const TARGET_SERIES = {
  targetInflightRequests: { trigger: "inflight-requests", series: "dynamo_frontend_inflight_requests", scale: 1 },
  targetWaitingRequests: { trigger: "waiting-requests", series: "dynamo_kserve_requests_waiting", scale: 1 },
  targetRunningRequests: { trigger: "running-requests", series: "dynamo_kserve_requests_running", scale: 1 },
  // A ratio, 0 to 1, per pod; the target is in percent.
  targetKvCacheUsagePercent: { trigger: "kv-cache-usage", series: "dynamo_kserve_kv_cache_usage_ratio", scale: 100 },
} as const;

/**
 * The activity trigger's threshold: high enough never to ask for a second pod (each trigger is
 * also an HPA metric), so it only says whether the model is in use (activationThreshold 0).
 */
const ACTIVITY_ONLY_THRESHOLD = "1000000000";

/** The shortest idle window: a few scrapes, so one missed scrape cannot make a used model look idle. */
const MIN_ACTIVITY_WINDOW_SECONDS = 20;

type AutoscalingSpec = NonNullable<DynamoKserveModelSpec["autoscaling"]>;

/** The inputs with the owner's namespace, which every query is scoped to. */
type ScopedInputs = KedaInputs & { readonly namespace: string };

/**
 * The ScaledObject for spec.autoscaling with class KEDA, named like and scaling the
 * Deployment `name` (as the HPA class's HPA does); undefined for any other class.
 */
export function dataplaneScaledObject(
  owner: Owner,
  spec: { readonly autoscaling?: AutoscalingSpec },
  name: string,
  inputs: KedaInputs,
): ScaledObject | undefined {
  const autoscaling = spec.autoscaling;
  if (autoscaling?.class !== "KEDA") return undefined;
  const minReplicas = autoscaling.minReplicas ?? SPEC_DEFAULTS.autoscaling.minReplicas;
  const keda = autoscaling.keda ?? {};
  const scoped: ScopedInputs = { ...inputs, namespace: owner.metadata.namespace };
  const cooldown = keda.cooldownSeconds ?? SPEC_DEFAULTS.autoscaling.keda.cooldownSeconds;
  const polling = keda.pollingIntervalSeconds ?? SPEC_DEFAULTS.autoscaling.keda.pollingIntervalSeconds;
  return {
    apiVersion: SCALED_OBJECT_KIND.apiVersion,
    kind: SCALED_OBJECT_KIND.kind,
    metadata: {
      ...ownedMetadata(owner, name),
      // KEDA copies a ScaledObject's labels onto the HPA it makes (keda-hpa-<name>, owned by
      // the ScaledObject): without ours it is neither in the operator's caches nor routed to
      // the owner on every HPA status change. Read at creation only, so set from the start.
      annotations: { [HPA_EXCLUDED_LABELS]: Object.keys(labelsFor(owner)).join(",") },
    },
    spec: {
      scaleTargetRef: { apiVersion: DEPLOYMENT_KIND.apiVersion, kind: DEPLOYMENT_KIND.kind, name },
      minReplicaCount: minReplicas,
      maxReplicaCount: autoscaling.maxReplicas,
      pollingInterval: polling,
      cooldownPeriod: cooldown,
      // A model just made is not taken to zero before anyone could use it: the same idle time.
      initialCooldownPeriod: cooldown,
      ...(autoscaling.behavior !== undefined
        ? { advanced: { horizontalPodAutoscalerConfig: { behavior: autoscaling.behavior } } }
        : {}),
      triggers: [
        ...loadTriggers(autoscaling, scoped),
        ...(minReplicas === 0 ? activationTriggers(scoped, polling) : []),
      ],
    },
  };
}

/** A trigger per per-pod target, and CPU utilization (KEDA's cpu scaler, the resource metrics API). */
function loadTriggers(autoscaling: AutoscalingSpec, inputs: ScopedInputs): ScaledObjectTrigger[] {
  const triggers: ScaledObjectTrigger[] = [];
  for (const [field, { trigger, series, scale }] of Object.entries(TARGET_SERIES)) {
    const target = autoscaling[field as keyof typeof TARGET_SERIES];
    if (target === undefined) continue;
    const sum = `sum(${series}{${seriesSelector(inputs)}})`;
    triggers.push(prometheusTrigger(trigger, inputs, scale === 1 ? sum : `${sum} * ${scale}`, String(target)));
  }
  if (autoscaling.targetCPUUtilization !== undefined) {
    triggers.push({
      type: "cpu",
      name: "cpu-utilization",
      metricType: "Utilization",
      metadata: { value: String(autoscaling.targetCPUUtilization) },
    });
  }
  return triggers;
}

/**
 * What keeps a model at zero awake and wakes it: requests answered within the idle window
 * (a model used at a low rate is never taken for idle because one scrape saw nothing in
 * flight), and the activator's held requests, pushed to KEDA the moment one is held.
 */
function activationTriggers(inputs: ScopedInputs, pollingSeconds: number): ScaledObjectTrigger[] {
  const window = `${activityWindowSeconds(inputs.scrapeIntervalSeconds, pollingSeconds)}s`;
  return [
    prometheusTrigger(
      "recent-requests",
      inputs,
      `sum(increase(dynamo_frontend_requests_total{${seriesSelector(inputs)}}[${window}]))`,
      ACTIVITY_ONLY_THRESHOLD,
    ),
    ...(inputs.activatorScaler !== undefined
      ? [
          {
            type: "external-push",
            name: "held-requests",
            metricType: "AverageValue" as const,
            metadata: { scalerAddress: inputs.activatorScaler },
          },
        ]
      : []),
  ];
}

/**
 * The idle window: a few scrapes, and never shorter than the gap between two of KEDA's reads
 * plus two scrapes (the newest samples lag by up to one): KEDA sees activity only when it
 * reads, so a shorter window misses requests between reads and takes a used model for idle.
 */
const activityWindowSeconds = (scrapeSeconds: number, pollingSeconds: number): number =>
  Math.ceil(Math.max(MIN_ACTIVITY_WINDOW_SECONDS, 4 * scrapeSeconds, pollingSeconds + 2 * scrapeSeconds));

function prometheusTrigger(name: string, inputs: ScopedInputs, query: string, threshold: string): ScaledObjectTrigger {
  return {
    type: "prometheus",
    name,
    metricType: "AverageValue",
    metadata: {
      serverAddress: inputs.prometheusAddress,
      query,
      threshold,
      activationThreshold: "0",
      // No series yet (no pod has been scraped): 0, not an error that stalls scaling.
      ignoreNullValues: "true",
    },
  };
}

/** The owner's series: its Service's scrape targets in its namespace, and its model's label for a model. */
function seriesSelector(inputs: ScopedInputs): string {
  const labels: [string, string][] = [
    ["namespace", inputs.namespace],
    ["service", inputs.service],
  ];
  if (inputs.model !== undefined) labels.push(["model", inputs.model]);
  return labels.map(([key, value]) => `${key}="${promLabelValue(value)}"`).join(",");
}

/** A PromQL string literal's contents: backslashes and double quotes escaped. */
const promLabelValue = (value: string): string => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"');

/** A Prometheus duration (`30s`, `1m30s`, `500ms`: the ServiceMonitor interval's form) in seconds. */
export function durationSeconds(text: string): number {
  const units: Record<string, number> = { y: 31_536_000, w: 604_800, d: 86_400, h: 3600, m: 60, s: 1, ms: 0.001 };
  let seconds = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+)(ms|y|w|d|h|m|s)/g)) seconds += Number(amount) * units[unit!]!;
  return seconds;
}

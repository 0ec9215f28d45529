import type { KubernetesObject, V1ObjectMeta } from "@kubernetes/client-node";
import { SPEC_DEFAULTS, type DynamoKserveModel } from "../api/v1alpha1.js";
import { labelsFor, objectNames, ownedMetadata, selectorFor } from "./names.js";

/** The Prometheus Operator's ServiceMonitor for a model's data plane. Pure builder. */

export const SERVICE_MONITOR_KIND = {
  apiVersion: "monitoring.coreos.com/v1",
  kind: "ServiceMonitor",
  plural: "servicemonitors",
} as const;

export interface ServiceMonitor extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: {
    selector: { matchLabels: Record<string, string> };
    endpoints: { port: string; path: string; interval: string; scheme: string }[];
  };
}

/** Scrapes the model's Service (only it: the pool's Service carries other labels) on its `metrics` port. */
export function desiredServiceMonitor(model: DynamoKserveModel): ServiceMonitor {
  const monitoring = model.spec.monitoring ?? {};
  return {
    apiVersion: SERVICE_MONITOR_KIND.apiVersion,
    kind: SERVICE_MONITOR_KIND.kind,
    metadata: {
      ...ownedMetadata(model, objectNames(model).service),
      // The model's labels win: extra labels cannot unhook the object from its model.
      labels: { ...definedValues(monitoring.labels ?? {}), ...labelsFor(model) },
    },
    spec: {
      selector: {
        matchLabels: { ...selectorFor(model), "app.kubernetes.io/name": labelsFor(model)["app.kubernetes.io/name"]! },
      },
      endpoints: [
        {
          port: "metrics",
          path: "/metrics",
          interval: monitoring.interval ?? SPEC_DEFAULTS.monitoring.interval,
          scheme: "http",
        },
      ],
    },
  };
}

const definedValues = (values: Record<string, string | undefined>): Record<string, string> =>
  Object.fromEntries(Object.entries(values).filter((entry): entry is [string, string] => entry[1] !== undefined));

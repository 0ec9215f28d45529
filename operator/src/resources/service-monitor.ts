import type { Owner } from "../api/objects.js";
import type { KubernetesObject, V1ObjectMeta } from "@kubernetes/client-node";
import { SPEC_DEFAULTS, type DynamoKserveModelSpec } from "../api/v1alpha1.js";
import type { OwnedKind } from "../kube/owned.js";
import { labelsFor, ownedMetadata, selectorFor, VARIANT_LABEL } from "./names.js";

/** The Prometheus Operator's ServiceMonitor for a data plane (a model's or a repository's). Pure builder. */

export const SERVICE_MONITOR_KIND = {
  apiVersion: "monitoring.coreos.com/v1",
  kind: "ServiceMonitor",
  plural: "servicemonitors",
  optional: true,
} as const satisfies OwnedKind;

export interface ServiceMonitor extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: {
    selector: { matchLabels: Record<string, string> };
    podTargetLabels: string[];
    endpoints: { port: string; path: string; interval: string; scheme: string }[];
  };
}

/**
 * Scrapes the owner's data-plane Services (only they: a model's pool Service carries other
 * labels; its canary's Service carries the model's) on their `metrics` port, and keeps the
 * pods' variant label on their series (a model's stable and canary pods say which they are).
 */
export function desiredServiceMonitor(
  owner: Owner & { readonly spec: Pick<DynamoKserveModelSpec, "monitoring"> },
  service: string,
): ServiceMonitor {
  const monitoring = owner.spec.monitoring ?? {};
  return {
    apiVersion: SERVICE_MONITOR_KIND.apiVersion,
    kind: SERVICE_MONITOR_KIND.kind,
    metadata: {
      ...ownedMetadata(owner, service),
      // The owner's labels win: extra labels cannot unhook the object from its owner.
      labels: { ...definedValues(monitoring.labels ?? {}), ...labelsFor(owner) },
    },
    spec: {
      selector: {
        matchLabels: { ...selectorFor(owner), "app.kubernetes.io/name": labelsFor(owner)["app.kubernetes.io/name"]! },
      },
      podTargetLabels: [VARIANT_LABEL],
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

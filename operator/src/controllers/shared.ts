import type { DynamoKserveModelSpec } from "../api/v1alpha1.js";
import type { OptionalKind } from "../kube/optional-kind.js";
import type { KubeWriter } from "../kube/writer.js";
import { ownerLabel, type Owner } from "../resources/names.js";
import { desiredServiceMonitor, type ServiceMonitor } from "../resources/service-monitor.js";
import type { MonitoringOutcome } from "../resources/status.js";

/** What both controllers (DynamoKserveModel, DynamoKserveRepository) do alike. */

/** `namespace/name`, the work-queue key of an object. */
export const keyOf = (namespace: string, name: string): string => `${namespace}/${name}`;

/** RFC 3339 to the second, as Kubernetes writes timestamps. */
export const timestamp = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * Creates, updates or removes the ServiceMonitor of `owner`'s data-plane Service `service`
 * (spec.monitoring); undefined when it asks for none. Removes only a ServiceMonitor it owns.
 */
export async function reconcileServiceMonitor(
  owner: Owner & { readonly spec: Pick<DynamoKserveModelSpec, "monitoring"> },
  service: string,
  monitors: OptionalKind<ServiceMonitor>,
  writer: KubeWriter,
): Promise<MonitoringOutcome | undefined> {
  const { namespace, name } = owner.metadata;
  const live = monitors.objects()?.get(namespace, service);
  if (owner.spec.monitoring === undefined) {
    if (live !== undefined && live.metadata.labels?.[ownerLabel(owner)] === name) await writer.remove(live);
    return undefined;
  }
  if (monitors.crd() === undefined) return { state: "CRDNotInstalled" };
  const desired = desiredServiceMonitor(owner, service);
  await writer.apply(desired, live);
  return { state: "Created", name: desired.metadata.name };
}

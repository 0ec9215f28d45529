import type { Owner } from "../api/objects.js";
import type { DynamoKserveModelSpec } from "../api/v1alpha1.js";
import { NameTakenError } from "../kube/apply.js";
import type { OptionalKind } from "../kube/optional-kind.js";
import type { KubeWriter } from "../kube/writer.js";
import { ownerLabel } from "../resources/names.js";
import { desiredServiceMonitor, type ServiceMonitor } from "../resources/service-monitor.js";
import type { MonitoringOutcome } from "../resources/status.js";

/** What the controllers of our kinds (DynamoKserveModel, DynamoKserveRepository) do alike with what they own. */

/** The sooner of two requeue delays, either maybe absent. */
export function earliest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}

/** RFC 3339 to the second, as Kubernetes writes timestamps. */
export const timestamp = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * Runs `applies`; if one of them finds its object's name taken by somebody else (a user,
 * or another of our objects), the rest are skipped and the reason is returned, to be told
 * in a NameTaken condition. Undefined when all applied.
 */
export async function nameTakenBy(applies: () => Promise<void>): Promise<string | undefined> {
  try {
    await applies();
    return undefined;
  } catch (error) {
    if (error instanceof NameTakenError) return error.message;
    throw error;
  }
}

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
  const taken = await nameTakenBy(async () => void (await writer.apply(desired, live)));
  return taken === undefined
    ? { state: "Created", name: desired.metadata.name }
    : { state: "NameTaken", message: taken };
}

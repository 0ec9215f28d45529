import type { KubernetesObject } from "@kubernetes/client-node";
import { MANAGED_BY_LABEL, OPERATOR_NAME } from "../api/objects.js";
import type { WatchedKind } from "./informer.js";

/**
 * What a controller owns and what it wants of it, as data (after controller-runtime's
 * `Owns()` and kube-rs's `.owns()`): the kinds it declares once, and each reconcile's plan.
 * The manager derives the rest from them — one cache per kind, the owner-label watch, the
 * ordered applies with the NameTaken rule, the prune of what is no longer wanted — and a
 * unit test holds the chart's RBAC to the declarations. Pure types: builders in resources/
 * make plans without knowing of the API server.
 */

/** A kind an owner makes objects of. */
export interface OwnedKind extends WatchedKind {
  /** Its CRD is someone else's (InferencePool, ServiceMonitor, Certificate): used while installed. */
  readonly optional?: boolean;
}

/** `kinds` with each kind once (owners declare the kinds of several plans, which share some). */
export function uniqueKinds(kinds: readonly OwnedKind[]): readonly OwnedKind[] {
  return [...new Map(kinds.map((kind) => [kindKey(kind), kind])).values()];
}

/** The selector of every owned kind's cache: only what the operator made. */
export const OWNED_SELECTOR = `${MANAGED_BY_LABEL}=${OPERATOR_NAME}`;

/** One entry of a plan: an object to apply, or an existing one to leave exactly as it is. */
export type PlannedObject = { readonly apply: KubernetesObject } | { readonly keep: OwnedKind; readonly name: string };

/**
 * Entries applied in order, where a NameTaken (the name belongs to somebody else) or a
 * Refused (the API server refused the object as written) stops the entries after it: what
 * must not run without what comes before (a Deployment without its Service and ConfigMap).
 * Separate groups go on regardless.
 */
export type PlanGroup = readonly PlannedObject[];

/** The objects an owner wants now, group by group in order; every other object it owns is pruned. */
export type Plan = readonly PlanGroup[];

/** What became of one planned entry. */
export type PlannedOutcome =
  /** Applied (or already as desired): the object as the API server returned it (or the cache holds it). */
  | { readonly state: "Applied"; readonly object: KubernetesObject }
  /** Left as it is: the cached object, if there is one. */
  | { readonly state: "Kept"; readonly object: KubernetesObject | undefined }
  /** Its name belongs to somebody else; the rest of its group was not reached. */
  | { readonly state: "NameTaken"; readonly message: string }
  /**
   * The API server refused it as written (400, 422: a value its validation rejects, which the
   * CRD's schema let through); the rest of its group was not reached.
   */
  | { readonly state: "Refused"; readonly message: string }
  /** An optional kind whose CRD is not installed: nothing written. */
  | { readonly state: "CRDNotInstalled" }
  /** An earlier entry of its group was NameTaken or Refused. */
  | { readonly state: "NotReached" };

/** The outcomes of an applied plan, looked up by what was planned. */
export interface PlanOutcomes {
  /** The outcome of the entry for `kind`'s object `name`; undefined when the plan had none. */
  of(kind: OwnedKind, name: string): PlannedOutcome | undefined;
  /** Why `group` (a group of the plan) stopped short, if it did: its first NameTaken or Refused entry. */
  stopped(group: PlanGroup): Stopped | undefined;
}

/** Why a plan's group stopped short: a condition's reason (NameTaken, Refused) and what to do. */
export interface Stopped {
  readonly reason: "NameTaken" | "Refused";
  readonly message: string;
}

/** Whether an outcome stops the rest of its group (and says why). */
export const stopsGroup = (
  outcome: PlannedOutcome | undefined,
): outcome is Extract<PlannedOutcome, { state: Stopped["reason"] }> =>
  outcome?.state === "NameTaken" || outcome?.state === "Refused";

/**
 * The object of `group` that runs after the plan: as applied or kept; after a Refused (the
 * plan's object was not written), `cached()`, the one left as it was; none when the group
 * stopped at a name that is somebody else's (what holds it is not the owner's).
 */
export function objectLeftRunning<T extends KubernetesObject>(
  outcomes: PlanOutcomes,
  group: PlanGroup,
  entry: { readonly kind: OwnedKind; readonly name: string },
  cached: () => T | undefined,
): T | undefined {
  if (outcomes.stopped(group)?.reason === "NameTaken") return undefined;
  return objectOf<T>(outcomes.of(entry.kind, entry.name)) ?? cached();
}

/** The object an outcome leaves in place (applied or kept), as its kind's type. */
export function objectOf<T extends KubernetesObject>(outcome: PlannedOutcome | undefined): T | undefined {
  return outcome?.state === "Applied" || outcome?.state === "Kept" ? (outcome.object as T | undefined) : undefined;
}

/** `apiVersion/kind`: how planned objects are matched to declared kinds. */
export const kindKey = (kind: { readonly apiVersion?: string; readonly kind?: string }): string =>
  `${kind.apiVersion ?? ""}/${kind.kind ?? ""}`;

/** `kind key/name`: one entry of a plan (plans are per owner, so per namespace). */
export const entryKey = (kind: { readonly apiVersion?: string; readonly kind?: string }, name: string): string =>
  `${kindKey(kind)}/${name}`;

/** The kind and name an entry is about. */
export function entryOf(entry: PlannedObject): { kind: { apiVersion?: string; kind?: string }; name: string } {
  return "apply" in entry
    ? { kind: entry.apply, name: entry.apply.metadata?.name ?? "" }
    : { kind: entry.keep, name: entry.name };
}

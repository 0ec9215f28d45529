import type { KubernetesObject } from "@kubernetes/client-node";
import type { Transition } from "../api/objects.js";
import type { OwnedKind, Plan, PlanOutcomes } from "./owned.js";

/**
 * The contract between a controller and the small runtime that runs it (manager.ts), after
 * controller-runtime and kube-rs: a controller says which objects it reconciles, which
 * kinds it owns (owned.ts), which other kinds it watches and how their events map to keys,
 * and how one object is reconciled into a plan; the runtime does the rest once for every
 * controller — the caches and owner-label watch of owned kinds, applying the plan and
 * pruning, the queue, the not-found and deleting prologue, writing the status and
 * recording Events, backoff, metrics, resync, leader election.
 */

/** An object a controller reconciles: named and namespaced, maybe going away. */
export interface ReconciledObject extends KubernetesObject {
  readonly metadata: NonNullable<KubernetesObject["metadata"]> & { readonly name: string; readonly namespace: string };
}

/** Where a controller's objects are read from (a watch cache, or one that comes with its CRD). */
export interface ObjectSource<T> {
  get(namespace: string, name: string): T | undefined;
  list(namespace?: string): T[];
}

/**
 * What one reconcile produced. The runtime applies `status` (for kinds with a status
 * subresource) when it differs from the last one written, records `transitions` as
 * Events, and runs the key again after `requeueAfterMs`. A reconcile that throws is
 * retried with exponential backoff.
 */
export interface Reconciled<Status> {
  readonly status?: Status;
  readonly transitions?: readonly Transition[];
  readonly requeueAfterMs?: number;
}

/**
 * What one reconcile wants: the plan (the objects the owner wants now, in order), and how
 * the result follows from what became of it (`settle`, given each entry's outcome), so a
 * NameTaken or a missing CRD reaches the conditions.
 */
export interface Planned<Status> {
  readonly plan: Plan;
  settle(outcomes: PlanOutcomes): Reconciled<Status> | Promise<Reconciled<Status>>;
}

/** How events on objects of kinds it does not own lead to this controller's keys. */
export interface Watch {
  /** The kinds (e.g. Deployment) whose events this mapping looks at. */
  readonly kinds: readonly string[];
  /** Keys (`namespace/name`) of this controller's objects an event on `object` concerns. */
  keys(object: KubernetesObject): string[];
}

export interface Controller<T extends ReconciledObject, Status = never> {
  /** The controller's name in logs and metrics (controller-runtime's `controller` label). */
  readonly name: string;
  /** The kind it reconciles: each event on one of these is its own key. */
  readonly kind: string;
  /** Its objects; undefined while their kind is not installed (an optional CRD). */
  objects(): ObjectSource<T> | undefined;
  /** The resource of its kind's status subresource, for kinds it writes a status for. */
  readonly statusPlural?: string;
  /**
   * The kinds it makes objects of: the manager caches each (selected on the managed-by
   * label), routes an event on one to the key its `ownerLabel` names, applies planned
   * objects of them and prunes the rest. The chart's RBAC is tested against this list.
   */
  readonly owns: readonly OwnedKind[];
  /** The label naming the owner on each object it owns (resources/names.ts ownerLabel). */
  readonly ownerLabel: string;
  /** Events on objects it does not own (a user's ConfigMap, pods) that concern its keys. */
  readonly watches: readonly Watch[];
  /** Reconciles one object (never a missing or deleting one), its status as last written, into a plan. */
  reconcile(object: T): Promise<Planned<Status>>;
  /** Names of the objects this one owns, forgotten with it (its owned objects go by garbage collection). */
  ownedNames?(name: string): readonly string[];
}

/** `namespace/name`, the work-queue key of an object. */
export const keyOf = (namespace: string, name: string): string => `${namespace}/${name}`;

/** The key an object labelled `label: <name>` names (its owner's, or the repository its pod serves). */
export function labelledKey(label: string, object: KubernetesObject): string[] {
  const owner = object.metadata?.labels?.[label];
  return owner === undefined ? [] : [keyOf(object.metadata?.namespace ?? "", owner)];
}

/** Events on objects of `kinds` concern the keys `keys` finds (e.g. the models whose configMapRef names it). */
export function mapped(kinds: readonly string[], keys: (object: KubernetesObject) => string[]): Watch {
  return { kinds, keys };
}

import { createHash } from "node:crypto";
import {
  PatchStrategy,
  type KubernetesObject,
  type KubernetesObjectApi,
  type V1OwnerReference,
} from "@kubernetes/client-node";
import { OPERATOR_NAME } from "../api/objects.js";
import { quantityValue } from "../api/quantity.js";

/** Annotation holding a hash of what the operator last applied to an object. */
export const APPLIED_HASH_ANNOTATION = "dynamokserve.dev/applied-hash";

export type ApplyResult = { readonly changed: boolean; readonly object: KubernetesObject };

/**
 * Server-side apply with our field manager, skipped when it would change nothing: the
 * live object carries the hash of this exact desired state (so no field we used to set
 * needs removing) and still holds every desired value (so nobody has drifted it). A
 * steady state therefore makes no API writes; drift or a spec change makes exactly one.
 */
export async function applyIfChanged(
  api: KubernetesObjectApi,
  desired: KubernetesObject,
  live: KubernetesObject | undefined,
): Promise<ApplyResult> {
  const hash = hashOf(desired);
  // Objects from a list response carry no apiVersion/kind; the cache already knows them.
  const { apiVersion: _apiVersion, kind: _kind, ...fields } = desired;
  if (live !== undefined && live.metadata?.annotations?.[APPLIED_HASH_ANNOTATION] === hash && contains(live, fields)) {
    return { changed: false, object: live };
  }
  // Ours to write only if its controller is the owner we apply for: anything else (a
  // user's object, or one another of our objects owns, e.g. a repository's Service of the
  // same name as a model's) is NameTaken, and left as it is. An object the cache lacks
  // is read first: the cache may lag behind another controller's create.
  const owner = controllerOf(desired);
  const existing = live ?? (owner === undefined ? undefined : await readOrUndefined(api, desired));
  if (owner !== undefined && existing !== undefined && controllerOf(existing)?.uid !== owner.uid) {
    throw new NameTakenError(desired.kind ?? "object", desired.metadata?.name ?? "", controllerOf(existing));
  }
  const body: KubernetesObject = {
    ...desired,
    metadata: {
      ...desired.metadata,
      annotations: { ...desired.metadata?.annotations, [APPLIED_HASH_ANNOTATION]: hash },
    },
  };
  // Forced only over an object we know is ours: unforced, the API server refuses with 409
  // Conflict when another field manager owns what we would set.
  const force = existing !== undefined;
  try {
    const object = await api.patch(body, undefined, undefined, OPERATOR_NAME, force, PatchStrategy.ServerSideApply);
    return { changed: true, object };
  } catch (error) {
    const code = (error as { code?: number }).code;
    if (!force && code === 409) {
      throw new NameTakenError(desired.kind ?? "object", desired.metadata?.name ?? "", undefined);
    }
    if (code === 400 || code === 422) {
      throw new RefusedError(desired.kind ?? "object", desired.metadata?.name ?? "", apiMessage(error));
    }
    throw error;
  }
}

/** The message of an API server's Status in a client error's body, else the error's own. */
function apiMessage(error: unknown): string {
  const body = (error as { body?: unknown }).body;
  try {
    const status = (typeof body === "string" ? JSON.parse(body) : body) as { message?: unknown } | undefined;
    if (typeof status?.message === "string") return status.message;
  } catch {
    // Not a Status: the error's own message says what there is.
  }
  return error instanceof Error ? error.message : String(error);
}

/** The owner reference marked `controller` (at most one per object). */
export function controllerOf(object: KubernetesObject): V1OwnerReference | undefined {
  return object.metadata?.ownerReferences?.find((reference) => reference.controller === true);
}

async function readOrUndefined(
  api: KubernetesObjectApi,
  desired: KubernetesObject,
): Promise<KubernetesObject | undefined> {
  try {
    return await api.read({
      apiVersion: desired.apiVersion!,
      kind: desired.kind!,
      metadata: { name: desired.metadata!.name!, namespace: desired.metadata!.namespace! },
    });
  } catch (error) {
    if ((error as { code?: number }).code === 404) return undefined;
    throw error;
  }
}

/** The object we would create exists and belongs to somebody else. */
export class NameTakenError extends Error {
  constructor(
    readonly kind: string,
    readonly objectName: string,
    owner: V1OwnerReference | undefined,
  ) {
    const article = /^[AEIOU]/.test(kind) ? "an" : "a";
    super(
      owner === undefined
        ? `${article} ${kind} named ${objectName} exists and is not managed by ${OPERATOR_NAME}; rename one of them`
        : `${article} ${kind} named ${objectName} exists and belongs to ${owner.kind} ${owner.name}; rename one of them`,
    );
  }
}

/**
 * The API server refused the object as written (400 Bad Request, 422 Invalid): a value its
 * own validation rejects (a resource request above its limit, an image name with a space)
 * that the CRD's schema let through. Retrying the same object cannot succeed.
 */
export class RefusedError extends Error {
  constructor(kind: string, objectName: string, reason: string) {
    super(`the API server refused ${kind} ${objectName}: ${reason}`);
  }
}

export function hashOf(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex").slice(0, 16);
}

/** JSON with object keys sorted, so equal values hash equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, nested: unknown) =>
    nested !== null && typeof nested === "object" && !Array.isArray(nested)
      ? Object.fromEntries(Object.entries(nested).sort(([a], [b]) => a.localeCompare(b)))
      : nested,
  );
}

/** Where quantities sit: a container's resources, an emptyDir's sizeLimit. */
const QUANTITY_KEYS = new Set(["resources", "sizeLimit"]);

/**
 * Does `live` hold every value of `desired`? Extra fields in `live` (defaults, other
 * managers' fields, status) are fine; lists must match element by element. Quantities
 * compare by value, as the API server rewrites them ("1000m" -> "1", "10240Mi" -> "10Gi").
 */
export function contains(live: unknown, desired: unknown, inResources = false): boolean {
  if (Array.isArray(desired)) {
    return (
      Array.isArray(live) &&
      live.length === desired.length &&
      desired.every((item, index) => contains(live[index], item, inResources))
    );
  }
  if (desired !== null && typeof desired === "object") {
    if (live === null || typeof live !== "object" || Array.isArray(live)) return false;
    const liveObject = live as Record<string, unknown>;
    return Object.entries(desired).every(([key, value]) =>
      contains(liveObject[key], value, inResources || QUANTITY_KEYS.has(key)),
    );
  }
  if (inResources && typeof desired === "string" && typeof live === "string") {
    const [a, b] = [quantityValue(desired), quantityValue(live)];
    if (a !== undefined && b !== undefined) return Math.abs(a - b) <= Math.abs(a) * 1e-12;
  }
  return live === desired;
}

import type { V1OwnerReference } from "@kubernetes/client-node";
import { createHash } from "node:crypto";
import { MANAGED_BY_LABEL, OPERATOR_NAME, type Owner } from "../api/objects.js";
import { REPOSITORY_KIND, type DynamoKserveModel } from "../api/v1alpha1.js";

export const MODEL_LABEL = "dynamokserve.dev/model";
export const REPOSITORY_LABEL = "dynamokserve.dev/repository";
export { MANAGED_BY_LABEL };

/** Where the model's configuration is mounted in data-plane pods (the model repository). */
export const MODEL_REPOSITORY_PATH = "/models";
/** Where spec.modelFiles is mounted, under the model's name (the data plane's --model-files-root). */
export const MODEL_FILES_ROOT = "/model-files";
/** Where a DynamoKserveRepository's PersistentVolumeClaim (a Triton model repository) is mounted. */
export const CLAIM_REPOSITORY_PATH = "/repository";

/** The label naming an owned object's owner: one key per owning kind, so selectors never overlap. */
export const ownerLabel = (owner: Owner): string => (owner.kind === REPOSITORY_KIND ? REPOSITORY_LABEL : MODEL_LABEL);

/**
 * The label a data plane's Service selects when it scales to zero: on its data-plane pods and
 * on its activator's, which must never carry the pod selector (ownerLabel) the Deployment,
 * its disruption budget, the autoscaler and the InferencePool select by.
 */
export const serviceLabel = (owner: Owner): string => `${ownerLabel(owner)}-service`;

export interface OwnedNames {
  readonly deployment: string;
  readonly service: string;
  readonly configMap: string;
  /** tls.mode SelfSigned: the model's CA, and the serving certificate it signs. */
  readonly caSecret: string;
  readonly tlsSecret: string;
}

/** Names of the objects the DynamoKserveModel called `name` owns. */
export function ownedNames(name: string): OwnedNames {
  return {
    deployment: name,
    service: name,
    configMap: `${name}-model-config`,
    caSecret: `${name}-ca`,
    tlsSecret: `${name}-tls`,
  };
}

export const objectNames = (model: DynamoKserveModel): OwnedNames => ownedNames(model.metadata.name);

/** Labels on every owned object and on the data-plane pods. */
export function labelsFor(owner: Owner): Record<string, string> {
  return {
    "app.kubernetes.io/name": "dynamo-kserve-dataplane",
    "app.kubernetes.io/instance": owner.metadata.name,
    [MANAGED_BY_LABEL]: OPERATOR_NAME,
    [ownerLabel(owner)]: owner.metadata.name,
  };
}

/** The pod selector: one label, so it never needs to change (Deployment selectors are immutable). */
export function selectorFor(owner: Owner): Record<string, string> {
  return { [ownerLabel(owner)]: owner.metadata.name };
}

/** The pod selector as a label-selector string: the scale subresource's status.selector (HPA, KEDA). */
export function selectorTextFor(owner: Owner): string {
  return Object.entries(selectorFor(owner))
    .map(([key, value]) => `${key}=${value}`)
    .join(",");
}

/** Makes an owned object garbage-collected with its owner. */
export function ownerReference(owner: Owner): V1OwnerReference {
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The model name clients use: spec.modelName, else the object's name. */
export function servedModelName(model: {
  readonly metadata: { readonly name: string };
  readonly spec: { readonly modelName?: string };
}): string {
  return model.spec.modelName ?? model.metadata.name;
}

/** Metadata of an owned object: its name and namespace, the owner's labels, owned by the owner. */
export function ownedMetadata(owner: Owner, name: string) {
  return {
    name,
    namespace: owner.metadata.namespace,
    labels: labelsFor(owner),
    ownerReferences: [ownerReference(owner)],
  };
}

/**
 * `<base>-<suffix>`, shortened with a hash of `base` when it would be longer than a Service
 * name may be (63 characters): two long bases that share a prefix still get two names.
 */
export function suffixedName(base: string, suffix: string): string {
  const name = `${base}-${suffix}`;
  if (name.length <= 63) return name;
  const hash = createHash("sha256").update(base).digest("hex").slice(0, 8);
  return `${base.slice(0, 63 - suffix.length - 2 - hash.length).replace(/-+$/, "")}-${hash}-${suffix}`;
}

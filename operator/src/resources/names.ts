import type { V1OwnerReference } from "@kubernetes/client-node";
import { createHash } from "node:crypto";
import { MANAGED_BY_LABEL, OPERATOR_NAME, type Owner } from "../api/objects.js";
import { REPOSITORY_KIND, type DynamoKserveModel } from "../api/v1alpha1.js";

/** The operator's label keys (a user's pod labels may not use it: they select the pods). */
export const OPERATOR_LABEL_PREFIX = "dynamokserve.dev/";
export const MODEL_LABEL = "dynamokserve.dev/model";
export const REPOSITORY_LABEL = "dynamokserve.dev/repository";
/** On a model's pods: which variant they are (`stable`, `canary`); Prometheus keeps it as a target label. */
export const VARIANT_LABEL = "dynamokserve.dev/variant";
/**
 * On a canary's pods, naming its model: their selector. They never carry the model's own label
 * (MODEL_LABEL), which the stable Deployment (immutably), its disruption budget, its autoscaler
 * and the InferencePool select by.
 */
export const CANARY_OF_LABEL = "dynamokserve.dev/canary-of";

/** A model's two variants (spec.canary): the spec itself, and the canary beside it. */
export type Variant = "stable" | "canary";
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

/**
 * Names of the objects the DynamoKserveModel called `name` owns, for one variant: the canary's
 * Deployment, Service and ConfigMap are `<name>-canary…`; the Secrets are the model's, shared.
 */
export function ownedNames(name: string, variant: Variant = "stable"): OwnedNames {
  const base = variant === "canary" ? suffixedName(name, "canary") : name;
  return {
    deployment: base,
    service: base,
    configMap: `${base}-model-config`,
    caSecret: `${name}-ca`,
    tlsSecret: `${name}-tls`,
  };
}

export const objectNames = (model: DynamoKserveModel, variant: Variant = "stable"): OwnedNames =>
  ownedNames(model.metadata.name, variant);

/** Labels on every owned object and on the data-plane pods. */
export function labelsFor(owner: Owner): Record<string, string> {
  return {
    "app.kubernetes.io/name": "dynamo-kserve-dataplane",
    "app.kubernetes.io/instance": owner.metadata.name,
    [MANAGED_BY_LABEL]: OPERATOR_NAME,
    [ownerLabel(owner)]: owner.metadata.name,
  };
}

/**
 * The pod selector: one label, so it never needs to change (Deployment selectors are
 * immutable); a canary's pods are selected by the label naming the model they are a canary of.
 */
export function selectorFor(owner: Owner, variant: Variant = "stable"): Record<string, string> {
  return variant === "canary"
    ? { [CANARY_OF_LABEL]: owner.metadata.name }
    : { [ownerLabel(owner)]: owner.metadata.name };
}

/**
 * The labels of an owner's data-plane pods: the owned objects' labels, and with a variant (a
 * model's pods) the variant's; a canary's pods trade the owner's label for their selector.
 */
export function podLabelsFor(owner: Owner, variant: Variant | undefined): Record<string, string> {
  if (variant === undefined) return labelsFor(owner);
  const { [ownerLabel(owner)]: _owner, ...shared } = labelsFor(owner);
  return { ...shared, ...selectorFor(owner, variant), [VARIANT_LABEL]: variant };
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

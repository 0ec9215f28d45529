import type { V1PolicyRule, V1Role, V1RoleBinding, V1ServiceAccount } from "@kubernetes/client-node";
import type { Owner } from "../api/objects.js";
import type { OwnedKind } from "../kube/owned.js";
import { ownedMetadata } from "./names.js";

/**
 * The identity of a pod the operator runs beside a data plane (the activator, a pool's endpoint
 * picker): a ServiceAccount, a Role with exactly the rules it needs in the owner's namespace,
 * and the RoleBinding between them, all of one name. Pure builders.
 */

export const SERVICE_ACCOUNT_KIND: OwnedKind = { apiVersion: "v1", kind: "ServiceAccount", plural: "serviceaccounts" };
export const ROLE_KIND: OwnedKind = { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", plural: "roles" };
export const ROLE_BINDING_KIND: OwnedKind = {
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind: "RoleBinding",
  plural: "rolebindings",
};

/** A ServiceAccount whose token is mounted only where the pod asks for it. */
export function identityServiceAccount(owner: Owner, name: string): V1ServiceAccount {
  return {
    apiVersion: SERVICE_ACCOUNT_KIND.apiVersion,
    kind: SERVICE_ACCOUNT_KIND.kind,
    metadata: ownedMetadata(owner, name),
    automountServiceAccountToken: false,
  };
}

export function identityRole(owner: Owner, name: string, rules: V1PolicyRule[]): V1Role {
  return { apiVersion: ROLE_KIND.apiVersion, kind: ROLE_KIND.kind, metadata: ownedMetadata(owner, name), rules };
}

/** Binds the Role `name` to the ServiceAccount `name`. */
export function identityRoleBinding(owner: Owner, name: string): V1RoleBinding {
  return {
    apiVersion: ROLE_BINDING_KIND.apiVersion,
    kind: ROLE_BINDING_KIND.kind,
    metadata: ownedMetadata(owner, name),
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
    subjects: [{ kind: "ServiceAccount", name, namespace: owner.metadata.namespace }],
  };
}

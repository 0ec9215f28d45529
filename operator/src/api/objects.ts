/**
 * What every object the operator writes has in common, whatever kind: who wrote it, who
 * owns it, and the Events it records.
 */

/** The operator's name as Kubernetes sees it: field manager, event source, managed-by label. */
export const OPERATOR_NAME = "dynamo-kserve-operator";

/** The label every object the operator makes carries (value OPERATOR_NAME): what its caches of owned kinds select. */
export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";

/** An object of ours that owns what the operator makes for it: a DynamoKserveModel or a DynamoKserveRepository, or an InferencePool. */
export interface Owner {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace: string; readonly uid: string };
}

/** A condition that changed status: worth a Kubernetes Event. */
export interface Transition {
  readonly type: "Normal" | "Warning";
  readonly reason: string;
  readonly message: string;
}

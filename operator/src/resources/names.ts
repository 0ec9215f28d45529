import type { V1OwnerReference } from "@kubernetes/client-node";
import { API_VERSION, KIND, type DynamoKserveModel } from "../api/v1alpha1.js";

/** The operator's name as Kubernetes sees it: field manager, event source, managed-by label. */
export const OPERATOR_NAME = "dynamo-kserve-operator";

export const MODEL_LABEL = "dynamokserve.dev/model";
export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";

/** Where the model's configuration is mounted in data-plane pods (the model repository). */
export const MODEL_REPOSITORY_PATH = "/models";
/** Where spec.modelFiles is mounted, under the model's name (the data plane's --model-files-root). */
export const MODEL_FILES_ROOT = "/model-files";

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
export function labelsFor(model: DynamoKserveModel): Record<string, string> {
  return {
    "app.kubernetes.io/name": "dynamo-kserve-dataplane",
    "app.kubernetes.io/instance": model.metadata.name,
    [MANAGED_BY_LABEL]: OPERATOR_NAME,
    [MODEL_LABEL]: model.metadata.name,
  };
}

/** The pod selector: one label, so it never needs to change (Deployment selectors are immutable). */
export function selectorFor(model: DynamoKserveModel): Record<string, string> {
  return { [MODEL_LABEL]: model.metadata.name };
}

/** Makes an owned object garbage-collected with its DynamoKserveModel. */
export function ownerReference(model: DynamoKserveModel): V1OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    name: model.metadata.name,
    uid: model.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The model name clients use: spec.modelName, else the object's name. */
export function servedModelName(model: DynamoKserveModel): string {
  return model.spec.modelName ?? model.metadata.name;
}

/** Metadata of an object a model owns: its name and namespace, the model's labels, owned by the model. */
export function ownedMetadata(model: DynamoKserveModel, name: string) {
  return {
    name,
    namespace: model.metadata.namespace,
    labels: labelsFor(model),
    ownerReferences: [ownerReference(model)],
  };
}

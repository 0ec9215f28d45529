import type { V1ObjectMeta } from "@kubernetes/client-node";
import {
  GROUP,
  KIND,
  PLURAL,
  SPEC_DEFAULTS,
  VERSION,
  type DynamoKserveModelSpec,
  type DynamoKserveModelStatus,
} from "./v1alpha1.generated.js";
import {
  KIND as REPOSITORY_KIND,
  PLURAL as REPOSITORY_PLURAL,
  SPEC_DEFAULTS as REPOSITORY_SPEC_DEFAULTS,
  type DynamoKserveRepositorySpec,
  type DynamoKserveRepositoryStatus,
} from "./repository.v1alpha1.generated.js";

export { GROUP, KIND, PLURAL, SPEC_DEFAULTS, VERSION, type DynamoKserveModelSpec, type DynamoKserveModelStatus };
export {
  REPOSITORY_KIND,
  REPOSITORY_PLURAL,
  REPOSITORY_SPEC_DEFAULTS,
  type DynamoKserveRepositorySpec,
  type DynamoKserveRepositoryStatus,
};

export const API_VERSION = `${GROUP}/${VERSION}`;

/** One of this API's objects as read from the API server: named, namespaced, with a uid. */
interface ApiObject<Kind extends string, Spec, Status> {
  apiVersion: typeof API_VERSION;
  kind: Kind;
  metadata: V1ObjectMeta & { name: string; namespace: string; uid: string };
  spec: Spec;
  status?: Status;
}

export type DynamoKserveModel = ApiObject<typeof KIND, DynamoKserveModelSpec, DynamoKserveModelStatus>;

export type Condition = NonNullable<DynamoKserveModelStatus["conditions"]>[number];

/** What a condition says (its type, generation and times are added where it is set). */
export type ConditionValue = Pick<Condition, "status" | "reason" | "message">;

/** The condition types this operator sets on a DynamoKserveModel. */
export const CONDITION_TYPES = [
  "Ready",
  "ConfigValid",
  "Available",
  "Degraded",
  "InferencePoolReady",
  "RoutesReady",
  "CanaryReady",
  "MonitoringReady",
  "CredentialsReady",
  "ModelFilesReady",
  "AutoscalerReady",
  "ScaledToZero",
] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];

export type DynamoKserveRepository = ApiObject<
  typeof REPOSITORY_KIND,
  DynamoKserveRepositorySpec,
  DynamoKserveRepositoryStatus
>;

export type RepositoryModelStatus = NonNullable<DynamoKserveRepositoryStatus["models"]>[number];

/** The condition types this operator sets on a DynamoKserveRepository. */
export const REPOSITORY_CONDITION_TYPES = [
  "Ready",
  "Available",
  "ModelsReady",
  "InferencePoolReady",
  "ModelFilesReady",
  "MonitoringReady",
  "AutoscalerReady",
  "ScaledToZero",
] as const;
export type RepositoryConditionType = (typeof REPOSITORY_CONDITION_TYPES)[number];

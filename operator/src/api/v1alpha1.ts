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

export { GROUP, KIND, PLURAL, SPEC_DEFAULTS, VERSION, type DynamoKserveModelSpec, type DynamoKserveModelStatus };

export const API_VERSION = `${GROUP}/${VERSION}`;

/** A DynamoKserveModel as read from the API server. */
export interface DynamoKserveModel {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: V1ObjectMeta & { name: string; namespace: string; uid: string };
  spec: DynamoKserveModelSpec;
  status?: DynamoKserveModelStatus;
}

export type Condition = NonNullable<DynamoKserveModelStatus["conditions"]>[number];

/** The condition types this operator sets on a DynamoKserveModel. */
export const CONDITION_TYPES = [
  "Ready",
  "ConfigValid",
  "Available",
  "Degraded",
  "InferencePoolReady",
  "MonitoringReady",
  "CredentialsReady",
] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];

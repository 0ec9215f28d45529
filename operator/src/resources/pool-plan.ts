import type { KubernetesObject, V1Deployment } from "@kubernetes/client-node";
import { objectOf, type OwnedKind, type PlanGroup, type PlanOutcomes } from "../kube/owned.js";
import { DEPLOYMENT_KIND, type BuildSettings } from "./dataplane-pods.js";
import {
  ENDPOINT_PICKER_OWNS,
  endpointPickerName,
  endpointPickerObjects,
  managedPicker,
  managedPickerRef,
} from "./endpoint-picker.js";
import {
  desiredInferenceObjective,
  desiredInferencePool,
  INFERENCE_OBJECTIVE_KIND,
  INFERENCE_POOL_KIND,
  poolServiceName,
  poolTarget,
  userPickerRef,
  type PoolOwner,
} from "./inference-pool.js";
import type { ObjectiveOutcome, PickerOutcome, PoolOutcome } from "./status.js";

/**
 * The pool's group of an owner's plan (spec.inferencePool, either kind): the endpoint picker
 * the operator runs for it, if asked, then the InferencePool pointing at it. One group, so a
 * picker object whose name somebody else holds stops the pool: it is never pointed at a
 * picker that is not ours. Without the InferencePool CRD nothing is written. Pure.
 */

/** The kinds the pool's group writes. */
export const POOL_PLAN_OWNS: readonly OwnedKind[] = [
  ...ENDPOINT_PICKER_OWNS,
  INFERENCE_POOL_KIND,
  INFERENCE_OBJECTIVE_KIND,
];

export interface PoolPlanInputs {
  /** Whether the InferencePool CRD is installed. */
  readonly installed: boolean;
  /**
   * Whether an InferencePool of the owner's name is somebody else's: then its picker is not
   * written either (it would pick for a pool that is not ours), and the pool's entry says NameTaken.
   */
  readonly poolTakenByAnother: boolean;
  /** Whether it knows spec.appProtocol. */
  readonly appProtocolSupported: boolean;
  readonly settings: BuildSettings;
}

export function poolPlan(owner: PoolOwner, inputs: PoolPlanInputs): PlanGroup {
  if (owner.spec.inferencePool === undefined) return [];
  const managed = managedPicker(owner) !== undefined;
  const pool = desiredInferencePool(owner, {
    appProtocolSupported: inputs.appProtocolSupported,
    endpointPickerRef: managed ? managedPickerRef(owner) : userPickerRef(owner),
  });
  // Without the pool's CRD its picker would pick for nothing: the pool's entry alone says CRDNotInstalled.
  const picker =
    managed && inputs.installed && !inputs.poolTakenByAnother ? endpointPickerObjects(owner, inputs.settings) : [];
  const objective =
    owner.spec.inferencePool.objective !== undefined ? [{ apply: desiredInferenceObjective(owner) }] : [];
  return [...picker.map((object) => ({ apply: object })), { apply: pool }, ...objective];
}

/** What became of the pool's group (undefined while the owner asks for no pool, or nothing was applied). */
export function poolOutcome(
  owner: PoolOwner,
  group: PlanGroup,
  outcomes: PlanOutcomes,
  appProtocolSupported: boolean,
): PoolOutcome | undefined {
  const { name } = owner.metadata;
  const stopped = outcomes.stopped(group);
  if (stopped !== undefined) return { state: stopped.reason, name, message: stopped.message };
  const outcome = outcomes.of(INFERENCE_POOL_KIND, name);
  switch (outcome?.state) {
    case "CRDNotInstalled":
      return { state: "CRDNotInstalled" };
    case "Applied": {
      const service = poolServiceName(name);
      const { appProtocol } = poolTarget(owner);
      const endpointPicker = pickerOutcome(owner, outcomes);
      const objective = objectiveOutcome(owner, outcomes);
      const extras = {
        ...(endpointPicker !== undefined ? { endpointPicker } : {}),
        ...(objective !== undefined ? { objective } : {}),
      };
      return appProtocolSupported
        ? { state: "Created", name, appProtocol, service, ...extras }
        : { state: "CreatedWithoutAppProtocol", name, appProtocol, service, ...extras };
    }
    default:
      return undefined;
  }
}

/** The InferenceObjective as applied (undefined when none is asked for). */
function objectiveOutcome(owner: PoolOwner, outcomes: PlanOutcomes): ObjectiveOutcome | undefined {
  const objective = owner.spec.inferencePool?.objective;
  if (objective === undefined) return undefined;
  const outcome = outcomes.of(INFERENCE_OBJECTIVE_KIND, owner.metadata.name);
  if (outcome?.state === "CRDNotInstalled") return { state: "CRDNotInstalled" };
  return { state: "Written", name: owner.metadata.name, priority: objective.priority ?? 0 };
}

/** The managed picker as applied: its Deployment's image and whether a pod of it is available. */
function pickerOutcome(owner: PoolOwner, outcomes: PlanOutcomes): PickerOutcome | undefined {
  if (managedPicker(owner) === undefined) return undefined;
  const name = endpointPickerName(owner.metadata.name);
  const deployment = objectOf<V1Deployment & KubernetesObject>(outcomes.of(DEPLOYMENT_KIND, name));
  return {
    name,
    image: deployment?.spec?.template.spec?.containers[0]?.image ?? "",
    available: (deployment?.status?.availableReplicas ?? 0) > 0,
  };
}

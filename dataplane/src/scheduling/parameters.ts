import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../lib/errors.js";
import type { QueuePolicy, Scheduling } from "../../../lib/model-repository/scheduling.js";

/**
 * A request's `priority` and `timeout` parameters (Triton's: ModelInferRequest.parameters,
 * or the REST body's `parameters`, which arrive as the same parameters), read for a model
 * the data plane schedules. As Triton, they are the scheduler's, not the model's: they are
 * taken out of the parameters the engine sees.
 */

const PRIORITY = "priority";
const TIMEOUT = "timeout";

/** Where a request waits: its priority level and the queue timeout it asked for. */
export interface QueuePlace {
  /** 1 the highest; 0 when the model has no priority levels (one queue). */
  readonly level: number;
  /** The request's `timeout` parameter in microseconds; 0: none given. */
  readonly timeoutUs: number;
}

/** A request that names neither: the default level, the policy's timeout. */
export const defaultPlace = (scheduling: Scheduling): QueuePlace => ({
  level: scheduling.dynamicBatching?.defaultPriorityLevel ?? 0,
  timeoutUs: 0,
});

/** Whether the request names a priority or a timeout (the rest of the time nothing is read). */
export function namesQueuePlace(parameters: Readonly<Record<string, InferParameter>>): boolean {
  return parameters[PRIORITY] !== undefined || parameters[TIMEOUT] !== undefined;
}

/** The parameters without `priority` and `timeout`, as the engine sees them. */
export function withoutQueueParameters(
  parameters: Readonly<Record<string, InferParameter>>,
): Record<string, InferParameter> {
  const { [PRIORITY]: _priority, [TIMEOUT]: _timeout, ...rest } = parameters;
  return rest;
}

/**
 * The level and timeout a request asks for, checked against the model's scheduling:
 * priority 0 is the default level, 1..priority_levels a level; a timeout only where the
 * level's queue policy allows it to be overridden. Anything else is INVALID_ARGUMENT
 * naming the parameter and what the config would have to say.
 */
export function queuePlaceOf(
  model: string,
  scheduling: Scheduling,
  parameters: Readonly<Record<string, InferParameter>>,
): QueuePlace {
  if (scheduling.sequenceBatching !== undefined) return sequencePlaceOf(model, parameters);
  const batching = scheduling.dynamicBatching;
  const levels = batching?.priorityLevels ?? 0;
  const priority = parameters[PRIORITY];
  let level = batching?.defaultPriorityLevel ?? 0;
  if (priority !== undefined) {
    const asked = wholeNumber(model, PRIORITY, priority);
    if (asked > BigInt(levels)) {
      const known =
        levels === 0
          ? "it has no priority levels (dynamic_batching.priority_levels): send 0 or none"
          : `its levels are 1..${levels} (dynamic_batching.priority_levels), 0 for the default level ${level}`;
      throw invalidArgument(`model '${model}': parameters["${PRIORITY}"] ${asked} is not a priority level: ${known}`);
    }
    if (asked > 0n) level = Number(asked);
  }
  const timeout = parameters[TIMEOUT];
  let timeoutUs = 0;
  if (timeout !== undefined) {
    const asked = wholeNumber(model, TIMEOUT, timeout);
    const policy =
      batching === undefined ? undefined : policyOf(batching.queuePolicies, batching.defaultQueuePolicy, level);
    if (policy?.allowTimeoutOverride !== true) {
      const field =
        batching === undefined
          ? "dynamic_batching { default_queue_policy { allow_timeout_override: true } }"
          : batching.queuePolicies.has(level)
            ? `dynamic_batching.priority_queue_policy[${level}].allow_timeout_override: true`
            : "dynamic_batching.default_queue_policy.allow_timeout_override: true";
      throw invalidArgument(
        `model '${model}': parameters["${TIMEOUT}"] is not allowed: its queue policy does not let a request set its own timeout; set ${field}`,
      );
    }
    // Microseconds beyond a safe integer are past any timeout a queue keeps (a day): none shorter.
    timeoutUs = asked > BigInt(Number.MAX_SAFE_INTEGER) ? 0 : Number(asked);
  }
  return { level, timeoutUs };
}

/**
 * A sequence model's place, as Triton's sequence batcher reads it: one level (`priority` is
 * ignored: the batcher has no levels) and the request's `timeout`, which bounds how long
 * its sequence may wait in the backlog for a slot (no queue policy to allow it).
 */
function sequencePlaceOf(model: string, parameters: Readonly<Record<string, InferParameter>>): QueuePlace {
  const priority = parameters[PRIORITY];
  // Its value is not read, its type is: a priority that is no whole number is refused whatever the model.
  if (priority !== undefined) wholeNumber(model, PRIORITY, priority);
  const timeout = parameters[TIMEOUT];
  if (timeout === undefined) return { level: 0, timeoutUs: 0 };
  const asked = wholeNumber(model, TIMEOUT, timeout);
  return { level: 0, timeoutUs: asked > BigInt(Number.MAX_SAFE_INTEGER) ? 0 : Number(asked) };
}

/** The queue policy of a level: its own (priority_queue_policy), else the default one. */
export function policyOf(
  policies: ReadonlyMap<number, QueuePolicy>,
  defaultPolicy: QueuePolicy,
  level: number,
): QueuePolicy {
  return policies.get(level) ?? defaultPolicy;
}

/**
 * How long a request may wait in a queue of `policy`, in microseconds (0: no bound), by
 * Triton's rule (PolicyQueue::Enqueue): a request's timeout applies only where the policy
 * allows an override, and only when it is shorter than the policy's own, which 0 (no bound)
 * never is.
 */
export function queueTimeoutUs(policy: QueuePolicy, requestedUs: number): number {
  if (policy.allowTimeoutOverride && requestedUs !== 0 && requestedUs < policy.defaultTimeoutUs) return requestedUs;
  return policy.defaultTimeoutUs;
}

function wholeNumber(model: string, name: string, parameter: InferParameter): bigint {
  const choice = parameter.parameterChoice;
  if ((choice?.$case === "int64Param" || choice?.$case === "uint64Param") && choice.value >= 0n) return choice.value;
  throw invalidArgument(
    `model '${model}': parameters["${name}"] must be a whole number, 0 or more (int64_param or uint64_param)`,
  );
}

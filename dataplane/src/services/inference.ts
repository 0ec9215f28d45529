import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { EngineResponse } from "../engines/engine.js";
import {
  abortedError,
  DataPlaneError,
  errorDetail,
  internal,
  type ErrorKind,
  invalidArgument,
  unimplemented,
} from "../errors.js";
import type { InFlight } from "../models/in-flight.js";
import type { ModelLease, ModelRegistry } from "../models/registry.js";
import { nowNs } from "../models/statistics.js";
import { boolParameter, isTrue } from "../tensors/parameters.js";
import type { FrontendMetrics, InferenceEndpoint, RequestObservation, RequestType } from "../metrics/frontend.js";
import type { RequestTracing } from "../tracing/tracing.js";
import type { RequestLifetime } from "./signal.js";
import { decodeInputs, encodeOutputs } from "../tensors/request.js";

/**
 * The one inference pipeline behind ModelInfer and ModelStreamInfer: resolve the model,
 * decode and check the inputs against its config, run its engine, encode each response
 * and keep the model's statistics.
 */

/** Request parameters that steer the protocol and are not echoed back. */
const ENABLE_EMPTY_FINAL = "triton_enable_empty_final_response";
const FINAL_RESPONSE = "triton_final_response";

/** What the inference RPCs share: the models and the metrics they report to. */
export interface InferenceContext {
  readonly registry: ModelRegistry;
  readonly metrics: FrontendMetrics;
  readonly logger: Logger;
  /** Every inference request running in this server (shutdown waits for them). */
  readonly active: InFlight;
  readonly tracing: RequestTracing;
}

/** Failures the caller caused (logged at debug); the others are the data plane's or an upstream's (warn). */
const CLIENT_ERRORS = new Set<ErrorKind>([
  "InvalidArgument",
  "NotFound",
  "Cancelled",
  "DeadlineExceeded",
  "FailedPrecondition",
  "Unimplemented",
  "ResourceExhausted",
]);

export async function* runInference(
  { registry, metrics, logger, active, tracing }: InferenceContext,
  request: ModelInferRequest,
  endpoint: InferenceEndpoint,
  { signal, deadline, headers }: RequestLifetime,
): AsyncGenerator<ModelInferResponse> {
  const received = nowNs();
  const mode: RequestType = endpoint === "ModelInfer" ? "unary" : "stream";
  const span = tracing.start(endpoint, headers, {
    "rpc.system": "grpc",
    "rpc.method": endpoint,
    "model.name": request.modelName,
    "model.version": request.modelVersion,
    "request.id": request.id,
  });
  // What this request holds — its model's engine, a place in the server's in-flight
  // count and in the metrics — is taken here and given back in `finally`, whatever fails.
  let lease: ModelLease | undefined;
  let observation: RequestObservation | undefined;
  let outcome: "success" | "error" = "error";
  let failure: unknown;
  let responses = 0;
  try {
    lease = registry.acquire(request.modelName, request.modelVersion);
    active.begin();
    const { model, version, statistics } = lease;
    const { spec, engine } = model;
    observation = metrics.start(spec.name, endpoint, mode);
    if (mode === "unary" && spec.decoupled) {
      throw unimplemented(
        `model '${spec.name}' is decoupled (model_transaction_policy.decoupled); use the ModelStreamInfer RPC`,
      );
    }
    const started = nowNs();
    let computeInferNs = 0n;
    let computeOutputNs = 0n;
    const inputs = decodeInputs(request, {
      modelName: spec.name,
      inputs: spec.declaresTensors ? spec.inputs : undefined,
      maxBatchSize: spec.maxBatchSize,
    });
    const requestedOutputs = new Set(request.outputs.map((output) => output.name));
    for (const name of requestedOutputs) {
      if (spec.declaresTensors && !spec.outputs.some((output) => output.name === name)) {
        const known = spec.outputs.map((output) => output.name).join(", ");
        throw invalidArgument(
          `model '${spec.name}': unexpected requested output '${name}'; the model's outputs are: ${known}`,
        );
      }
    }
    const decoded = nowNs();
    const echoed = echoedParameters(request.parameters);
    const streamFlags = mode === "stream";
    const engineRequest = {
      id: request.id,
      version,
      parameters: request.parameters,
      inputs: inputs.tensors,
      requestedOutputs,
    };
    const responsesOf = engine.infer(engineRequest, { signal, deadline, traceHeaders: span.headers });
    const results = responsesOf[Symbol.asyncIterator]();
    let mark = nowNs();
    for (;;) {
      const next = await results.next();
      const produced = nowNs();
      computeInferNs += produced - mark;
      if (next.done === true) break;
      if (mode === "unary" && responses > 0) {
        throw internal(`model '${spec.name}' produced more than one response for a unary request`);
      }
      responses++;
      const finalFlag: Record<string, InferParameter> = streamFlags
        ? { [FINAL_RESPONSE]: boolParameter(!spec.decoupled) }
        : {};
      const response = encodeResponse(request, version, next.value, inputs.usedRaw, { ...echoed, ...finalFlag });
      mark = nowNs();
      computeOutputNs += mark - produced;
      observation.response();
      yield response;
      mark = nowNs();
    }
    if (mode === "unary" && responses === 0) {
      throw internal(`model '${spec.name}' produced no response`);
    }
    if (streamFlags && spec.decoupled && isTrue(request.parameters[ENABLE_EMPTY_FINAL])) {
      yield encodeResponse(request, version, { outputs: [] }, inputs.usedRaw, {
        ...echoed,
        [FINAL_RESPONSE]: boolParameter(true),
      });
    }
    statistics.recordSuccess(nowNs() - received, inputs.batchSize, {
      queueNs: started - received,
      computeInputNs: decoded - started,
      computeInferNs,
      computeOutputNs,
    });
    outcome = "success";
  } catch (error) {
    lease?.statistics.recordFailure(nowNs() - received);
    failure = signal.aborted && !(error instanceof DataPlaneError) ? abortedError(signal) : error;
    throw failure;
  } finally {
    observation?.end(outcome);
    span.end(failure);
    // A request for a model this data plane does not serve held nothing and is not logged.
    if (lease !== undefined) {
      active.end();
      lease.release();
      logRequest(logger, { request, endpoint, version: lease.version, responses, received, failure });
    }
  }
}

/**
 * One line per finished request, with its id (the request's `id`, or one made up) so a
 * user can find it: debug for successes and the caller's mistakes, warn for the rest.
 */
function logRequest(
  logger: Logger,
  done: {
    request: ModelInferRequest;
    endpoint: InferenceEndpoint;
    version: string;
    responses: number;
    received: bigint;
    failure: unknown;
  },
): void {
  const kind =
    done.failure instanceof DataPlaneError ? done.failure.kind : done.failure === undefined ? undefined : "Internal";
  const level = kind === undefined || CLIENT_ERRORS.has(kind) ? "debug" : "warn";
  if (!logger.isLevelEnabled(level)) return;
  logger[level](
    {
      requestId: done.request.id || randomUUID(),
      model: done.request.modelName,
      version: done.version,
      rpc: done.endpoint,
      responses: done.responses,
      ms: Number(nowNs() - done.received) / 1e6,
      ...(done.failure === undefined ? {} : { err: errorDetail(done.failure), kind }),
    },
    done.failure === undefined ? "request served" : "request failed",
  );
}

function encodeResponse(
  request: ModelInferRequest,
  version: string,
  response: EngineResponse,
  preferRaw: boolean,
  parameters: Record<string, InferParameter>,
): ModelInferResponse {
  const { outputs, rawOutputContents } = encodeOutputs(response.outputs, preferRaw);
  return {
    modelName: request.modelName,
    modelVersion: version,
    id: request.id,
    parameters: { ...parameters, ...(response.parameters ?? {}) },
    outputs,
    rawOutputContents,
  };
}

function echoedParameters(parameters: Record<string, InferParameter>): Record<string, InferParameter> {
  return Object.fromEntries(Object.entries(parameters).filter(([key]) => key !== ENABLE_EMPTY_FINAL));
}

import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { EngineResponse } from "../engines/engine.js";
import { internal, invalidArgument } from "../../../lib/errors.js";
import type { ModelSpec } from "../../../lib/model-repository/spec.js";
import { boolParameter, isTrue, sequenceOf } from "../tensors/parameters.js";
import { fromCharacterCodes, toCharacterCodes } from "./character-codes.js";
import { ResponseGatherer } from "./gather.js";
import { decodeInputs, encodeOutputs, type DecodedInputs } from "../tensors/request.js";
import { tensorBytes } from "../tensors/tensor.js";
import type { RequestLifetime } from "./lifetime.js";
import { RequestScope, type Entry, type InferenceContext } from "./request-scope.js";
import { withModel, type InferResponseOrEncoded } from "../tensors/wire.js";
import { withoutQueueParameters } from "../scheduling/parameters.js";
import { resolveSharedMemory, writeOutputs } from "../shared-memory/tensors.js";

export type { Entry, InferenceContext } from "./request-scope.js";

/**
 * The one inference pipeline behind every way in (ModelInfer, ModelStreamInfer,
 * ModelInferStream, and the HTTP front door's infer, generate and OpenAI routes):
 * admit (resolve the model and version, refuse what cannot be served), decode and check
 * the inputs against its config, run its engine (through the version's scheduler for a
 * model the data plane schedules: queued, batched, on a free instance), encode each response. What the request
 * holds and reports (metrics, in-flight count, span, statistics, log line) is its
 * RequestScope's.
 */

/** Request and response parameters of Triton's decoupled protocol. */
const ENABLE_EMPTY_FINAL = "triton_enable_empty_final_response";
const FINAL_RESPONSE = "triton_final_response";

export function runInference(
  context: InferenceContext,
  received: ModelInferRequest,
  entry: Entry,
  lifetime: RequestLifetime,
): AsyncGenerator<ModelInferResponse>;
/**
 * `encoded`: the request as it came on the wire (the gRPC inference RPCs), so a forwarded
 * model that declares no tensors passes it on and its upstream's replies come back as they
 * are, never decoded or re-encoded (one copy at most, when the model's name differs).
 */
export function runInference(
  context: InferenceContext,
  received: ModelInferRequest,
  entry: Entry,
  lifetime: RequestLifetime,
  encoded: Uint8Array | undefined,
): AsyncGenerator<InferResponseOrEncoded>;
export async function* runInference(
  context: InferenceContext,
  received: ModelInferRequest,
  entry: Entry,
  lifetime: RequestLifetime,
  encoded?: Uint8Array,
): AsyncGenerator<InferResponseOrEncoded> {
  const scope = new RequestScope(context, received, entry, lifetime);
  try {
    const { spec, engine, version, scheduling, namedQueuePlace } = scope.admit();
    // Inputs in system shared memory read, outputs' regions leased until the scope closes.
    const resolved = await resolveSharedMemory(received, context.sharedMemory, context);
    scope.holds(resolved.release);
    const inRegions = resolved.outputs;
    // MAX's clients' prompt form: read as text_input, answered in character codes.
    const rewritten = fromCharacterCodes(resolved.request, spec);
    const request = rewritten ?? resolved.request;
    const answer = rewritten === undefined ? (response: ModelInferResponse) => response : toCharacterCodes;
    const inputs = decode(request, spec);
    scope.decoded(inputs.batchSize, tensorBytes(inputs.tensors));
    // One reply expected: a model that is not decoupled must make exactly one response.
    const single = scope.isUnary && !spec.decoupled;
    const finalFlag = (final: boolean): Record<string, InferParameter> =>
      scope.isUnary ? {} : { [FINAL_RESPONSE]: boolParameter(final) };
    // Passed through, the upstream's replies keep their own final flags: only where the
    // stream's flags are the upstream's (a decoupled model on a stream) or absent (unary).
    // Never with shared memory: the upstream gets the regions' bytes.
    const passThrough =
      encoded !== undefined &&
      rewritten === undefined &&
      resolved.request === received &&
      !spec.declaresTensors &&
      spec.decoupled !== scope.isUnary;
    const engineRequest = {
      id: request.id,
      version,
      parameters: namedQueuePlace ? withoutQueueParameters(request.parameters) : request.parameters,
      inputs: inputs.tensors,
      requestedOutputs: new Set(request.outputs.map((output) => output.name)),
      encoded: passThrough ? encoded : undefined,
    };
    const options = { signal: lifetime.signal, deadline: lifetime.deadline, traceHeaders: scope.traceHeaders };
    // A scheduled model's request queues for an execution (dataplane/src/scheduling/).
    const results =
      scheduling === undefined
        ? engine.infer(engineRequest, options)
        : scheduling.scheduler.infer({
            request: engineRequest,
            batchSize: Math.max(1, inputs.batchSize),
            place: scheduling.place,
            options,
            oneResponse: !spec.decoupled,
            // A sequence model's correlation ID and flags (INVALID_ARGUMENT for values of the wrong type).
            sequence: spec.scheduling.sequenceBatching === undefined ? undefined : sequenceOf(request.parameters),
            started: scope.executing,
          });
    // A decoupled model on a unary entry that does not gather them itself (ModelInfer on a
    // model that opts in): its responses leave as one reply, after the last.
    const gatherer =
      scope.isUnary && spec.decoupled && entry.gathersResponses !== true
        ? new ResponseGatherer(context.maxMessageSize, spec.name)
        : undefined;
    let passedThrough = false;
    for await (const produced of results) {
      scope.produced();
      // Outputs named for regions are written there before the response leaves.
      const result = inRegions.size === 0 ? produced : await writeOutputs(produced, inRegions);
      passedThrough ||= result.encoded !== undefined;
      if (single && scope.responseCount > 0) {
        throw internal(`model '${spec.name}' produced more than one response for a unary request`);
      }
      // As Triton: a response carries the engine's parameters and, on a stream, the final
      // flag; the request's own parameters are not echoed back.
      if (gatherer !== undefined) {
        gatherer.add(encodeResponse(request, version, result, {}));
        scope.encoded(responseBytes(result));
        scope.resumed();
        continue;
      }
      const response =
        result.encoded !== undefined
          ? { encoded: withModel(result.encoded, request.modelName, version) }
          : answer(encodeResponse(request, version, result, finalFlag(!spec.decoupled)));
      scope.encoded(responseBytes(result));
      yield response;
      scope.resumed();
    }
    scope.produced();
    if (gatherer !== undefined)
      yield answer(gatherer.result() ?? encodeResponse(request, version, { outputs: [] }, {}));
    if (single && scope.responseCount === 0) throw internal(`model '${spec.name}' produced no response`);
    if (!scope.isUnary && spec.decoupled && !passedThrough && isTrue(request.parameters[ENABLE_EMPTY_FINAL])) {
      yield encodeResponse(request, version, { outputs: [] }, finalFlag(true));
    }
    scope.succeed();
  } catch (error) {
    throw scope.fail(error);
  } finally {
    scope.close();
  }
}

/** What a response takes out: its tensors' bytes, or the whole message an upstream sent when it is passed through. */
function responseBytes(response: EngineResponse): number {
  return response.encoded?.byteLength ?? tensorBytes(response.outputs);
}

/** The request's inputs decoded and checked against the model's config, and its requested outputs checked. */
function decode(request: ModelInferRequest, spec: ModelSpec): DecodedInputs {
  const inputs = decodeInputs(request, {
    modelName: spec.name,
    inputs: spec.declaresTensors ? spec.inputs : undefined,
    maxBatchSize: spec.maxBatchSize,
  });
  if (spec.declaresTensors) {
    for (const { name } of request.outputs) {
      if (!spec.outputs.some((output) => output.name === name)) {
        const known = spec.outputs.map((output) => output.name).join(", ");
        throw invalidArgument(
          `model '${spec.name}': unexpected requested output '${name}'; the model's outputs are: ${known}`,
        );
      }
    }
  }
  return inputs;
}

function encodeResponse(
  request: ModelInferRequest,
  version: string,
  response: EngineResponse,
  parameters: Record<string, InferParameter>,
): ModelInferResponse {
  const { outputs, rawOutputContents } = encodeOutputs(response.outputs);
  return {
    modelName: request.modelName,
    modelVersion: version,
    id: request.id,
    parameters: { ...parameters, ...(response.parameters ?? {}) },
    outputs,
    rawOutputContents,
  };
}

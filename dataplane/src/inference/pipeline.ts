import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { EngineRequest, EngineResponse, InferOptions } from "../engines/engine.js";
import { internal, invalidArgument } from "../../../lib/errors.js";
import type { ModelSpec } from "../../../lib/model-repository/spec.js";
import { boolParameter, isTrue, sequenceOf } from "../tensors/parameters.js";
import { fromCharacterCodes, toCharacterCodes } from "./character-codes.js";
import { ResponseGatherer } from "./gather.js";
import { decodeInputs, encodeOutputs, type DecodedInputs } from "../tensors/request.js";
import { tensorBytes } from "../tensors/tensor.js";
import type { RequestLifetime } from "./lifetime.js";
import { RequestScope, type Admitted, type Entry, type InferenceContext } from "./request-scope.js";
import { withModel, type InferResponseOrEncoded } from "../tensors/wire.js";
import { withoutQueueParameters } from "../scheduling/parameters.js";
import { resolveSharedMemory, writeOutputs, type ResolvedRequest } from "../shared-memory/tensors.js";

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
export function runInference(
  context: InferenceContext,
  received: ModelInferRequest,
  entry: Entry,
  lifetime: RequestLifetime,
  encoded?: Uint8Array,
): AsyncGenerator<InferResponseOrEncoded> {
  return serve(context, entry, received, lifetime, encoded, undefined);
}

/**
 * One request's one reply, for a unary entry (ModelInfer): what `runInference` yields, with
 * the same scope calls and errors. A model that is neither decoupled nor scheduled (the
 * common case) is served without an async generator: its layers cost promises and
 * microtasks per request (design/issue-39.md §3 item 4); the others take the generator.
 */
export async function inferUnary(
  context: InferenceContext,
  received: ModelInferRequest,
  entry: Entry,
  lifetime: RequestLifetime,
  encoded: Uint8Array | undefined,
): Promise<InferResponseOrEncoded> {
  const scope = new RequestScope(context, received, entry, lifetime);
  let model: Admitted;
  try {
    model = scope.admit();
  } catch (error) {
    const failure = scope.fail(error);
    scope.close();
    throw failure;
  }
  // A scheduled or (gathered) decoupled model: the generator's path, which owns the scope from here.
  if (model.scheduling !== undefined || model.spec.decoupled) {
    return lastOf(serve(context, entry, received, lifetime, encoded, { scope, model }), model.spec);
  }
  try {
    const resolved = await resolveSharedMemory(received, context.sharedMemory, context);
    const reply = await respondOnce(scope, model, prepare(scope, model, received, resolved, lifetime, encoded));
    scope.succeed();
    return reply;
  } catch (error) {
    throw scope.fail(error);
  } finally {
    scope.close();
  }
}

/** The request after admission, ready for its engine. */
interface Prepared {
  /** The request as the engine sees it (shared memory read, character codes rewritten). */
  readonly request: ModelInferRequest;
  /** How a response is put back in the client's form (character codes, for MAX's clients). */
  readonly answer: (response: ModelInferResponse) => ModelInferResponse;
  /** Outputs named for shared-memory regions, written there before a response leaves. */
  readonly inRegions: ResolvedRequest["outputs"];
  readonly engineRequest: EngineRequest;
  readonly options: InferOptions;
  readonly batchSize: number;
}

/** Decodes and checks the inputs, and builds what the engine is given. */
function prepare(
  scope: RequestScope,
  admitted: Admitted,
  received: ModelInferRequest,
  resolved: ResolvedRequest,
  lifetime: RequestLifetime,
  encoded: Uint8Array | undefined,
): Prepared {
  const { spec, version, namedQueuePlace } = admitted;
  // Inputs in system shared memory read, outputs' regions leased until the scope closes.
  scope.holds(resolved.release);
  // MAX's clients' prompt form: read as text_input, answered in character codes.
  const rewritten = fromCharacterCodes(resolved.request, spec);
  const request = rewritten ?? resolved.request;
  const inputs = decode(request, spec);
  scope.decoded(inputs.batchSize, tensorBytes(inputs.tensors));
  // Passed through, the upstream's replies keep their own final flags: only where the
  // stream's flags are the upstream's (a decoupled model on a stream) or absent (unary).
  // Never with shared memory: the upstream gets the regions' bytes.
  const passThrough =
    encoded !== undefined &&
    rewritten === undefined &&
    resolved.request === received &&
    !spec.declaresTensors &&
    spec.decoupled !== scope.isUnary;
  return {
    request,
    answer: rewritten === undefined ? asItIs : toCharacterCodes,
    inRegions: resolved.outputs,
    engineRequest: {
      id: request.id,
      version,
      parameters: namedQueuePlace ? withoutQueueParameters(request.parameters) : request.parameters,
      inputs: inputs.tensors,
      requestedOutputs: new Set(request.outputs.map((output) => output.name)),
      encoded: passThrough ? encoded : undefined,
    },
    options: { signal: lifetime.signal, deadline: lifetime.deadline, traceHeaders: scope.traceHeaders },
    batchSize: inputs.batchSize,
  };
}

const asItIs = (response: ModelInferResponse): ModelInferResponse => response;

/**
 * The pipeline as a generator: admits the request (unless `admitted` says it was, by
 * inferUnary), runs the engine (through the scheduler for a model the data plane
 * schedules) and yields each response as it leaves; the scope is closed when it ends,
 * however it ends.
 */
async function* serve(
  context: InferenceContext,
  entry: Entry,
  received: ModelInferRequest,
  lifetime: RequestLifetime,
  encoded: Uint8Array | undefined,
  admitted: { readonly scope: RequestScope; readonly model: Admitted } | undefined,
): AsyncGenerator<InferResponseOrEncoded> {
  const scope = admitted?.scope ?? new RequestScope(context, received, entry, lifetime);
  try {
    const model = admitted?.model ?? scope.admit();
    const resolved = await resolveSharedMemory(received, context.sharedMemory, context);
    const prepared = prepare(scope, model, received, resolved, lifetime, encoded);
    const { spec, engine, version, scheduling } = model;
    const { request, answer, engineRequest, options } = prepared;
    // One reply expected: a model that is not decoupled must make exactly one response.
    const single = scope.isUnary && !spec.decoupled;
    const finalFlag = (final: boolean): Record<string, InferParameter> =>
      scope.isUnary ? {} : { [FINAL_RESPONSE]: boolParameter(final) };
    // A scheduled model's request queues for an execution (dataplane/src/scheduling/).
    const results =
      scheduling === undefined
        ? engine.infer(engineRequest, options)
        : scheduling.scheduler.infer({
            request: engineRequest,
            batchSize: Math.max(1, prepared.batchSize),
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
      const result = prepared.inRegions.size === 0 ? produced : await writeOutputs(produced, prepared.inRegions);
      passedThrough ||= result.encoded !== undefined;
      if (single && scope.responseCount > 0) throw moreThanOne(spec);
      // As Triton: a response carries the engine's parameters and, on a stream, the final
      // flag; the request's own parameters are not echoed back.
      if (gatherer !== undefined) {
        gatherer.add(encodeResponse(request, version, result, {}));
        scope.encoded(responseBytes(result));
        scope.resumed();
        continue;
      }
      const response = replyOf(prepared, version, result, finalFlag(!spec.decoupled));
      scope.encoded(responseBytes(result));
      yield response;
      scope.resumed();
    }
    scope.produced();
    if (gatherer !== undefined)
      yield answer(gatherer.result() ?? encodeResponse(request, version, { outputs: [] }, {}));
    if (single && scope.responseCount === 0) throw noResponse(spec);
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

/** `serve` for one reply from a model that is neither decoupled nor scheduled: the engine's one response. */
async function respondOnce(
  scope: RequestScope,
  admitted: Admitted,
  prepared: Prepared,
): Promise<InferResponseOrEncoded> {
  const { spec, engine, version } = admitted;
  let reply: InferResponseOrEncoded | undefined;
  for await (const produced of engine.infer(prepared.engineRequest, prepared.options)) {
    scope.produced();
    const result = prepared.inRegions.size === 0 ? produced : await writeOutputs(produced, prepared.inRegions);
    if (reply !== undefined) throw moreThanOne(spec);
    reply = replyOf(prepared, version, result, {});
    scope.encoded(responseBytes(result));
    scope.resumed();
  }
  scope.produced();
  if (reply === undefined) throw noResponse(spec);
  return reply;
}

/** The last (for a unary entry: the only) response a generator yields. */
async function lastOf(
  responses: AsyncGenerator<InferResponseOrEncoded>,
  spec: ModelSpec,
): Promise<InferResponseOrEncoded> {
  let last: InferResponseOrEncoded | undefined;
  for await (const response of responses) last = response;
  if (last === undefined) throw noResponse(spec);
  return last;
}

/** A response as it leaves: the upstream's bytes (its model name ours), or encoded from the engine's tensors. */
function replyOf(
  prepared: Prepared,
  version: string,
  result: EngineResponse,
  parameters: Record<string, InferParameter>,
): InferResponseOrEncoded {
  const { request } = prepared;
  return result.encoded !== undefined
    ? { encoded: withModel(result.encoded, request.modelName, version) }
    : prepared.answer(encodeResponse(request, version, result, parameters));
}

const moreThanOne = (spec: ModelSpec): Error =>
  internal(`model '${spec.name}' produced more than one response for a unary request`);
const noResponse = (spec: ModelSpec): Error => internal(`model '${spec.name}' produced no response`);

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

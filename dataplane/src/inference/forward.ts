import { status as grpcStatus } from "@grpc/grpc-js";
import { abortedError, UpstreamStatusError } from "../../../lib/errors.js";
import { kindOfGrpcCode } from "../../../lib/grpc/status-codes.js";
import { isForwardableHeader } from "../../../lib/grpc/frames.js";
import type { ForwardCall, ForwardMetadataEntry, ForwardSink, ForwardStatus } from "../engines/engine.js";
import type { RequestLifetime } from "./lifetime.js";
import { RequestScope, type Admitted, type Entry, type InferenceContext, type RequestHead } from "./request-scope.js";

/**
 * The lean forwarding path: a request to a model that passes requests through (a
 * kserve-grpc model that declares no tensors, ModelRegistry.passThroughNames) goes to its
 * engine's `forward` as the bytes the client sent, and the upstream's initial metadata,
 * messages, status and trailers come back to the caller as they came. What the data plane
 * owes every request is still paid, once each, by the request's RequestScope in its lean
 * mode: admission (a refused request never reaches the upstream), the in-flight counts, the
 * metrics observation, the statistics, the span (its trace headers go upstream); the
 * deadline and cancellation reach the upstream through `lifetime`. One function and a sink,
 * not the pipeline's chain of async generators: each layer of those costs microtasks and
 * allocations per request, which the forwarded request, never decoded, does not need.
 */

/** Where a forwarded request's results go: the service's gRPC call. */
export interface ForwardReplies {
  /** The upstream's initial metadata, once, before any message. */
  metadata(metadata: readonly ForwardMetadataEntry[]): void;
  /**
   * One upstream message. A promise: the client is not reading, the upstream is paused until
   * it settles (flow control passes on instead of buffering).
   */
  message(bytes: Uint8Array): Promise<void> | undefined;
  /**
   * The status the request ends with, given the upstream's (absent: the upstream's): what the
   * entry makes of the messages it was sent (e.g. an `error_message` reply on a stream that
   * ends at a failure). Asked before the request is recorded; a status other than the one
   * given is recorded as the failure even when the request's signal was aborted since.
   */
  outcome?(upstream: ForwardStatus): ForwardStatus;
  /** The request's end: the upstream's status and trailers (or a failure the engine mapped to one). */
  end(status: ForwardStatus): void;
  /** Or its end here: refused at admission, or the engine could not start the call. */
  fail(error: unknown): void;
}

/** A request passed through: the message as the client sent it, and its head read from it. */
export interface UndecodedRequest extends RequestHead {
  readonly bytes: Uint8Array;
}

/** A gRPC call's metadata as grpc-js holds it: every value of every name (`-bin` values as bytes). */
export interface CallMetadata {
  toJSON(): Readonly<Record<string, readonly (string | Uint8Array)[]>>;
}

/**
 * Whether `request` passes through on `entry` now. Call `forwardInference` right after a
 * true answer, with nothing awaited in between: a reload cannot then change the model
 * between the check and the admission. A false answer (the model was reloaded as a checked
 * config, or unloaded, since the request was read): decode it and take the pipeline.
 */
export function passesThrough(context: InferenceContext, request: RequestHead, entry: Entry): boolean {
  return context.registry.passThroughNames(entry.requestType).has(request.modelName);
}

/** Forwards a request that passes through (see `passesThrough`); every outcome ends in one `replies.end`. */
export function forwardInference(
  context: InferenceContext,
  request: UndecodedRequest,
  entry: Entry,
  lifetime: RequestLifetime,
  clientMetadata: CallMetadata,
  replies: ForwardReplies,
): void {
  const scope = new RequestScope(context, request, entry, lifetime);
  let admitted: Admitted;
  try {
    admitted = scope.admit();
  } catch (error) {
    scope.fail(error);
    scope.close();
    replies.fail(error);
    return;
  }
  scope.receivedMessage(request.bytes.byteLength);
  const { engine, spec, version } = admitted;
  let call: ForwardCall | undefined;
  let ended = false;
  const sink: ForwardSink = {
    metadata: (metadata) => replies.metadata(metadata),
    message: (bytes) => {
      scope.forwarded(bytes.byteLength);
      const waiting = replies.message(bytes);
      if (waiting === undefined || call === undefined) return;
      const paused = call;
      paused.pause();
      void waiting.then(() => paused.resume());
    },
    end: (upstream) => {
      if (ended) return;
      ended = true;
      scope.produced();
      const checked = scope.isUnary ? oneReply(upstream, scope.responseCount, spec.name) : upstream;
      const status = replies.outcome?.(checked) ?? checked;
      // An outcome of the entry's own stands even if it then cancelled the upstream (ModelInferStream's error_message).
      const aborted = status === checked && lifetime.signal.aborted;
      if (status.code === grpcStatus.OK) scope.succeed();
      else scope.fail(aborted ? abortedError(lifetime.signal) : failureOf(status));
      scope.close();
      replies.end(status);
    },
  };
  const tracing = Object.keys(scope.traceHeaders).length > 0;
  try {
    if (engine.forward === undefined) throw new Error(`model '${spec.name}' does not forward requests`);
    call = engine.forward(
      {
        bytes: request.bytes,
        modelName: request.modelName,
        // The version it resolved to here: replies name it, as the pipeline's do.
        modelVersion: version,
        id: request.id,
        parameters: request.parameters,
        metadata: forwardedMetadata(clientMetadata, tracing),
      },
      {
        signal: lifetime.signal,
        deadline: lifetime.deadline,
        traceHeaders: scope.traceHeaders,
        stream: !scope.isUnary,
      },
      sink,
    );
  } catch (error) {
    if (ended) return;
    ended = true;
    scope.fail(error);
    scope.close();
    replies.fail(error);
  }
}

/** A unary entry's reply is exactly one message: an upstream that sent none or several failed. */
function oneReply(status: ForwardStatus, messages: number, model: string): ForwardStatus {
  if (status.code !== grpcStatus.OK || messages === 1) return status;
  const what = messages === 0 ? "no response" : "more than one response for a unary request";
  return { code: grpcStatus.INTERNAL, details: `model '${model}' produced ${what}`, metadata: [] };
}

/** An upstream's non-OK status as the error the metrics, statistics and logs record. */
const failureOf = (status: ForwardStatus): UpstreamStatusError =>
  new UpstreamStatusError(kindOfGrpcCode(status.code), status.code, status.details);

/** Trace context: the span's own replaces the client's when tracing is on. */
const TRACE_CONTEXT = new Set(["traceparent", "tracestate", "grpc-trace-bin"]);

/**
 * The client's custom metadata that goes upstream: every entry but the reserved ones
 * (grpc-frames.ts's one deny list: pseudo-headers, connection headers, `grpc-*` but the two
 * that carry application data, `authorization`). Trace context: with tracing on the span's
 * headers go instead of the client's; off, the client's `traceparent`, `tracestate` and
 * `grpc-trace-bin` pass as they came.
 */
export function forwardedMetadata(metadata: CallMetadata, tracing: boolean): ForwardMetadataEntry[] {
  const entries: ForwardMetadataEntry[] = [];
  for (const [name, values] of Object.entries(metadata.toJSON())) {
    if (!isForwarded(name, tracing)) continue;
    for (const value of values) entries.push([name, value]);
  }
  return entries;
}

function isForwarded(name: string, tracing: boolean): boolean {
  return isForwardableHeader(name) && !(tracing && TRACE_CONTEXT.has(name));
}

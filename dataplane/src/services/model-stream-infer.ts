import { status as grpcStatus, type handleBidiStreamingCall } from "@grpc/grpc-js";
import type { ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { StreamInferReply } from "../server/reply-encoding.js";
import {
  decodedRequest,
  isPassThrough,
  receivedBytesOf,
  type PassThroughRequest,
  type ReceivedInferRequest,
} from "../server/request-decoding.js";
import { forwardInference, passesThrough, type CallMetadata } from "../inference/forward.js";
import type { Entry, RequestHead } from "../inference/request-scope.js";
import { errorDetail } from "../limits.js";
import { DEFAULT_STREAM_MAX_PENDING } from "../../../lib/contract/dataplane.js";
import { StreamRequests, type RequestLifetime } from "../inference/lifetime.js";
import { runInference, type InferenceContext } from "../inference/pipeline.js";
import { StreamWriter } from "./stream-writer.js";
import { callLifetime } from "./call-lifetime.js";
import { laneOf, SequenceLanes } from "./sequence-lanes.js";

/**
 * ModelStreamInfer: requests on one stream run concurrently and their responses
 * interleave as they are produced, except that the requests of one sequence run one at a
 * time in arrival order (SequenceLanes). A failing request is answered with
 * `error_message` (and its id) while the stream stays open; the stream ends after the
 * client has half-closed and every request has finished. At most `maxPending` requests of a
 * stream are in hand at once, running or waiting for their sequence's turn: at the cap the
 * stream is not read further, so HTTP/2 flow control holds the client back until one
 * finishes. A request to a decoupled model that passes through is forwarded as it came, and
 * its upstream's stream replies (`error_message` ones too) are written as they came.
 */
export function modelStreamInferHandler(
  context: InferenceContext,
  maxPending = DEFAULT_STREAM_MAX_PENDING,
): handleBidiStreamingCall<ReceivedInferRequest, StreamInferReply> {
  return (call) =>
    serveStream(call, maxPending, (request, writer, lifetime) =>
      serveRequest(context, writer, request, lifetime, call.metadata),
    );
}

const MODEL_STREAM_INFER: Entry = { endpoint: "ModelStreamInfer", requestType: "stream", protocol: "grpc" };

/** Serves one request of a stream: its responses, or its error, written to the stream. */
export type ServeStreamRequest = (
  request: ReceivedInferRequest,
  writer: StreamWriter<StreamInferReply>,
  lifetime: RequestLifetime,
) => Promise<void>;

/** What every gRPC call offers its lifetime: deadline, metadata, "cancelled". */
type CallSurface = Parameters<typeof callLifetime>[0];

/** What serving a stream uses of a grpc-js bidirectional call. */
export interface StreamCall extends CallSurface {
  on(event: "data", listener: (request: ReceivedInferRequest) => void): unknown;
  on(event: "end" | "drain", listener: () => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  write(reply: StreamInferReply, written?: () => void): boolean;
  pause(): unknown;
  resume(): unknown;
  end(): unknown;
}

/** A stream's requests read, ordered by sequence, served and answered (see modelStreamInferHandler). */
export function serveStream(call: StreamCall, maxPending: number, serve: ServeStreamRequest): void {
  const lifetime = callLifetime(call);
  const { signal } = lifetime;
  const requests = new StreamRequests(lifetime);
  const lanes = new SequenceLanes(signal);
  const writer = new StreamWriter(call, signal);
  let clientDone = false;
  let paused = false;
  const requestDone = (): void => {
    if (paused && requests.size < maxPending) {
      paused = false;
      call.resume();
    }
    if (clientDone && requests.size === 0 && !signal.aborted) {
      lifetime.finished();
      call.end();
    }
  };
  const inTurn = (request: ReceivedInferRequest, scope: RequestLifetime): Promise<void> => {
    let lane: string | undefined;
    try {
      lane = laneOf(request);
    } catch (error) {
      return writeFailure(writer, request, error);
    }
    return lanes.run(lane, () => serve(request, writer, scope));
  };
  call.on("error", lifetime.cancel);
  call.on("data", (request: ReceivedInferRequest) => {
    // Begun before its turn: a request waiting behind its sequence counts toward maxPending.
    const scope = requests.begin();
    void inTurn(request, scope).finally(() => {
      scope.end();
      requestDone();
    });
    if (requests.size >= maxPending && !paused) {
      paused = true;
      call.pause();
    }
  });
  call.on("end", () => {
    clientDone = true;
    requestDone();
  });
}

async function serveRequest(
  context: InferenceContext,
  writer: StreamWriter<StreamInferReply>,
  received: ReceivedInferRequest,
  lifetime: RequestLifetime,
  metadata: CallMetadata,
): Promise<void> {
  if (isPassThrough(received) && passesThrough(context, received, MODEL_STREAM_INFER))
    return forwardRequest(context, writer, received, lifetime, metadata);
  try {
    // Inside the try: a request read as passing through is decoded here (its model was
    // reloaded as a checked one meanwhile), and a malformed one is this request's failure.
    const request = decodedRequest(received);
    for await (const response of runInference(
      context,
      request,
      MODEL_STREAM_INFER,
      lifetime,
      receivedBytesOf(request),
    )) {
      await writer.write({ errorMessage: "", inferResponse: response });
    }
  } catch (error) {
    if (lifetime.signal.aborted) return;
    await writeFailure(writer, received, error);
  }
}

/**
 * One request of the stream forwarded: the upstream's replies written as they came (its
 * initial metadata and trailers have no place on a stream shared by many requests); a
 * failure (the upstream's status, or a refusal here) answered with error_message, as the
 * pipeline answers one.
 */
function forwardRequest(
  context: InferenceContext,
  writer: StreamWriter<StreamInferReply>,
  request: PassThroughRequest,
  lifetime: RequestLifetime,
  metadata: CallMetadata,
): Promise<void> {
  return new Promise((resolve) =>
    forwardInference(context, request, MODEL_STREAM_INFER, lifetime, metadata, {
      metadata: () => undefined,
      message: (bytes) => writer.writeNow({ encodedStreamReply: bytes }, bytes.byteLength),
      end: ({ code, details }) => {
        if (code === grpcStatus.OK || lifetime.signal.aborted) resolve();
        else void writeFailure(writer, request, details).then(resolve);
      },
      fail: (error) => void writeFailure(writer, request, error).then(resolve),
    }),
  );
}

/** A failed request's error_message, with its identity, on the stream (which stays open). */
function writeFailure(writer: StreamWriter<StreamInferReply>, request: RequestHead, error: unknown): Promise<void> {
  return writer.write({ errorMessage: errorDetail(error), inferResponse: errorReply(request) });
}

/** The reply that carries a failed request's identity next to its error_message. */
function errorReply(request: RequestHead): ModelInferResponse {
  return {
    modelName: request.modelName,
    modelVersion: request.modelVersion,
    id: request.id,
    parameters: {},
    outputs: [],
    rawOutputContents: [],
  };
}

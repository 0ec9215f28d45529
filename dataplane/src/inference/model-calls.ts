import type { ModelInference } from "../engines/engine.js";
import { runInference, type Entry, type InferenceContext } from "./pipeline.js";

/**
 * Requests a model makes to other models of this data plane (Triton's Business Logic
 * Scripting, from Python models): they take the same pipeline as a client's, so admission,
 * checks, statistics and metrics (endpoint "bls") are the same.
 */

const MODEL_CALL: Entry = {
  endpoint: "bls",
  requestType: "unary",
  protocol: "bls",
  forDecoupledUse: "InferenceRequest.exec(decoupled=True) (or stream_exec())",
};
const MODEL_CALL_STREAM: Entry = { endpoint: "bls", requestType: "stream", protocol: "bls" };

export function modelCalls(context: InferenceContext): ModelInference {
  return (request, stream, { signal, deadline }) =>
    runInference(context, request, stream ? MODEL_CALL_STREAM : MODEL_CALL, { signal, deadline, headers: {} });
}

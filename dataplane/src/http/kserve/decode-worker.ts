import { parentPort } from "node:worker_threads";
import { DataPlaneError, errorMessage } from "../../../../lib/errors.js";
import { inferRequestOf, parseInferHeader, parseJsonBody } from "./infer.js";
import type { DecodeJob, DecodeResult } from "./decode-pool.js";

/**
 * A decode thread of the pool (decode-pool.ts): reads one body at a time, off the event
 * loop, and answers with the infer request or parsed JSON, or the error (its kind and message).
 */
parentPort!.on("message", (job: DecodeJob) => {
  const { id } = job;
  let result: DecodeResult;
  try {
    result = { id, decoded: decode(job) };
  } catch (error) {
    const kind = error instanceof DataPlaneError ? error.kind : "Internal";
    result = { id, error: { kind, message: errorMessage(error) } };
  }
  parentPort!.postMessage(result);
});

function decode(job: DecodeJob): unknown {
  if ("json" in job) return parseJsonBody(Buffer.from(job.json), job.what);
  return inferRequestOf(parseInferHeader(Buffer.from(job.header)), Buffer.from(job.binary), job.model);
}

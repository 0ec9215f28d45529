import { parentPort } from "node:worker_threads";
import { DataPlaneError, errorMessage } from "../../../../lib/errors.js";
import { inferRequestOf, parseInferHeader } from "./infer.js";
import type { DecodeJob, DecodeResult } from "./decode-pool.js";

/**
 * A decode thread of the pool (decode-pool.ts): reads one infer body at a time, off the
 * event loop, and answers with the request or the error (its kind and message).
 */
parentPort!.on("message", ({ id, header, binary, model }: DecodeJob) => {
  let result: DecodeResult;
  try {
    result = { id, decoded: inferRequestOf(parseInferHeader(Buffer.from(header)), Buffer.from(binary), model) };
  } catch (error) {
    const kind = error instanceof DataPlaneError ? error.kind : "Internal";
    result = { id, error: { kind, message: errorMessage(error) } };
  }
  parentPort!.postMessage(result);
});

import { parentPort } from "node:worker_threads";
import { InferenceSession, Tensor as OrtTensor } from "onnxruntime-node";
import { errorMessage } from "../../../../lib/errors.js";
import type { HostReply, HostRequest, WireTensor } from "./session-host.js";

/**
 * One instance's onnxruntime session, on a thread of its own (session-host.ts): made on
 * `create`, then one `run` at a time, answered with the outputs (their buffers moved, not
 * copied) or the error's message.
 */

let session: InferenceSession | undefined;
/** The host's flag: 1 once it released the session. */
let released: Int32Array | undefined;

parentPort!.on("message", (request: HostRequest) => {
  // Between runs (onnxruntime runs synchronously on this thread), so no run is cut short.
  if (request.kind === "exit") process.exit(0);
  void handle(request).then(
    ({ reply, transfer }) => parentPort!.postMessage(reply, transfer),
    (error: unknown) =>
      parentPort!.postMessage({
        kind: "failed",
        id: request.kind === "run" ? request.id : 0,
        message: errorMessage(error),
      }),
  );
});

async function handle(
  request: Exclude<HostRequest, { kind: "exit" }>,
): Promise<{ reply: HostReply; transfer: ArrayBuffer[] }> {
  if (request.kind === "create") {
    released = request.released;
    session = await InferenceSession.create(request.path, request.options);
    return { reply: { kind: "created" }, transfer: [] };
  }
  if (released !== undefined && Atomics.load(released, 0) === 1) throw new Error("the session was released");
  const feeds = Object.fromEntries(
    Object.entries(request.feeds).map(([name, wire]) => [
      name,
      new OrtTensor(wire.type, wire.data as never, wire.dims),
    ]),
  );
  const results = await session!.run(feeds, request.fetches as string[]);
  const outputs: Record<string, WireTensor> = {};
  const transfer: ArrayBuffer[] = [];
  for (const [name, value] of Object.entries(results)) {
    const tensor = value as OrtTensor;
    const data = tensor.data as WireTensor["data"];
    outputs[name] = { type: tensor.type, dims: tensor.dims.map(Number), data };
    if (!Array.isArray(data)) transfer.push((data as { buffer: ArrayBuffer }).buffer);
  }
  return { reply: { kind: "ran", id: request.id, outputs }, transfer };
}

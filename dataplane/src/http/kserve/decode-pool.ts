import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { ModelInferRequest } from "../../../../proto/gen/ts/grpc_service.js";
import { DataPlaneError, type ErrorKind } from "../../../../lib/errors.js";
import { inferRequestOf, parseInferHeader, parseJsonBody, type ReplyForm } from "./infer.js";

/**
 * JSON bodies decoded off the event loop: infer bodies (JSON parsed, tensors converted) and
 * every other JSON body (parsed). JSON.parse and the tensor conversion take about 60 ms per
 * MB of JSON, all in one piece: a body at the 64 MiB limit held every other request, probe
 * and stream for seconds, and a 64 KB gzip body inflates that far. JSON of
 * DECODE_OFF_THREAD_BYTES or more (an infer body's JSON header, without its binary part)
 * goes to a small pool of threads (one body each at a time, the rest queued); smaller JSON
 * is decoded in place, where a thread's round trip would cost more than it saves.
 */

/** A JSON body this large (1 MiB) takes ~60 ms to decode: from here on it goes to a thread. */
export const DECODE_OFF_THREAD_BYTES = 1024 * 1024;

interface Model {
  readonly name: string;
  readonly version: string;
}
export type Decoded = { request: ModelInferRequest; reply: ReplyForm };

/** A body to decode, as the pool sends it to a thread: an infer body, or any JSON body (`what` names it). */
export type DecodeJob =
  | { readonly id: number; readonly header: Uint8Array; readonly binary: Uint8Array; readonly model: Model }
  | { readonly id: number; readonly json: Uint8Array; readonly what: string };
/** A thread's answer: the request or the parsed value, or the error it makes. */
export type DecodeResult =
  | { readonly id: number; readonly decoded: Decoded | unknown }
  | { readonly id: number; readonly error: { readonly kind: ErrorKind; readonly message: string } };

/** Decodes an infer body: its JSON header and binary part, for `model`. */
export function decodeInferBody(header: Buffer, binary: Buffer, model: Model): Decoded | Promise<Decoded> {
  // The binary part costs nothing to read (its tensors are slices): only the JSON counts.
  if (header.length < DECODE_OFF_THREAD_BYTES) return inferRequestOf(parseInferHeader(header), binary, model);
  return pool().decode({ id: 0, header, binary, model }) as Promise<Decoded>;
}

/** Parses a JSON body other than an infer body (`what` names it in messages). */
export function decodeJsonBody(body: Buffer, what: string): Promise<unknown> {
  if (body.length < DECODE_OFF_THREAD_BYTES) return Promise.resolve(parseJsonBody(body, what));
  return pool().decode({ id: 0, json: body, what });
}

/** Ends the pool's threads (the front door is closing); a later body starts new ones. */
export async function closeDecodePool(): Promise<void> {
  const closing = shared;
  shared = undefined;
  await closing?.close();
}

let shared: DecodePool | undefined;
const pool = (): DecodePool => (shared ??= new DecodePool(Math.min(2, availableParallelism())));

interface Waiting {
  readonly job: DecodeJob;
  resolve(decoded: unknown): void;
  reject(error: Error): void;
}

class DecodePool {
  private readonly idle: Worker[] = [];
  private readonly busy = new Map<Worker, Waiting>();
  private readonly queue: Waiting[] = [];
  private started = 0;
  private nextId = 1;

  constructor(private readonly size: number) {}

  decode(job: DecodeJob): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ job: { ...job, id: this.nextId++ }, resolve, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      const worker = this.idle.pop() ?? (this.started < this.size ? this.start() : undefined);
      if (worker === undefined) return;
      const waiting = this.queue.shift()!;
      this.busy.set(worker, waiting);
      worker.postMessage(waiting.job);
    }
  }

  private start(): Worker {
    this.started++;
    const worker = new Worker(new URL("./decode-worker.js", import.meta.url));
    // Idle threads never keep the process alive.
    worker.unref();
    worker.on("message", (result: DecodeResult) => {
      const waiting = this.busy.get(worker);
      this.busy.delete(worker);
      this.idle.push(worker);
      if ("decoded" in result) waiting?.resolve(result.decoded);
      else waiting?.reject(new DataPlaneError(result.error.kind, result.error.message));
      this.dispatch();
    });
    // A thread that dies fails its body, and is replaced on the next one.
    worker.on("error", (error) => this.lost(worker, error));
    worker.on("exit", (code) => this.lost(worker, new Error(`the decode thread exited (${code})`)));
    return worker;
  }

  private lost(worker: Worker, error: Error): void {
    const idleAt = this.idle.indexOf(worker);
    const waiting = this.busy.get(worker);
    // 'error' is followed by 'exit': the thread is counted out once.
    if (idleAt < 0 && waiting === undefined) return;
    if (idleAt >= 0) this.idle.splice(idleAt, 1);
    this.busy.delete(worker);
    this.started--;
    waiting?.reject(new DataPlaneError("Internal", `decoding the request failed: ${error.message}`));
    this.dispatch();
  }

  async close(): Promise<void> {
    const workers = [...this.idle, ...this.busy.keys()];
    this.idle.length = 0;
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
}

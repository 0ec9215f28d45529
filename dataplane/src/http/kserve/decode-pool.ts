import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { ModelInferRequest } from "../../../../proto/gen/ts/grpc_service.js";
import { DataPlaneError, type ErrorKind } from "../../../../lib/errors.js";
import { inferRequestOf, parseInferHeader, type ReplyForm } from "./infer.js";

/**
 * Infer bodies decoded off the event loop. JSON.parse and the tensor conversion take about
 * 60 ms per MB of JSON, all in one piece: a body at the 64 MiB limit held every other
 * request, probe and stream for seconds. Bodies of DECODE_OFF_THREAD_BYTES or more go to a
 * small pool of threads (one body each at a time, the rest queued); smaller ones are
 * decoded in place, where a thread's round trip would cost more than it saves.
 */

/** A JSON header this large (1 MiB) takes ~60 ms to decode: from here on it goes to a thread. */
export const DECODE_OFF_THREAD_BYTES = 1024 * 1024;

interface Model {
  readonly name: string;
  readonly version: string;
}
export type Decoded = { request: ModelInferRequest; reply: ReplyForm };

/** A body to decode, as the pool sends it to a thread. */
export interface DecodeJob {
  readonly id: number;
  readonly header: Uint8Array;
  readonly binary: Uint8Array;
  readonly model: Model;
}
/** A thread's answer: the request, or the error it makes. */
export type DecodeResult =
  | { readonly id: number; readonly decoded: Decoded }
  | { readonly id: number; readonly error: { readonly kind: ErrorKind; readonly message: string } };

/** Decodes an infer body: its JSON header and binary part, for `model`. */
export function decodeInferBody(header: Buffer, binary: Buffer, model: Model): Decoded | Promise<Decoded> {
  if (header.length < DECODE_OFF_THREAD_BYTES) return inferRequestOf(parseInferHeader(header), binary, model);
  return pool().decode({ id: 0, header, binary, model });
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
  resolve(decoded: Decoded): void;
  reject(error: Error): void;
}

class DecodePool {
  private readonly idle: Worker[] = [];
  private readonly busy = new Map<Worker, Waiting>();
  private readonly queue: Waiting[] = [];
  private started = 0;
  private nextId = 1;

  constructor(private readonly size: number) {}

  decode(job: DecodeJob): Promise<Decoded> {
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

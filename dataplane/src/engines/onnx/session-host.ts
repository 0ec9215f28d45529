import { Worker } from "node:worker_threads";
import { Tensor as OrtTensor, type InferenceSession } from "onnxruntime-node";
import { abortedError, internal } from "../../../../lib/errors.js";
import type { NumericArray, OrtType } from "./types.js";

/**
 * An onnxruntime session on a thread of its own (session-worker.ts). onnxruntime-node runs a
 * session synchronously on the calling thread: on the event loop, a run holds every other
 * request, probe and stream for its whole length, instances cannot run at once, and requests
 * arriving meanwhile are not even read (so a dynamic batch cannot fill while one runs, as it
 * does in Triton). On its own thread, each instance runs while the event loop reads and
 * queues the next requests. Tensors cross by message: a buffer the engine owns (a joined
 * batch) is moved, a view into a request is copied once, the outputs are moved back.
 * A thread that dies fails its runs and is started again (its session made again) by the next.
 */

/** A tensor as it crosses to and from the thread. */
export interface WireTensor {
  readonly type: OrtType;
  readonly dims: readonly number[];
  readonly data: NumericArray | readonly string[];
}

export type HostRequest =
  | {
      readonly kind: "create";
      readonly path: string;
      readonly options: InferenceSession.SessionOptions;
      /** Set to 1 by the host once released: runs not yet begun fail at once. */
      readonly released: Int32Array;
    }
  /** Ends the thread between runs (ending it during one aborts the process: onnxruntime-node cannot be interrupted). */
  | { readonly kind: "exit" }
  | {
      readonly kind: "run";
      readonly id: number;
      readonly feeds: Readonly<Record<string, WireTensor>>;
      readonly fetches: readonly string[];
    };

export type HostReply =
  | { readonly kind: "created" }
  | { readonly kind: "ran"; readonly id: number; readonly outputs: Readonly<Record<string, WireTensor>> }
  /** `id` 0: the session could not be made. */
  | { readonly kind: "failed"; readonly id: number; readonly message: string };

interface Pending {
  resolve(outputs: Record<string, OrtTensor>): void;
  reject(error: Error): void;
}

/** A run not yet given to the thread. */
interface Queued {
  readonly message: Extract<HostRequest, { kind: "run" }>;
  readonly transfer: ArrayBuffer[];
}

export class SessionHost {
  private worker: Worker | undefined;
  /** Settled once the thread's session is made (rejected with onnxruntime's reason). */
  private ready: Promise<void> | undefined;
  private readonly pending = new Map<number, Pending>();
  /**
   * Runs wait here, not in the thread's queue, until the one before has returned: a run
   * whose caller has gone meanwhile (cancelled, past its deadline) leaves without running.
   */
  private readonly queued = new Map<number, Queued>();
  /** The run the thread has, if any. */
  private posted: number | undefined;
  private nextId = 1;
  private closed = false;
  /** Shared with the thread: 1 once released. */
  private readonly released = new Int32Array(new SharedArrayBuffer(4));

  private constructor(
    private readonly path: string,
    private readonly options: InferenceSession.SessionOptions,
  ) {}

  /** A session on its own thread; rejects with onnxruntime's reason when it cannot be made. */
  static async create(path: string, options: InferenceSession.SessionOptions): Promise<SessionHost> {
    const host = new SessionHost(path, options);
    try {
      await host.start();
    } catch (error) {
      await host.release();
      throw error;
    }
    return host;
  }

  /**
   * Runs the session. `owned`: the feeds whose buffers the caller gives up (moved to the
   * thread, not copied); the others are copied, as they view memory the caller keeps.
   * `signal`: the run's caller; aborted before the thread takes the run, it is not run.
   */
  async run(
    feeds: Readonly<Record<string, OrtTensor>>,
    fetches: readonly string[],
    owned: ReadonlySet<string>,
    signal?: AbortSignal,
  ): Promise<Record<string, OrtTensor>> {
    await this.start();
    if (signal?.aborted) throw abortedError(signal);
    const transfer: ArrayBuffer[] = [];
    const wire: Record<string, WireTensor> = {};
    for (const [name, tensor] of Object.entries(feeds)) {
      let data = tensor.data as WireTensor["data"];
      if (!Array.isArray(data)) {
        const numbers = data as NumericArray;
        const whole = numbers.byteOffset === 0 && numbers.byteLength === numbers.buffer.byteLength;
        data = owned.has(name) && whole ? numbers : numbers.slice();
        transfer.push((data as NumericArray).buffer as ArrayBuffer);
      }
      wire[name] = { type: tensor.type, dims: tensor.dims.map(Number), data };
    }
    const id = this.nextId++;
    const worker = this.worker;
    if (worker === undefined) throw internal("the onnxruntime session's thread stopped before the run");
    const outputs = new Promise<Record<string, OrtTensor>>((resolve, reject) =>
      this.pending.set(id, { resolve, reject }),
    );
    if (this.pending.size === 1) worker.ref();
    this.queued.set(id, { message: { kind: "run", id, feeds: wire, fetches }, transfer });
    const leave = (): void => this.leaveQueue(id, abortedError(signal!));
    signal?.addEventListener("abort", leave, { once: true });
    this.postNext();
    return outputs.finally(() => signal?.removeEventListener("abort", leave));
  }

  /** Gives the thread the next run once it has none (it runs one at a time). */
  private postNext(): void {
    const worker = this.worker;
    if (this.posted !== undefined || worker === undefined) return;
    const [next] = this.queued.values();
    if (next === undefined) return;
    this.queued.delete(next.message.id);
    this.posted = next.message.id;
    worker.postMessage(next.message satisfies HostRequest, next.transfer);
  }

  /** A run whose caller has gone before the thread took it. */
  private leaveQueue(id: number, error: Error): void {
    if (!this.queued.delete(id)) return;
    this.pending.get(id)?.reject(error);
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker?.unref();
  }

  /**
   * Ends the thread: the runs not done fail now; the thread ends once the run onnxruntime
   * may be inside returns (terminating it there aborts the whole process), the others not begun.
   */
  async release(): Promise<void> {
    this.closed = true;
    Atomics.store(this.released, 0, 1);
    const worker = this.worker;
    this.worker = undefined;
    this.failPending(internal("the onnxruntime session's thread stopped: the session was released"));
    if (worker === undefined) return;
    const exited = new Promise((resolve) => worker.once("exit", resolve));
    // An idle thread is unref'd: held again until it has exited, or a process whose other
    // handles are closed (the end of a drain) would exit with this release unfinished.
    worker.ref();
    worker.postMessage({ kind: "exit" } satisfies HostRequest);
    await exited;
  }

  /** The thread and its session, started when there is none (at first, or after one died). */
  private start(): Promise<void> {
    if (this.closed) return Promise.reject(internal("the onnxruntime session was released"));
    if (this.ready !== undefined) return this.ready;
    const worker = new Worker(new URL("./session-worker.js", import.meta.url));
    this.worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      worker.on("message", (reply: HostReply) => {
        if (reply.kind === "created") {
          // Idle threads never keep the process alive (a run holds it while it runs).
          worker.unref();
          return resolve();
        }
        if (reply.kind === "failed" && reply.id === 0) return reject(new Error(reply.message));
        this.settle(reply);
      });
      // A thread that dies before its session is made fails the start; after, its runs.
      worker.on("error", (error) => this.lost(worker, error, reject));
      worker.on("exit", (code) => this.lost(worker, new Error(`the thread exited (${code})`), reject));
    });
    this.ready.catch(() => undefined);
    const create: HostRequest = { kind: "create", path: this.path, options: this.options, released: this.released };
    worker.postMessage(create);
    return this.ready;
  }

  private settle(reply: Extract<HostReply, { id: number }>): void {
    const pending = this.pending.get(reply.id);
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker?.unref();
    if (this.posted === reply.id) this.posted = undefined;
    this.postNext();
    if (reply.kind === "failed") {
      pending?.reject(new Error(reply.message));
      return;
    }
    const outputs: Record<string, OrtTensor> = {};
    for (const [name, tensor] of Object.entries(reply.outputs)) {
      outputs[name] = new OrtTensor(tensor.type, tensor.data as never, tensor.dims);
    }
    pending?.resolve(outputs);
  }

  private lost(worker: Worker, error: Error, failStart: (error: Error) => void): void {
    if (this.worker !== worker && !this.closed) return;
    this.worker = undefined;
    this.ready = undefined;
    const reason = internal(`the onnxruntime session's thread stopped: ${error.message}`);
    failStart(reason);
    this.failPending(reason);
  }

  private failPending(reason: Error): void {
    for (const pending of this.pending.values()) pending.reject(reason);
    this.pending.clear();
    this.queued.clear();
    this.posted = undefined;
  }
}

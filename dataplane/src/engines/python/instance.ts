import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Readable, Writable } from "node:stream";
import type { Logger } from "pino";
import type { PythonEngineArguments } from "../../../../lib/contract/dataplane.js";
import { DataPlaneError, errorMessage, unavailable } from "../../../../lib/errors.js";
import { encodeFrame, FrameReader, type Frame } from "./frames.js";
import type { FieldsOfToStub, FromStub, InputTensorPart, ToStub } from "./protocol.js";
import { logOutput } from "./printed.js";
import { SharedMemory } from "./shared-memory.js";

/**
 * One instance of a Python model: a Python process running the stub
 * (dataplane/python/dynamo_kserve_python_stub.py) around the model's `model.py`, and the
 * requests it has been given. A process that exits or stops answering is replaced; the
 * requests it held are answered UNAVAILABLE at once, never left waiting.
 */

/** Where the process is in its life. */
export type InstanceState = "starting" | "ready" | "restarting" | "closed";

/** What the instance tells the engine about a request it was given. */
export interface RequestSink {
  /** A response frame of this request (a response message: its `final` says whether it is the last). */
  frame(frame: Frame): void;
  /** The request failed outside the model (the process died): no more frames come. */
  fail(error: DataPlaneError): void;
}

/** The stub and the pb_utils module ship beside the compiled code: <package>/dataplane/python/. */
const STUB_FOLDER = fileURLToPath(new URL("../../../../../dataplane/python/", import.meta.url));
export const PYTHON_STUB = join(STUB_FOLDER, "dynamo_kserve_python_stub.py");

/**
 * The stub's environment: triton_python_backend_utils importable, output unbuffered (lines
 * reach the log as printed), and this process's id, so the stub exits when it is gone.
 */
export const stubEnvironment = (): NodeJS.ProcessEnv => ({
  ...process.env,
  PYTHONPATH: joinPath(STUB_FOLDER, process.env["PYTHONPATH"]),
  PYTHONUNBUFFERED: "1",
  DYNAMO_KSERVE_PARENT_PID: String(process.pid),
});

/** The settings message but what the instance fills in itself (its shared memory). */
export type InstanceSettings = Omit<
  FieldsOfToStub<"settings">,
  "sharedInputsFd" | "sharedOutputsFd" | "pythonShmByteSize"
>;

/** What the data plane says of a request besides its id, its inputs and its place in an execution. */
export type RequestFields = Omit<FieldsOfToStub<"execute">, "id" | "inputs" | "endsExecution">;

/** One request of an execution, as the engine gives it to the instance. */
export interface SubmittedRequest {
  readonly fields: RequestFields;
  readonly inputs: readonly InputTensor[];
  readonly sink: RequestSink;
}

export interface InstanceOptions {
  /** The interpreter, the shared memory each way and the stub timeout: the python engine's options. */
  readonly hosting: PythonEngineArguments;
  /** The first frame the stub reads: what to load and how (see the stub's serve). */
  readonly settings: InstanceSettings;
  /** Name for errors: `'<model>' version <v> instance <name>`. */
  readonly label: string;
  /** Logs with the model, version and instance in every line. */
  readonly logger: Logger;
  /** The model called another model (BLS): its call, the frame's payload holding the inputs. */
  onModelCall(frame: Frame, call: FromStub<"call">, instance: PythonInstance): void;
}

/** The process's file descriptors of the shared memory for inputs and outputs (0: none). */
const SHARED_INPUTS_FD = 5;
const SHARED_OUTPUTS_FD = 6;

/** Restarts back off from 1 s to 30 s; a process that ran this long starts again at 1 s. */
const FIRST_RESTART_DELAY_MS = 1000;
const LONGEST_RESTART_DELAY_MS = 30_000;
/** How long a finishing process may take (finalize) before it is killed. */
const FINISH_GRACE_MS = 5000;

export class PythonInstance {
  state: InstanceState = "starting";
  private child: ChildProcess | undefined;
  private inputs: SharedMemory | undefined;
  private outputs: SharedMemory | undefined;
  private readonly sinks = new Map<number, { sink: RequestSink; regions: number[] }>();
  /** The input regions of abandoned requests whose final frame has not come yet. */
  private readonly abandoned = new Map<number, number[]>();
  /** What to do when a decoupled model's execute returns, by the id of the request that ended the execution. */
  private readonly executing = new Map<number, () => void>();
  private nextId = 0;
  private restartDelay = FIRST_RESTART_DELAY_MS;
  private restartTimer: NodeJS.Timeout | undefined;
  private healthTimer: NodeJS.Timeout | undefined;
  private lastHeard = 0;
  /** Set while frames wait corked for the end of this event-loop turn. */
  private corked: NodeJS.Immediate | undefined;
  private startedAt = 0;
  /** Why the last start failed, for the errors of requests that find no instance. */
  lastFailure = "";

  constructor(private readonly options: InstanceOptions) {}

  /** Requests given to the process and not yet finished. */
  get outstanding(): number {
    return this.sinks.size;
  }

  /** Starts the process and resolves once the model's initialize has returned; rejects (UNAVAILABLE) if it fails. */
  start(): Promise<void> {
    const { hosting, settings, logger, label } = this.options;
    const { python, pythonShmByteSize } = hosting;
    // Bytes of shared memory for large tensors, each way (0: every tensor goes in the frame).
    this.inputs = pythonShmByteSize > 0 ? new SharedMemory(pythonShmByteSize) : undefined;
    this.outputs = pythonShmByteSize > 0 ? new SharedMemory(pythonShmByteSize) : undefined;
    // The shared-memory files (unlinked already) are the process's descriptors SHARED_INPUTS_FD and SHARED_OUTPUTS_FD.
    const child = spawn(python, [PYTHON_STUB, "serve"], {
      stdio: ["ignore", "pipe", "pipe", "pipe", "pipe", this.inputs?.fd ?? "ignore", this.outputs?.fd ?? "ignore"],
      env: stubEnvironment(),
    });
    this.child = child;
    this.startedAt = Date.now();
    this.lastHeard = Date.now();
    logOutput(child, logger);
    const reader = new FrameReader();
    const fromPython = child.stdio[4] as Readable;
    const toPython = child.stdio[3] as Writable;
    toPython.on("error", () => undefined); // an exit is reported by the exit event
    return new Promise<void>((resolve, reject) => {
      let started = false;
      let fatal = "";
      /** Why the process was killed, when it was for what it sent. */
      let broken = "";
      const onData = (chunk: Buffer): void => {
        this.lastHeard = Date.now();
        for (const frame of reader.push(chunk)) {
          const { header } = frame;
          if (header.kind === "ready") {
            started = true;
            this.state = "ready";
            this.watchHealth();
            resolve();
          } else if (header.kind === "fatal") fatal = String(header.message);
          else this.received(frame);
        }
      };
      fromPython.on("data", (chunk: Buffer) => {
        try {
          onData(chunk);
        } catch (error) {
          // A frame this end cannot read (or act on) is the process's fault, never the data
          // plane's: the process is killed, and what it held fails as for any exit.
          fromPython.removeAllListeners("data");
          fromPython.resume();
          broken = `sent a frame that cannot be read (${errorMessage(error)}), and was killed`;
          logger.error(
            { err: errorMessage(error) },
            "python model instance sent a frame that cannot be read; killing it",
          );
          child.kill("SIGKILL");
        }
      });
      child.once("error", (error) => {
        fatal ||= `cannot start ${python}: ${error.message}`;
      });
      child.once("close", (code, signal) => {
        this.inputs?.close();
        this.outputs?.close();
        this.inputs = this.outputs = undefined;
        this.abandoned.clear();
        clearInterval(this.healthTimer);
        const how = broken || (signal !== null ? `was killed (${signal})` : `exited with code ${code}`);
        if (!started) {
          this.lastFailure = fatal
            ? `initialize failed: ${fatal.trim()}`
            : `the Python process ${how} before it was ready`;
          reject(unavailable(`python model ${label}: ${this.lastFailure}`));
          return;
        }
        this.exited(`the Python process ${how}${fatal ? `: ${fatal.trim()}` : ""}`);
      });
      this.send({
        kind: "settings",
        ...settings,
        sharedInputsFd: this.inputs === undefined ? 0 : SHARED_INPUTS_FD,
        sharedOutputsFd: this.outputs === undefined ? 0 : SHARED_OUTPUTS_FD,
        pythonShmByteSize,
      });
    });
  }

  /**
   * Gives the process the requests of one execution, which it runs in one execute call in
   * this order: their frames leave together, the last marked as ending the execution.
   * `executed` is called when a decoupled model's execute has returned (or the process is
   * gone). Returns each request's id, to cancel it with.
   */
  submitExecution(requests: readonly SubmittedRequest[], executed?: () => void): number[] {
    if (this.state !== "ready") throw unavailable(`python model ${this.options.label} is not running`);
    const ids = requests.map(({ fields, inputs, sink }, index) =>
      this.submit({ ...fields, endsExecution: index === requests.length - 1 }, inputs, sink),
    );
    if (executed !== undefined && ids.length > 0) this.executing.set(ids[ids.length - 1]!, executed);
    return ids;
  }

  /** Gives the process a request: its inputs go in the frame, or the large ones in shared memory. */
  private submit(
    request: Omit<FieldsOfToStub<"execute">, "id" | "inputs">,
    inputs: readonly InputTensor[],
    sink: RequestSink,
  ): number {
    const id = ++this.nextId;
    const described: InputTensorPart[] = [];
    const payload: Uint8Array[] = [];
    const regions: number[] = [];
    let offset = 0;
    for (const tensor of inputs) {
      const where =
        this.inputs !== undefined && tensor.data.byteLength >= SHARED_MEMORY_FROM
          ? this.inputs.put(tensor.data)
          : undefined;
      const { name, datatype, shape } = tensor;
      const byteSize = tensor.data.byteLength;
      if (where !== undefined) {
        regions.push(where);
        described.push({ name, datatype, shape, offset: where, byteSize, inSharedMemory: true });
        continue;
      }
      // Each tensor starts 8-byte aligned in the payload, so numpy views of it are aligned.
      const padding = (8 - (offset % 8)) % 8;
      if (padding > 0) payload.push(PADDING.subarray(0, padding));
      offset += padding;
      described.push({ name, datatype, shape, offset, byteSize, inSharedMemory: false });
      payload.push(tensor.data);
      offset += byteSize;
    }
    this.sinks.set(id, { sink, regions });
    this.send({ kind: "execute", ...request, id, inputs: described }, payload);
    return id;
  }

  /**
   * The engine wants no more of the request (it failed, was cancelled, or its consumer
   * stopped): the model is told it was cancelled (is_cancelled()), and the request no longer
   * counts as outstanding, nor are its later frames kept. Its input regions stay taken until
   * the process's final frame for it: the model may still be reading them.
   */
  abandon(id: number): void {
    const entry = this.sinks.get(id);
    if (entry === undefined) return;
    this.send({ kind: "cancel", id });
    this.sinks.delete(id);
    if (entry.regions.length > 0) this.abandoned.set(id, entry.regions);
  }

  /** Answers a model's call to another model (BLS). */
  answerModelCall(response: FieldsOfToStub<"callResponse">, payload: readonly Uint8Array[] = []): void {
    if (this.state === "ready") this.send({ kind: "callResponse", ...response }, payload);
  }

  /** Finishes the process (the model's finalize runs), killing it if it takes too long. */
  async close(): Promise<void> {
    const previous = this.state;
    this.state = "closed";
    clearTimeout(this.restartTimer);
    clearInterval(this.healthTimer);
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
    if (previous === "ready") this.send({ kind: "finish" });
    else child.kill("SIGKILL");
    const timer = setTimeout(() => child.kill("SIGKILL"), FINISH_GRACE_MS);
    await closed;
    clearTimeout(timer);
    this.failAll(unavailable(`python model ${this.options.label} was unloaded`));
  }

  private received(frame: Frame): void {
    const { header } = frame;
    if (header.kind === "response") {
      const entry = this.sinks.get(header.id);
      // Read (for a request still waiting) and free what the response put in shared memory.
      const answered = this.withSharedOutputs(frame, header, entry !== undefined);
      if (header.final) this.finish(header.id);
      entry?.sink.frame(answered);
    } else if (header.kind === "executed") {
      const executed = this.executing.get(header.id);
      this.executing.delete(header.id);
      executed?.();
    } else if (header.kind === "call") this.options.onModelCall(frame, header, this);
    else if (header.kind === "log") {
      const level = LOG_LEVELS[header.level] ?? "info";
      this.options.logger[level]({ stream: "pb_utils.Logger" }, String(header.message));
    }
  }

  /**
   * Frees the regions of the outputs the process put in shared memory (described with an
   * offset), reading them out first when the request still wants them.
   */
  private withSharedOutputs(frame: Frame, response: FromStub<"response">, wanted: boolean): Frame {
    const offsets: number[] = [];
    const lengths: number[] = [];
    for (const output of response.outputs ?? []) {
      if (output.sharedOffset === undefined) continue;
      offsets.push(output.sharedOffset);
      lengths.push(output.byteSize);
    }
    if (offsets.length === 0 || this.outputs === undefined) return frame;
    const outputs = this.outputs;
    const shared = wanted ? offsets.map((offset, index) => outputs.read(offset, lengths[index]!)) : [];
    this.send({ kind: "freeOutputs", offsets });
    return { ...frame, shared };
  }

  private finish(id: number): void {
    const regions = this.sinks.get(id)?.regions ?? this.abandoned.get(id) ?? [];
    this.sinks.delete(id);
    this.abandoned.delete(id);
    for (const region of regions) this.inputs?.free(region);
  }

  private failAll(error: DataPlaneError): void {
    const sinks = [...this.sinks.values()];
    const executing = [...this.executing.values()];
    this.sinks.clear();
    this.executing.clear();
    for (const { sink } of sinks) sink.fail(error);
    // No execute of this process runs any more.
    for (const executed of executing) executed();
  }

  /** The process died while serving: its requests fail now, and it is started again after a pause. */
  private exited(why: string): void {
    const { label, logger } = this.options;
    this.failAll(unavailable(`python model ${label}: ${why} while serving this request`));
    if (this.state === "closed") return;
    this.state = "restarting";
    this.lastFailure = why;
    if (Date.now() - this.startedAt > LONGEST_RESTART_DELAY_MS) this.restartDelay = FIRST_RESTART_DELAY_MS;
    logger.error({ restartInMs: this.restartDelay }, `python model instance failed: ${why}; restarting`);
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    const delay = this.restartDelay;
    this.restartDelay = Math.min(this.restartDelay * 2, LONGEST_RESTART_DELAY_MS);
    this.restartTimer = setTimeout(() => {
      if (this.state !== "restarting") return;
      this.start().then(
        () => this.options.logger.info("python model instance restarted"),
        (error: unknown) => {
          if (this.state === "closed") return;
          this.state = "restarting";
          this.options.logger.error({ err: errorMessage(error) }, "python model instance failed to restart");
          this.scheduleRestart();
        },
      );
    }, delay);
    this.restartTimer.unref();
  }

  /** Health checks, as Triton's stub timeout: a process that answers nothing for too long is killed. */
  private watchHealth(): void {
    // Triton's stub timeout: a process that answers no health check for this long is killed and replaced.
    const stubTimeoutMs = this.options.hosting.pythonStubTimeoutSecs * 1000;
    const interval = Math.max(100, Math.floor(stubTimeoutMs / 3));
    this.healthTimer = setInterval(() => {
      if (Date.now() - this.lastHeard > stubTimeoutMs) {
        clearInterval(this.healthTimer);
        this.options.logger.error(
          { silentMs: Date.now() - this.lastHeard },
          "python model instance stopped answering; killing it",
        );
        this.child?.kill("SIGKILL");
        return;
      }
      this.send({ kind: "ping" });
    }, interval);
    this.healthTimer.unref();
  }

  private send(message: ToStub, payload: readonly Uint8Array[] = []): void {
    const toPython = this.child?.stdio[3] as Writable | undefined;
    if (toPython === undefined || toPython.destroyed) return;
    // Corked until the event loop's I/O callbacks are done (setImmediate): the requests that
    // arrived on every connection in this turn leave in one write, so the process wakes
    // once for them rather than once each.
    if (this.corked === undefined) {
      toPython.cork();
      this.corked = setImmediate(() => {
        this.corked = undefined;
        toPython.uncork();
      });
    }
    for (const part of encodeFrame(message, payload)) toPython.write(part);
  }
}

/** An input as the instance sends it. */
export interface InputTensor {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/** Tensors this large go through shared memory; smaller ones cost less in the frame. */
const SHARED_MEMORY_FROM = 64 * 1024;
const PADDING = new Uint8Array(8);

const LOG_LEVELS: Readonly<Record<string, "info" | "warn" | "error" | "debug">> = {
  info: "info",
  warn: "warn",
  error: "error",
  debug: "debug",
};

const joinPath = (first: string, rest: string | undefined): string => (rest ? `${first}:${rest}` : first);

/** An error a request gets when no instance of its model can take it. */
export const noInstance = (label: string, why: string): DataPlaneError =>
  unavailable(`python model ${label} is not available: ${why}`);

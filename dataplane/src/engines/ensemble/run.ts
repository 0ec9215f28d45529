import type { EnsembleSettings, EnsembleStep } from "../../../../lib/engines/ensemble.js";
import { abortedError, DataPlaneError, errorMessage, internal, UpstreamStatusError } from "../../../../lib/errors.js";
import type { ModelInferRequest, ModelInferResponse } from "../../../../proto/gen/ts/grpc_service.js";
import { outputTensor } from "../../tensors/request.js";
import type { Tensor } from "../../tensors/tensor.js";
import type { EngineRequest, EngineResponse, InferOptions, ModelInference } from "../engine.js";
import type { Limiter } from "./limiter.js";

/** An ensemble's step graph, checked against its step models. */
export interface EnsemblePlan {
  readonly settings: EnsembleSettings;
  /** By step: whether its model is decoupled (each response flows on by itself). */
  readonly decoupled: readonly boolean[];
  /** By step: the steps its outputs flow into, directly or through others. */
  readonly downstream: readonly ReadonlySet<number>[];
  /** By step, with max_inflight_requests: its calls running at once, over all requests. */
  readonly limiters: readonly (Limiter | undefined)[];
}

/**
 * The tensors of one flow through the graph: the request's, and what steps made of them.
 * A decoupled step's every response starts a flow of its own (a copy, with that response's
 * outputs) in which only the steps downstream of it run, as Triton runs them.
 */
interface Flow {
  readonly tensors: Map<string, Tensor>;
  /** Steps that may still run in this flow (not started, and needed). */
  readonly pending: Set<number>;
  /** Whether this flow has made its response (every wanted output is in it). */
  answered: boolean;
}

/** Responses made and not yet taken, past which a decoupled step waits before reading on. */
const MAX_UNTAKEN_RESPONSES = 8;

/**
 * One request through an ensemble: steps start as their inputs become ready (parallel
 * branches together), each through the pipeline with the request's deadline and cancel;
 * the first failure cancels the other steps and fails the request, naming its step.
 */
export class EnsembleRun {
  private readonly settings: EnsembleSettings;
  private readonly controller = new AbortController();
  /** The ensemble outputs the response carries: those asked for, else every one. */
  private readonly wanted: readonly string[];
  /** Declared optional inputs the request left out: ready, with no tensor. */
  private readonly absent = new Set<string>();
  private readonly untaken: EngineResponse[] = [];
  private running = 0;
  private failure: DataPlaneError | undefined;
  /** Wakes whoever waits on the run: the response loop, or a decoupled step waiting for room. */
  private waiters: (() => void)[] = [];
  private readonly unlink: () => void;

  constructor(
    private readonly plan: EnsemblePlan,
    private readonly inference: ModelInference,
    private readonly request: EngineRequest,
    private readonly options: InferOptions,
  ) {
    this.settings = plan.settings;
    const declared = this.settings.outputs.map((output) => output.name);
    this.wanted =
      request.requestedOutputs.size > 0 ? declared.filter((name) => request.requestedOutputs.has(name)) : declared;
    const given = new Set(request.inputs.map((input) => input.name));
    for (const input of this.settings.inputs) if (!given.has(input.name)) this.absent.add(input.name);
    const abort = (): void => this.controller.abort(options.signal.reason);
    if (options.signal.aborted) abort();
    options.signal.addEventListener("abort", abort, { once: true });
    this.unlink = () => options.signal.removeEventListener("abort", abort);
    // A step waiting for room to read on sees the run end (its caller gone, or a failure).
    this.controller.signal.addEventListener("abort", () => this.wake(), { once: true });
  }

  async *responses(): AsyncGenerator<EngineResponse> {
    try {
      const root: Flow = {
        tensors: new Map(this.request.inputs.map((input) => [input.name, input])),
        pending: this.neededSteps(),
        answered: false,
      };
      void this.advance(root);
      for (;;) {
        if (this.failure !== undefined) throw this.failure;
        const next = this.untaken.shift();
        if (next !== undefined) {
          this.wake();
          yield next;
          continue;
        }
        if (this.running === 0) {
          // Cancelled (or past its deadline) with its steps stopped: no step is left to answer.
          if (this.controller.signal.aborted) throw abortedError(this.controller.signal);
          return;
        }
        await this.changed();
      }
    } finally {
      // Done, failed, or the consumer stopped: steps still running are cancelled.
      if (this.running > 0) this.controller.abort(this.failure ?? internal("the ensemble's request ended"));
      this.unlink();
    }
  }

  /** The steps the wanted outputs need, directly or through others (Triton prunes the rest). */
  private neededSteps(): Set<number> {
    const needed = new Set<number>();
    const tensors = [...this.wanted];
    for (let tensor = tensors.pop(); tensor !== undefined; tensor = tensors.pop()) {
      const step = this.settings.producer.get(tensor);
      if (step === undefined || needed.has(step)) continue;
      needed.add(step);
      tensors.push(...this.settings.steps[step]!.inputMap.values());
    }
    return needed;
  }

  /**
   * Starts every pending step of the flow whose inputs are all ready; resolves once each has
   * its place under max_inflight_requests (at once without it).
   */
  private advance(flow: Flow): Promise<void> {
    // Its caller gone (or a step failed): no step starts (a request read after its client
    // left would otherwise start each of its steps, all doomed).
    if (this.controller.signal.aborted) return Promise.resolve();
    const started: Promise<void>[] = [];
    for (const index of this.settings.order) {
      if (!flow.pending.has(index)) continue;
      const step = this.settings.steps[index]!;
      const ready = [...step.inputMap.values()].every((tensor) => flow.tensors.has(tensor) || this.absent.has(tensor));
      if (!ready) continue;
      flow.pending.delete(index);
      started.push(this.launch(flow, step));
    }
    return Promise.all(started).then(() => undefined);
  }

  private launch(flow: Flow, step: EnsembleStep): Promise<void> {
    this.running++;
    const limiter = this.plan.limiters[step.index];
    const placed = limiter === undefined ? Promise.resolve() : limiter.acquire(this.controller.signal);
    placed
      .then(async () => {
        try {
          await this.runStep(flow, step);
        } finally {
          limiter?.release();
        }
      })
      .catch((error: unknown) => {
        // The first failure is the request's; the steps it cancelled fail after it.
        if (this.failure === undefined) this.fail(stepError(error, this.settings.name, step));
      })
      .finally(() => {
        this.running--;
        this.wake();
      });
    return placed.catch(() => undefined);
  }

  private async runStep(flow: Flow, step: EnsembleStep): Promise<void> {
    const decoupled = this.plan.decoupled[step.index]!;
    const lifetime = { signal: this.controller.signal, deadline: this.options.deadline };
    for await (const response of this.inference(this.stepRequest(flow, step), decoupled, lifetime)) {
      if (this.controller.signal.aborted) return;
      const outputs = stepOutputs(response, step);
      if (!decoupled) {
        for (const tensor of outputs) flow.tensors.set(tensor.name, tensor);
        this.answerIfDone(flow);
        void this.advance(flow);
        continue;
      }
      const tensors = new Map(flow.tensors);
      for (const tensor of outputs) tensors.set(tensor.name, tensor);
      const pending = new Set([...this.plan.downstream[step.index]!].filter((index) => flow.pending.has(index)));
      const branch: Flow = { tensors, pending, answered: flow.answered };
      this.answerIfDone(branch);
      // As Triton: with max_inflight_requests, the next response waits for room downstream.
      await this.advance(branch);
      // A client that reads slower than the step streams holds the step, not the data plane's memory.
      while (this.untaken.length >= MAX_UNTAKEN_RESPONSES && !this.controller.signal.aborted) await this.changed();
    }
  }

  /** The step's request: its inputs from the flow's tensors, its mapped outputs asked for, the request's parameters. */
  private stepRequest(flow: Flow, step: EnsembleStep): ModelInferRequest {
    const inputs: ModelInferRequest["inputs"] = [];
    const raw: Uint8Array[] = [];
    for (const [input, name] of step.inputMap) {
      const tensor = flow.tensors.get(name);
      if (tensor === undefined) continue; // an optional ensemble input the request left out
      inputs.push({
        name: input,
        datatype: tensor.datatype,
        shape: tensor.shape.map(BigInt),
        parameters: {},
        contents: undefined,
      });
      raw.push(tensor.data);
    }
    return {
      modelName: step.modelName,
      modelVersion: step.modelVersion,
      id: this.request.id,
      // As Triton: the request's parameters (priority, timeout, custom ones) reach every step.
      parameters: { ...this.request.parameters },
      inputs,
      outputs: [...step.outputMap.keys()].map((name) => ({ name, parameters: {} })),
      rawInputContents: raw,
    };
  }

  /** The flow's response, once every wanted output is in it. */
  private answerIfDone(flow: Flow): void {
    if (flow.answered || !this.wanted.every((name) => flow.tensors.has(name))) return;
    flow.answered = true;
    this.untaken.push({ outputs: this.wanted.map((name) => flow.tensors.get(name)!) });
    this.wake();
  }

  private fail(error: DataPlaneError): void {
    if (this.failure !== undefined) return;
    this.failure = error;
    this.controller.abort(error);
    this.wake();
  }

  private changed(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }
}

/** A step's response as ensemble tensors (its outputs renamed by the output map); every mapped output must be there. */
function stepOutputs(response: ModelInferResponse, step: EnsembleStep): Tensor[] {
  const tensors: Tensor[] = [];
  for (const [output, name] of step.outputMap) {
    const index = response.outputs.findIndex((tensor) => tensor.name === output);
    if (index < 0) throw internal(`the response has no output '${output}'`);
    // The ensemble's response carries no parameters of its steps' outputs.
    const { datatype, shape, data } = outputTensor(response.outputs[index]!, response.rawOutputContents[index]);
    tensors.push({ name, datatype, shape, data });
  }
  return tensors;
}

/** A step's failure as the ensemble's: its kind (and an upstream's gRPC code) kept, the step and model named. */
function stepError(error: unknown, ensemble: string, step: EnsembleStep): DataPlaneError {
  const message = `ensemble '${ensemble}' step ${step.index} (model '${step.modelName}'): ${errorMessage(error)}`;
  if (error instanceof UpstreamStatusError) return new UpstreamStatusError(error.kind, error.grpcCode, message);
  if (error instanceof DataPlaneError) return new DataPlaneError(error.kind, message);
  return internal(message);
}

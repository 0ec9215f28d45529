import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import type { Engine } from "../engines/engine.js";
import { abortedError, DataPlaneError, type ErrorKind, unimplemented } from "../../../lib/errors.js";
import { errorDetail } from "../limits.js";
import type { FrontendMetrics, InferenceEndpoint, RequestObservation, RequestType } from "../metrics/frontend.js";
import type { InFlight } from "../models/in-flight.js";
import type { ModelLease, ModelRegistry } from "../models/registry.js";
import { GATHERS_UNARY_RESPONSES, type ModelSpec } from "../../../lib/model-repository/spec.js";
import { msToNs, nowNs } from "../models/statistics.js";
import { defaultPlace, namesQueuePlace, queuePlaceOf, type QueuePlace } from "../scheduling/parameters.js";
import type { ExecutionReport, RequestScheduler } from "../scheduling/scheduler.js";
import type { RequestSpan, RequestTracing } from "../tracing/tracing.js";
import type { RequestLifetime } from "./lifetime.js";
import type { SystemSharedMemory } from "../shared-memory/regions.js";

/** What every inference request reports to: the models, the metrics, the logs, the traces. */
export interface InferenceContext {
  readonly registry: ModelRegistry;
  readonly metrics: FrontendMetrics;
  readonly logger: Logger;
  /** Every inference request running in this server (shutdown waits for them). */
  readonly active: InFlight;
  readonly tracing: RequestTracing;
  /** The largest message (--max-message-size): also what a reply gathered from many responses may hold. */
  readonly maxMessageSize: number;
  /** The data plane's system shared-memory regions, which requests' tensors may name. */
  readonly sharedMemory: SystemSharedMemory;
}

/**
 * What a request's scope reads of it: the fields before its tensors (a ModelInferRequest,
 * or a request passed through undecoded, server/request-decoding.ts).
 */
export interface RequestHead {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id: string;
  readonly parameters: Readonly<Record<string, InferParameter>>;
}

/** How a request came in. */
export interface Entry {
  readonly endpoint: InferenceEndpoint;
  /** A stream of responses (a streaming RPC, SSE) or one reply. */
  readonly requestType: RequestType;
  /** How it came: gRPC, HTTP, or from a model calling another (BLS). */
  readonly protocol: "grpc" | "http" | "bls";
  /**
   * One reply made of all of a decoupled model's responses: always (generate, OpenAI without
   * stream), or only for a model that opts in (ModelInfer: ModelSpec.gathersUnaryResponses,
   * the pipeline then gathers them, inference/gather.ts).
   */
  readonly gathersResponses?: boolean | "if-the-model-opts-in";
  /** What a caller of a decoupled model on this entry should use instead. */
  readonly forDecoupledUse?: string;
}

/** The model a request was admitted to. */
export interface Admitted {
  readonly spec: ModelSpec;
  readonly engine: Engine;
  /** The version the request resolved to (the latest served when it named none). */
  readonly version: string;
  /**
   * For a model the data plane schedules (dataplane/src/scheduling/): the version's
   * scheduler and where the request queues in it.
   */
  readonly scheduling: { readonly scheduler: RequestScheduler; readonly place: QueuePlace } | undefined;
  /** It named `priority` or `timeout`, which are the scheduler's: the engine does not see them. */
  readonly namedQueuePlace: boolean;
}

/** Failures the caller caused (logged at debug); the others are the data plane's or an upstream's (warn). */
const CLIENT_ERRORS = new Set<ErrorKind>([
  "InvalidArgument",
  "NotFound",
  "Cancelled",
  "DeadlineExceeded",
  "FailedPrecondition",
  "Unimplemented",
  "ResourceExhausted",
]);

/**
 * Everything one inference request holds, owned in one place. Created when the request
 * arrives (its tracing span starts). `admit` resolves the model and version and refuses
 * what cannot be served — an unknown model or version, a model that is not ready, a
 * decoupled model on a unary RPC — before anything is held, as Triton does; then it takes
 * the model's engine (a lease, so a reload closes it only after this request), a place in
 * the server's in-flight count and the metrics observation. `close` gives all of it back,
 * records the statistics, ends the span and writes the log line, exactly once, whatever
 * happened; a refusal is counted as an error for a model this data plane serves.
 *
 * A request passed through undecoded (inference/forward.ts) uses the lean calls instead of
 * `decoded`/`produced`/`encoded`: `receivedMessage` once admitted, `forwarded` per message relayed,
 * `produced` once at the end; its statistics then show no input or output phase, and its
 * time in the engine is the upstream's, to its last byte.
 */
export class RequestScope {
  // Times from performance.now(), in ms: numbers, where BigInt nanoseconds allocated per reading.
  private readonly received = performance.now();
  private readonly span: RequestSpan;
  private lease: ModelLease | undefined;
  private observation: RequestObservation | undefined;
  /** A served model when admission refused the request (an unknown name mints no series). */
  private refusedFor: ModelSpec | undefined;
  private failure: unknown;
  private succeeded = false;
  private closed = false;
  private responses = 0;
  private batchSize = 1;
  // Phase times, Triton's statistics: decoding inputs, in the engine, encoding outputs.
  private admittedAt = 0;
  private decodedAt = 0;
  private inferMs = 0;
  private outputMs = 0;
  private mark = 0;
  /** Scheduled: from its arrival in the scheduler's queue to its execution's start. */
  private queueNs: bigint | undefined;
  /** Scheduled: the execution it ran in, told its compute times at the end. */
  private execution: ExecutionReport | undefined;
  /** Gives back what the request holds besides its model (its shared-memory regions' leases). */
  private releaseHeld: (() => void) | undefined;

  constructor(
    private readonly context: InferenceContext,
    private readonly request: RequestHead,
    private readonly entry: Entry,
    private readonly lifetime: RequestLifetime,
  ) {
    this.span = context.tracing.start(entry, request, lifetime);
  }

  /** The trace-context headers of this request's span, for engines to hand on upstream. */
  get traceHeaders(): Readonly<Record<string, string>> {
    return this.span.headers;
  }

  /** The caller takes one reply per request (a unary RPC, an HTTP reply that is not a stream). */
  get isUnary(): boolean {
    return this.entry.requestType === "unary";
  }

  /** Admission, then what the request holds; throws (holding nothing) if it is refused. */
  admit(): Admitted {
    const { registry, active, metrics } = this.context;
    const resolved = registry.resolve(this.request.modelName, this.request.modelVersion);
    const { spec, engine, schedulers, scheduled } = resolved.model;
    const namedQueuePlace = scheduled && namesQueuePlace(this.request.parameters);
    let place: QueuePlace | undefined;
    if (namedQueuePlace) {
      try {
        place = queuePlaceOf(spec.name, spec.scheduling, this.request.parameters);
      } catch (error) {
        this.refusedFor = spec;
        throw error;
      }
    }
    const scheduler = schedulers?.get(resolved.version);
    const scheduling =
      scheduler === undefined ? undefined : { scheduler, place: place ?? defaultPlace(spec.scheduling) };
    if (this.isUnary && spec.decoupled && !this.gathers(spec)) {
      this.refusedFor = spec;
      const optIn =
        this.entry.gathersResponses === "if-the-model-opts-in"
          ? `, or set parameters["${GATHERS_UNARY_RESPONSES}"] to "true" in its config for one reply gathering its responses`
          : "";
      throw unimplemented(
        `model '${spec.name}' is decoupled (model_transaction_policy.decoupled); use ${this.entry.forDecoupledUse ?? "the ModelStreamInfer RPC"}${optIn}`,
      );
    }
    this.lease = registry.hold(resolved);
    active.begin();
    this.observation = metrics.start(spec, this.entry.endpoint, this.entry.requestType);
    this.admittedAt = performance.now();
    return { spec, engine, version: resolved.version, scheduling, namedQueuePlace };
  }

  /** Whether this entry gathers the model's responses into one reply (a decoupled model on a unary entry). */
  gathers(spec: ModelSpec): boolean {
    const { gathersResponses } = this.entry;
    return gathersResponses === true || (gathersResponses === "if-the-model-opts-in" && spec.gathersUnaryResponses);
  }

  /** `release` runs once when the request ends, however it ends (shared-memory leases). */
  holds(release: () => void): void {
    this.releaseHeld = release;
  }

  /** The inputs are decoded and checked: `bytes` of tensor data. */
  decoded(batchSize: number, bytes: number): void {
    this.batchSize = batchSize;
    this.observation?.received(bytes);
    this.decodedAt = this.mark = performance.now();
  }

  /**
   * Lean: a request passed through undecoded was admitted with its message of `bytes` (counted
   * as received bytes, where a decoded request counts its tensors'); the engine's clock starts.
   */
  receivedMessage(bytes: number): void {
    this.observation?.received(bytes);
    this.decodedAt = this.mark = this.admittedAt;
  }

  /** Lean: an upstream's message of `bytes` was relayed to the client as it came. */
  forwarded(bytes: number): void {
    this.responses++;
    this.observation?.response(bytes);
  }

  /**
   * The scheduler started the request's execution: it waited in the queue from `enqueuedNs`,
   * and its time in the engine counts from `startedNs`.
   */
  readonly executing = (enqueuedNs: bigint, startedNs: bigint, execution: ExecutionReport): void => {
    this.queueNs = startedNs - enqueuedNs;
    this.mark = performance.now() - Number(nowNs() - startedNs) / 1e6;
    this.execution = execution;
  };

  /** The engine has produced a response (or finished). */
  produced(): void {
    const now = performance.now();
    this.inferMs += now - this.mark;
    this.mark = now;
  }

  /** A response of `bytes` (its tensor data, or the message passed through) is encoded and about to leave. */
  encoded(bytes: number): void {
    const now = performance.now();
    this.outputMs += now - this.mark;
    this.responses++;
    this.observation?.response(bytes);
  }

  /** The caller has taken the response: the clock of the engine's next step starts. */
  resumed(): void {
    this.mark = performance.now();
  }

  get responseCount(): number {
    return this.responses;
  }

  succeed(): void {
    this.succeeded = true;
  }

  /** Records why the request failed and returns the error to throw (a cancel is told as one). */
  fail(error: unknown): unknown {
    const { signal } = this.lifetime;
    this.failure = signal.aborted && !(error instanceof DataPlaneError) ? abortedError(signal) : error;
    return this.failure;
  }

  /** Gives back everything held and reports the request, once. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    // A request its caller stopped reading (the generator closed early) ended as cancelled.
    if (!this.succeeded && this.failure === undefined) this.failure = abortedError(this.lifetime.signal);
    const { metrics, active } = this.context;
    this.releaseHeld?.();
    this.span.end(this.succeeded ? undefined : this.failure);
    if (this.lease !== undefined) {
      const phases = {
        totalNs: msToNs(performance.now() - this.received),
        queueNs: this.queueNs === undefined ? msToNs(this.admittedAt - this.received) : Number(this.queueNs),
        computeInputNs: msToNs(this.decodedAt - this.admittedAt),
        computeInferNs: msToNs(this.inferMs),
        computeOutputNs: msToNs(this.outputMs),
      };
      // A scheduled request's execution is recorded once, with its other requests; any
      // other request is an execution of its own.
      this.execution?.report({
        computeInputNs: BigInt(phases.computeInputNs),
        computeInferNs: BigInt(phases.computeInferNs),
        computeOutputNs: BigInt(phases.computeOutputNs),
      });
      if (this.succeeded) this.lease.statistics.recordRequest(this.batchSize, phases, this.execution === undefined);
      else this.lease.statistics.recordFailure(phases.totalNs);
      this.observation?.end(this.succeeded ? undefined : this.failure);
      active.end();
      this.lease.release();
      this.log(this.lease.version);
    } else if (this.refusedFor !== undefined) {
      metrics.refused(this.refusedFor, this.entry.endpoint, this.entry.requestType, this.failure);
      this.log(this.request.modelVersion);
    }
  }

  /**
   * One line per finished request, with its id (the request's `id`, or one made up) so a
   * user can find it: debug for successes and the caller's mistakes, warn for the rest.
   */
  private log(version: string): void {
    const { logger } = this.context;
    const failure = this.succeeded ? undefined : this.failure;
    const kind = failure instanceof DataPlaneError ? failure.kind : failure === undefined ? undefined : "Internal";
    const level = kind === undefined || CLIENT_ERRORS.has(kind) ? "debug" : "warn";
    if (!logger.isLevelEnabled(level)) return;
    logger[level](
      {
        requestId: this.request.id || randomUUID(),
        model: this.request.modelName,
        version,
        endpoint: this.entry.endpoint,
        responses: this.responses,
        ms: performance.now() - this.received,
        ...(failure === undefined ? {} : { err: errorDetail(failure), kind }),
      },
      failure === undefined ? "request served" : "request failed",
    );
  }
}

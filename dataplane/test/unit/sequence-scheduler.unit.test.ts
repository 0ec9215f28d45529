import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { DataPlaneError, type ErrorKind } from "../../../lib/errors.js";
import type { Scheduling } from "../../../lib/model-repository/scheduling.js";
import type { SequenceBatching } from "../../../lib/model-repository/sequence-batching.js";
import type { Engine, EngineRequest, EngineResponse, Execution, InferOptions } from "../../src/engines/engine.js";
import { MAX_SEQUENCE_BACKLOG } from "../../src/limits.js";
import type { ComputeTimings } from "../../src/models/statistics.js";
import { splitBytesElements } from "../../src/tensors/bytes.js";
import type { SequenceId, SequenceRequest } from "../../src/tensors/parameters.js";
import type { Tensor } from "../../src/tensors/tensor.js";
import { queuePlaceOf } from "../../src/scheduling/parameters.js";
import { SequenceScheduler } from "../../src/scheduling/sequence.js";

/** What the model saw of one request of an execution: its id ("" for a null request) and control values. */
interface SeenRequest {
  readonly id: string;
  readonly start: number;
  readonly end: number;
  readonly ready: number;
  readonly corrid: bigint | string | undefined;
  /** Every byte of its client inputs is 0 (a null request's). */
  readonly zeroed: boolean;
}

interface SeenBatch {
  readonly instance: number;
  readonly requests: readonly SeenRequest[];
  /** Answers every request of the execution. */
  finish(): void;
}

const controlValue = (tensor: Tensor | undefined): number => {
  if (tensor === undefined) return NaN;
  const view = new DataView(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  if (tensor.datatype === "INT32") return view.getInt32(0, true);
  if (tensor.datatype === "FP32") return view.getFloat32(0, true);
  return tensor.data[0]!;
};

function corridOf(tensor: Tensor | undefined): bigint | string | undefined {
  if (tensor === undefined) return undefined;
  if (tensor.datatype === "BYTES") return new TextDecoder().decode(splitBytesElements(tensor.data)[0]);
  const view = new DataView(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  return tensor.data.byteLength === 8 ? view.getBigUint64(0, true) : BigInt(view.getUint32(0, true));
}

function seen(request: EngineRequest): SeenRequest {
  const named = (name: string): Tensor | undefined => request.inputs.find((input) => input.name === name);
  return {
    id: request.id,
    start: controlValue(named("START")),
    end: controlValue(named("END")),
    ready: controlValue(named("READY")),
    corrid: corridOf(named("CORRID")),
    zeroed: named("IN")!.data.every((byte) => byte === 0),
  };
}

/** An engine that records each execution as the model sees it, and answers once the test finishes it (or at once). */
class RecordingEngine implements Engine {
  readonly batches: SeenBatch[] = [];
  /** Every request the engine was called with, in call order. */
  readonly requests: EngineRequest[] = [];
  holding = false;
  private readonly gates = new Map<Execution, Promise<void>>();

  async *infer(request: EngineRequest, options: InferOptions): AsyncIterable<EngineResponse> {
    const execution = options.execution!;
    this.requests.push(request);
    let gate = this.gates.get(execution);
    if (gate === undefined) {
      let finish: () => void = () => undefined;
      gate = this.holding ? new Promise<void>((resolve) => (finish = resolve)) : Promise.resolve();
      this.gates.set(execution, gate);
      this.batches.push({ instance: execution.instance, requests: execution.requests.map(seen), finish });
    }
    await gate;
    yield { outputs: [], parameters: { id: { parameterChoice: { $case: "stringParam", value: request.id } } } };
  }

  /** Each execution's request ids, null requests as "-". */
  get ids(): string[][] {
    return this.batches.map((batch) => batch.requests.map((request) => request.id || "-"));
  }

  finishAll(): void {
    for (const batch of this.batches) batch.finish();
  }

  async close(): Promise<void> {}
}

const INT32 = { datatype: "INT32", falseValue: 0, trueValue: 1 } as const;

function sequenceBatching(overrides: Partial<SequenceBatching> = {}): SequenceBatching {
  return {
    strategy: { kind: "direct", maxQueueDelayUs: 0, minimumSlotUtilization: 0 },
    maxSequenceIdleUs: 60_000_000,
    slotsPerInstance: 1,
    controls: {
      start: { name: "START", ...INT32 },
      end: { name: "END", datatype: "FP32", falseValue: 0, trueValue: 1 },
      ready: { name: "READY", datatype: "BOOL", falseValue: false, trueValue: true },
      corrid: { name: "CORRID", datatype: "UINT64" },
    },
    hasState: false,
    iterative: false,
    ...overrides,
  };
}

/** The Oldest strategy on `slots` slots per instance (max_candidate_sequences), one preferred batch size. */
function oldestBatching(options: {
  slots: number;
  preferred: number;
  delayUs: number;
  preserveOrdering: boolean;
}): SequenceBatching {
  const { slots, preferred, delayUs, preserveOrdering } = options;
  return sequenceBatching({
    slotsPerInstance: slots,
    strategy: {
      kind: "oldest",
      maxCandidateSequences: slots,
      preferredBatchSizes: [preferred],
      maxQueueDelayUs: delayUs,
      preserveOrdering,
    },
  });
}

function schedulingOf(batching: SequenceBatching, { maxBatchSize = 0, instances = 1 } = {}): Scheduling {
  return {
    maxBatchSize,
    dynamicBatching: undefined,
    sequenceBatching: batching,
    instanceCount: instances,
    equalShapeInputs: new Set(),
    raggedInputs: new Set(),
    warmup: [],
  };
}

interface Sent {
  readonly controller: AbortController;
  /** The ids of its responses, or why it failed. */
  readonly outcome: Promise<string[]>;
}

interface SendOptions {
  readonly start?: boolean;
  readonly end?: boolean;
  readonly batch?: number;
  readonly timeoutUs?: number;
  readonly report?: ComputeTimings;
}

const uint = (value: number | bigint): SequenceId => ({ kind: "uint", value: BigInt(value) });

const IN: Tensor = { name: "IN", datatype: "FP32", shape: [1, 2], data: new Uint8Array(8) };

function send(
  scheduler: SequenceScheduler,
  id: string,
  sequence: SequenceId | undefined,
  { start = false, end = false, batch = 1, timeoutUs = 0, report }: SendOptions = {},
): Sent {
  const controller = new AbortController();
  const request: EngineRequest = {
    id,
    version: "1",
    parameters: {},
    inputs: [{ name: "IN", datatype: "FP32", shape: [batch, 2], data: new Uint8Array(8 * batch).fill(7) }],
    requestedOutputs: new Set(),
  };
  const place: SequenceRequest | undefined = sequence === undefined ? undefined : { id: sequence, start, end };
  const outcome = (async () => {
    const ids: string[] = [];
    const results = scheduler.infer({
      request,
      batchSize: batch,
      place: { level: 0, timeoutUs },
      options: { signal: controller.signal, deadline: Infinity, traceHeaders: {} },
      oneResponse: true,
      ...(place !== undefined ? { sequence: place } : {}),
      started: (_enqueuedNs, _startedNs, execution) => {
        if (report !== undefined) execution.report(report);
      },
    });
    for await (const response of results) {
      const choice = response.parameters?.["id"]?.parameterChoice;
      ids.push(choice?.$case === "stringParam" ? choice.value : "?");
    }
    return ids;
  })();
  outcome.catch(() => undefined);
  return { controller, outcome };
}

async function rejectsWith(outcome: Promise<unknown>, kind: ErrorKind, text: string | RegExp): Promise<void> {
  await assert.rejects(outcome, (error: unknown) => {
    assert.ok(error instanceof DataPlaneError, String(error));
    assert.equal(error.kind, kind);
    if (typeof text === "string") assert.equal(error.message, text);
    else assert.match(error.message, text);
    return true;
  });
}

const settle = (): Promise<void> => sleep(5);

describe("SequenceScheduler: Triton's sequence batcher, with a recording engine", () => {
  let engine: RecordingEngine;
  const schedulers: SequenceScheduler[] = [];
  const start = (
    batching: SequenceBatching,
    layout: { maxBatchSize?: number; instances?: number } = {},
    statistics?: { recordExecution(size: number, timings: ComputeTimings): void },
  ): SequenceScheduler => {
    const scheduler = new SequenceScheduler({
      model: "m",
      version: "1",
      scheduling: schedulingOf(batching, layout),
      engine,
      ...(statistics !== undefined ? { statistics } : {}),
    });
    schedulers.push(scheduler);
    return scheduler;
  };
  beforeEach(() => {
    engine = new RecordingEngine();
  });
  afterEach(() => {
    engine.finishAll();
    for (const scheduler of schedulers.splice(0)) scheduler.close();
  });

  it("gives a new sequence the lowest free slot index, instances in order on ties (slot 0 of each before slot 1)", async () => {
    const scheduler = start(sequenceBatching({ slotsPerInstance: 2 }), { maxBatchSize: 2, instances: 2 });
    engine.holding = true;
    // The first execution on each instance holds it: the next requests queue in their slots.
    const first = [send(scheduler, "a1", uint(1), { start: true }), send(scheduler, "b1", uint(2), { start: true })];
    await settle();
    assert.deepEqual(
      engine.batches.map((batch) => [batch.instance, batch.requests.map((r) => r.id)]),
      [
        [0, ["a1"]],
        [1, ["b1"]],
      ],
    );
    const next = [
      send(scheduler, "c1", uint(3), { start: true }),
      send(scheduler, "d1", uint(4), { start: true }),
      send(scheduler, "a2", uint(1)),
      send(scheduler, "b2", uint(2)),
    ];
    assert.equal(scheduler.queued, 4);
    engine.finishAll();
    await Promise.all(first.map((sent) => sent.outcome));
    await settle();
    // Slot 0 of instance 0 is a's, slot 1 c's: the batch is in slot order.
    assert.deepEqual(
      engine.batches.slice(2).map((batch) => [batch.instance, batch.requests.map((r) => r.id)]),
      [
        [0, ["a2", "c1"]],
        [1, ["b2", "d1"]],
      ],
    );
    engine.finishAll();
    await Promise.all(next.map((sent) => sent.outcome));
    assert.equal(scheduler.queued, 0);
    assert.equal(scheduler.running, 0);
  });

  it("sets the control tensors: START and END as the flags, READY true, CORRID the ID (integer or string)", async () => {
    const scheduler = start(sequenceBatching());
    assert.deepEqual(await send(scheduler, "a1", uint(2n ** 64n - 1n), { start: true }).outcome, ["a1"]);
    await send(scheduler, "a2", uint(2n ** 64n - 1n), { end: true }).outcome;
    const id = 2n ** 64n - 1n;
    const expected = [
      { id: "a1", start: 1, end: 0, ready: 1, corrid: id, zeroed: false },
      { id: "a2", start: 0, end: 1, ready: 1, corrid: id, zeroed: false },
    ];
    assert.deepEqual(
      engine.batches.map((batch) => batch.requests[0]),
      expected,
    );
    const strings = start(sequenceBatching({ controls: { corrid: { name: "CORRID", datatype: "BYTES" } } }));
    await send(strings, "s1", { kind: "string", value: "session-7" }, { start: true, end: true }).outcome;
    assert.equal(engine.batches[2]!.requests[0]!.corrid, "session-7");
  });

  it("shapes each control [1] on a model that does not batch (Direct, max_batch_size 0), [1, 1] on one that does", async () => {
    const controlShapes = () =>
      engine.requests
        .at(-1)!
        .inputs.filter((input) => input.name !== "IN")
        .map((input) => input.shape);
    await send(start(sequenceBatching()), "a", uint(1), { start: true, end: true }).outcome;
    assert.deepEqual(controlShapes(), [[1], [1], [1], [1]]);
    await send(start(sequenceBatching(), { maxBatchSize: 4 }), "b", uint(1), { start: true, end: true }).outcome;
    assert.deepEqual(controlShapes(), [
      [1, 1],
      [1, 1],
      [1, 1],
      [1, 1],
    ]);
  });

  it("keeps a sequence's requests in arrival order, one at a time, on its slot", async () => {
    const scheduler = start(sequenceBatching());
    engine.holding = true;
    const sent = [1, 2, 3, 4].map((n) => send(scheduler, `a${n}`, uint(9), { start: n === 1, end: n === 4 }));
    for (let n = 0; n < 4; n++) {
      await settle();
      assert.equal(engine.batches.length, n + 1, "one request of the sequence at a time");
      engine.finishAll();
    }
    await Promise.all(sent.map((one) => one.outcome));
    assert.deepEqual(engine.ids, [["a1"], ["a2"], ["a3"], ["a4"]]);
  });

  it("backlogs sequences when every slot is taken, FIFO; an END frees the slot for the oldest", async () => {
    const scheduler = start(sequenceBatching());
    const a = send(scheduler, "a1", uint(1), { start: true });
    await a.outcome;
    const b = send(scheduler, "b1", uint(2), { start: true });
    const c = send(scheduler, "c1", uint(3), { start: true });
    const b2 = send(scheduler, "b2", uint(2), { end: true });
    await settle();
    assert.equal(scheduler.queued, 3, "b and c wait in the backlog");
    assert.deepEqual(engine.ids, [["a1"]]);
    await send(scheduler, "a2", uint(1), { end: true }).outcome;
    await Promise.all([b.outcome, b2.outcome, c.outcome]);
    assert.deepEqual(engine.ids, [["a1"], ["a2"], ["b1"], ["b2"], ["c1"]]);
    // c's sequence did not end: it holds the slot; a new one waits.
    send(scheduler, "d1", uint(4), { start: true });
    await settle();
    assert.equal(scheduler.queued, 1);
  });

  it("refuses, in Triton's words, before anything is queued", async () => {
    const scheduler = start(sequenceBatching(), { maxBatchSize: 4 });
    await rejectsWith(
      send(scheduler, "x", uint(1), { start: true, batch: 2 }).outcome,
      "InvalidArgument",
      "inference request to model 'm' must specify batch-size 1 due to requirements of sequence batcher",
    );
    await rejectsWith(
      send(scheduler, "x", undefined).outcome,
      "InvalidArgument",
      "inference request to model 'm' must specify a non-zero or non-empty correlation ID",
    );
    await rejectsWith(
      send(scheduler, "r7", { kind: "string", value: "abc" }, { start: true }).outcome,
      "InvalidArgument",
      "[request id: r7] sequence batching control 'CORRID' data-type is 'BYTES', but model 'm' expects 'UINT64'",
    );
    const strings = start(sequenceBatching({ controls: { corrid: { name: "CID", datatype: "BYTES" } } }));
    await rejectsWith(
      send(strings, "", uint(5), { start: true }).outcome,
      "InvalidArgument",
      "[request id: <id_unknown>] sequence batching control 'CID' data-type is 'UINT64', but model 'm' expects 'BYTES'",
    );
    await rejectsWith(
      send(scheduler, "x", uint(77)).outcome,
      "InvalidArgument",
      "inference request for sequence 77 to model 'm' must specify the START flag on the first request of the sequence",
    );
    await rejectsWith(
      send(strings, "x", { kind: "string", value: "5" }).outcome,
      "InvalidArgument",
      "inference request for sequence 5 to model 'm' must specify the START flag on the first request of the sequence",
    );
    assert.equal(scheduler.queued, 0);
    assert.equal(engine.batches.length, 0);
  });

  it("keeps the integer 5 and the string '5' apart", async () => {
    const scheduler = start(sequenceBatching({ controls: {} }));
    await send(scheduler, "i", uint(5), { start: true }).outcome;
    await rejectsWith(send(scheduler, "s", { kind: "string", value: "5" }).outcome, "InvalidArgument", /START flag/);
  });

  it("refuses a START past the backlog's bound with UNAVAILABLE, naming it", async function () {
    this.timeout(20_000);
    const scheduler = start(sequenceBatching());
    engine.holding = true;
    send(scheduler, "held", uint(1), { start: true });
    for (let n = 0; n < MAX_SEQUENCE_BACKLOG; n++) send(scheduler, `w${n}`, uint(100 + n), { start: true });
    assert.equal(scheduler.queued, MAX_SEQUENCE_BACKLOG);
    await rejectsWith(
      send(scheduler, "over", uint(999_999), { start: true }).outcome,
      "Unavailable",
      `model 'm' version 1: every sequence slot is taken and the backlog holds ${MAX_SEQUENCE_BACKLOG} requests; retry later`,
    );
    // A request of the sequence in the slot still queues.
    send(scheduler, "held2", uint(1));
    assert.equal(scheduler.queued, MAX_SEQUENCE_BACKLOG + 1);
  });

  it("frees an idle sequence's slot for the backlog; its next request without START is refused", async () => {
    const scheduler = start(sequenceBatching({ maxSequenceIdleUs: 50_000 }));
    await send(scheduler, "a1", uint(1), { start: true }).outcome;
    const b = send(scheduler, "b1", uint(2), { start: true });
    await b.outcome;
    assert.deepEqual(engine.ids, [["a1"], ["b1"]], "a's slot was freed when a was idle");
    await sleep(150);
    await rejectsWith(send(scheduler, "a2", uint(1)).outcome, "InvalidArgument", /sequence 1 .* START flag/);
    await rejectsWith(send(scheduler, "b2", uint(2)).outcome, "InvalidArgument", /sequence 2 .* START flag/);
  });

  it("Oldest: frees an idle sequence's slot for the backlog, whose sequence then runs", async () => {
    const batching = { ...oldestBatching({ slots: 1, preferred: 1, delayUs: 0, preserveOrdering: false }) };
    const scheduler = start({ ...batching, maxSequenceIdleUs: 50_000 });
    await send(scheduler, "a1", uint(1), { start: true }).outcome;
    const b = send(scheduler, "b1", uint(2), { start: true });
    assert.deepEqual(await b.outcome, ["b1"], "b got a's slot once a was idle");
    // b ran when it got the slot, not when it was idle in turn: it is still open.
    assert.deepEqual(await send(scheduler, "b2", uint(2), { end: true }).outcome, ["b2"]);
    assert.deepEqual(engine.ids, [["a1"], ["b1"], ["b2"]]);
  });

  it("does not forget a sequence for the time it waited in the backlog", async () => {
    const scheduler = start(sequenceBatching({ maxSequenceIdleUs: 200_000 }));
    await send(scheduler, "a0", uint(1), { start: true }).outcome;
    const b = send(scheduler, "b1", uint(2), { start: true });
    // a stays busy (a request every 20 ms) for several idle times while b waits in the backlog.
    for (let n = 1; n <= 25; n++) {
      await sleep(20);
      await send(scheduler, `a${n}`, uint(1)).outcome;
    }
    await send(scheduler, "a-end", uint(1), { end: true }).outcome;
    assert.deepEqual(await b.outcome, ["b1"]);
    // Counted from its last request (b1, long ago), b would be forgotten within the backlog's 50 ms recheck.
    await sleep(100);
    assert.deepEqual(await send(scheduler, "b2", uint(2), { end: true }).outcome, ["b2"]);
  });

  it("fails a backlogged sequence past its requests' timeout: UNAVAILABLE, Triton's words", async () => {
    const scheduler = start(sequenceBatching());
    engine.holding = true;
    send(scheduler, "a1", uint(1), { start: true });
    const b = send(scheduler, "b1", uint(2), { start: true, timeoutUs: 30_000 });
    const b2 = send(scheduler, "b2", uint(2));
    await rejectsWith(b.outcome, "Unavailable", "timeout of the corresponding sequence has been expired");
    await rejectsWith(b2.outcome, "Unavailable", "timeout of the corresponding sequence has been expired");
    assert.equal(scheduler.queued, 0);
    await rejectsWith(send(scheduler, "b3", uint(2)).outcome, "InvalidArgument", /START flag/);
  });

  it("ends a sequence when one of its queued requests is cancelled: the others fail, the slot goes to the backlog", async () => {
    const scheduler = start(sequenceBatching());
    engine.holding = true;
    const a1 = send(scheduler, "a1", uint(1), { start: true });
    const a2 = send(scheduler, "a2", uint(1));
    const a3 = send(scheduler, "a3", uint(1));
    const b = send(scheduler, "b1", uint(2), { start: true });
    await settle();
    a2.controller.abort();
    await rejectsWith(a2.outcome, "Cancelled", /./);
    await rejectsWith(
      a3.outcome,
      "Cancelled",
      "sequence 1 of model 'm' version 1 ended: one of its requests was cancelled",
    );
    engine.finishAll();
    await a1.outcome;
    await settle();
    engine.finishAll();
    await b.outcome;
    assert.deepEqual(engine.ids, [["a1"], ["b1"]]);
    await rejectsWith(send(scheduler, "a4", uint(1)).outcome, "InvalidArgument", /START flag/);
  });

  it("runs the requests queued before a cancelled one (Triton sees a cancel at the head of the slot); those after it fail", async () => {
    const scheduler = start(sequenceBatching());
    engine.holding = true;
    const a1 = send(scheduler, "a1", uint(1), { start: true });
    const a2 = send(scheduler, "a2", uint(1));
    const a3 = send(scheduler, "a3", uint(1));
    const a4 = send(scheduler, "a4", uint(1));
    const b = send(scheduler, "b1", uint(2), { start: true, end: true });
    await settle();
    a3.controller.abort();
    await rejectsWith(a3.outcome, "Cancelled", /./);
    await rejectsWith(
      a4.outcome,
      "Cancelled",
      "sequence 1 of model 'm' version 1 ended: one of its requests was cancelled",
    );
    await rejectsWith(send(scheduler, "a5", uint(1)).outcome, "InvalidArgument", /START flag/);
    engine.finishAll();
    assert.deepEqual(await a1.outcome, ["a1"]);
    await settle();
    engine.finishAll();
    assert.deepEqual(await a2.outcome, ["a2"], "a2 came before the cancelled request: it runs");
    await settle();
    engine.finishAll();
    assert.deepEqual(await b.outcome, ["b1"], "the slot goes to the backlog once a2 is done");
    assert.deepEqual(engine.ids, [["a1"], ["a2"], ["b1"]]);
    assert.equal(scheduler.queued, 0);
  });

  it("drops a backlogged sequence whose request is cancelled", async () => {
    const scheduler = start(sequenceBatching());
    engine.holding = true;
    send(scheduler, "a1", uint(1), { start: true });
    const b1 = send(scheduler, "b1", uint(2), { start: true });
    const b2 = send(scheduler, "b2", uint(2));
    b1.controller.abort();
    await rejectsWith(b1.outcome, "Cancelled", /./);
    await rejectsWith(b2.outcome, "Cancelled", /sequence 2/);
    assert.equal(scheduler.queued, 0);
  });

  it("forgets thousands of backlogged sequences cancelled at once; the slot then goes to the next START", async function () {
    this.timeout(20_000);
    const scheduler = start(sequenceBatching());
    engine.holding = true;
    const held = send(scheduler, "held", uint(1), { start: true, end: true });
    const waiting = Array.from({ length: 5000 }, (_, n) => send(scheduler, `w${n}`, uint(100 + n), { start: true }));
    assert.equal(scheduler.queued, 5000);
    for (const one of waiting) one.controller.abort();
    await Promise.all(waiting.map((one) => rejectsWith(one.outcome, "Cancelled", /./)));
    assert.equal(scheduler.queued, 0);
    const next = send(scheduler, "next", uint(2), { start: true, end: true });
    engine.finishAll();
    await held.outcome;
    await settle();
    engine.finishAll();
    assert.deepEqual(await next.outcome, ["next"]);
    assert.deepEqual(engine.ids, [["held"], ["next"]], "no cancelled sequence ran");
  });

  it("Direct: pads a batch with null requests (zeroed inputs, controls not ready) where a slot has none; they count in the batch, their responses are dropped", async () => {
    const recorded: number[] = [];
    const scheduler = start(
      sequenceBatching({ slotsPerInstance: 4 }),
      { maxBatchSize: 4 },
      { recordExecution: (size) => recorded.push(size) },
    );
    const timings = { computeInputNs: 1n, computeInferNs: 2n, computeOutputNs: 3n };
    for (const n of [1, 2, 3]) await send(scheduler, `s${n}`, uint(n), { start: true, report: timings }).outcome;
    // Each START ran alone, in its slot: the slots below it padded.
    assert.deepEqual(engine.ids, [["s1"], ["-", "s2"], ["-", "-", "s3"]]);
    engine.holding = true;
    const b = send(scheduler, "b", uint(2), { report: timings });
    await settle();
    // While b runs, a and c queue in slots 0 and 2; slot 1 has nothing.
    const a = send(scheduler, "a", uint(1), { report: timings });
    const c = send(scheduler, "c", uint(3), { report: timings });
    engine.finishAll();
    assert.deepEqual(await b.outcome, ["b"]);
    await settle();
    assert.deepEqual(engine.ids.at(-1), ["a", "-", "c"]);
    const padding = engine.batches.at(-1)!.requests[1]!;
    assert.deepEqual(padding, { id: "", start: 0, end: 0, ready: 0, corrid: 0n, zeroed: true });
    engine.finishAll();
    assert.deepEqual(await a.outcome, ["a"]);
    assert.deepEqual(await c.outcome, ["c"]);
    await settle();
    assert.deepEqual(recorded, [1, 2, 3, 2, 3], "null requests count in their execution's batch size");
    assert.equal(scheduler.running, 0);
  });

  it("Direct: with minimum_slot_utilization, waits for enough slots or the queue delay", async () => {
    const batching = sequenceBatching({
      slotsPerInstance: 4,
      strategy: { kind: "direct", maxQueueDelayUs: 2_000_000, minimumSlotUtilization: 0.5 },
    });
    const scheduler = start(batching, { maxBatchSize: 4 });
    const a = send(scheduler, "a", uint(1), { start: true });
    await sleep(30);
    assert.equal(engine.batches.length, 0, "1 slot of 4 is below the utilization: it waits");
    const b = send(scheduler, "b", uint(2), { start: true });
    await Promise.all([a.outcome, b.outcome]);
    assert.deepEqual(engine.ids, [["a", "b"]]);
    const quick = start(
      sequenceBatching({
        slotsPerInstance: 4,
        strategy: { kind: "direct", maxQueueDelayUs: 50_000, minimumSlotUtilization: 0.5 },
      }),
      { maxBatchSize: 4 },
    );
    assert.deepEqual(await send(quick, "alone", uint(1), { start: true }).outcome, ["alone"], "runs after the delay");
  });

  it("Oldest: one request of each sequence in flight, heads batched together, a preferred size runs at once", async () => {
    const batching = oldestBatching({ slots: 4, preferred: 2, delayUs: 5_000_000, preserveOrdering: false });
    const scheduler = start(batching, { maxBatchSize: 4 });
    engine.holding = true;
    const sent = [
      send(scheduler, "a1", uint(1), { start: true }),
      send(scheduler, "a2", uint(1)),
      send(scheduler, "b1", uint(2), { start: true }),
      send(scheduler, "b2", uint(2), { end: true }),
    ];
    await settle();
    assert.deepEqual(engine.ids, [["a1", "b1"]], "the preferred size 2 runs without waiting for the delay");
    engine.finishAll();
    await settle();
    assert.deepEqual(engine.ids, [
      ["a1", "b1"],
      ["a2", "b2"],
    ]);
    engine.finishAll();
    await Promise.all(sent.map((one) => one.outcome));
    assert.ok(
      engine.ids.flat().every((id) => id !== "-"),
      "Oldest never pads",
    );
  });

  it("gives the model the control's value in place of a client input of the control's name (Triton's override inputs)", async () => {
    // The config may also declare a control in `input` (the client sends it, checked as any input).
    const scheduler = start(sequenceBatching());
    const clientStart: Tensor = { name: "START", datatype: "INT32", shape: [1], data: new Uint8Array([5, 0, 0, 0]) };
    const request: EngineRequest = {
      id: "a1",
      version: "1",
      parameters: {},
      inputs: [IN, clientStart],
      requestedOutputs: new Set(),
    };
    const controller = new AbortController();
    for await (const response of scheduler.infer({
      request,
      batchSize: 1,
      place: { level: 0, timeoutUs: 0 },
      options: { signal: controller.signal, deadline: Infinity, traceHeaders: {} },
      oneResponse: true,
      sequence: { id: uint(1), start: true, end: true },
    }))
      void response;
    const given = engine.requests[0]!.inputs;
    assert.deepEqual(
      given.map((input) => input.name),
      ["IN", "START", "END", "READY", "CORRID"],
      "one tensor of each name",
    );
    assert.equal(controlValue(given.find((input) => input.name === "START")), 1, "START is the control's true value");
  });

  it("Oldest with preserve_ordering: a request's responses wait until the one offered before it is done", async () => {
    const batching = oldestBatching({ slots: 2, preferred: 1, delayUs: 0, preserveOrdering: true });
    const scheduler = start(batching, { maxBatchSize: 1 });
    const controller = new AbortController();
    // a's caller reads its one response and has not finished reading (a decoupled model's stream).
    const a = scheduler.infer({
      request: { id: "a1", version: "1", parameters: {}, inputs: [IN], requestedOutputs: new Set() },
      batchSize: 1,
      place: { level: 0, timeoutUs: 0 },
      options: { signal: controller.signal, deadline: Infinity, traceHeaders: {} },
      sequence: { id: uint(1), start: true, end: true },
    });
    assert.equal((await a.next()).done, false);
    let bDone = false;
    const b = send(scheduler, "b1", uint(2), { start: true, end: true });
    void b.outcome.then(() => (bDone = true));
    await settle();
    assert.deepEqual(engine.ids, [["a1"], ["b1"]], "b ran once a's execution was over");
    assert.equal(bDone, false, "b's response waits for a to be done");
    assert.equal((await a.next()).done, true);
    assert.deepEqual(await b.outcome, ["b1"]);
    assert.equal(scheduler.running, 0);
    assert.equal(scheduler.queued, 0);
  });

  it("refuses queued requests when closed, and refuses START after (Triton's words)", async () => {
    const scheduler = start(sequenceBatching());
    engine.holding = true;
    const a1 = send(scheduler, "a1", uint(1), { start: true });
    const a2 = send(scheduler, "a2", uint(1));
    const b = send(scheduler, "b1", uint(2), { start: true });
    await settle();
    scheduler.close();
    await rejectsWith(a2.outcome, "Unavailable", /is unloading/);
    await rejectsWith(b.outcome, "Unavailable", /is unloading/);
    await rejectsWith(
      send(scheduler, "c", uint(3), { start: true }).outcome,
      "Unavailable",
      "Server is stopping, scheduler for model has stopped accepting new inference requests",
    );
    assert.equal(scheduler.queued, 0);
    engine.finishAll();
    await a1.outcome;
  });
});

describe("a sequence model's queue parameters", () => {
  const scheduling = schedulingOf(sequenceBatching());
  const whole = (value: bigint) => ({ parameterChoice: { $case: "int64Param" as const, value } });

  it("reads `timeout` (it bounds the backlog) and ignores `priority`, as Triton's sequence batcher", () => {
    assert.deepEqual(queuePlaceOf("m", scheduling, { priority: whole(7n), timeout: whole(2500n) }), {
      level: 0,
      timeoutUs: 2500,
    });
    assert.deepEqual(queuePlaceOf("m", scheduling, { priority: whole(3n) }), { level: 0, timeoutUs: 0 });
  });

  it("refuses a `timeout` that is not a whole number, naming it", () => {
    assert.throws(
      () => queuePlaceOf("m", scheduling, { timeout: { parameterChoice: { $case: "stringParam", value: "soon" } } }),
      /parameters\["timeout"\] must be a whole number/,
    );
    // Ignored, but still checked (Triton's front ends refuse a priority that is not an integer for every model).
    assert.throws(
      () => queuePlaceOf("m", scheduling, { priority: { parameterChoice: { $case: "stringParam", value: "high" } } }),
      /parameters\["priority"\] must be a whole number/,
    );
  });
});

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { DataPlaneError, type ErrorKind } from "../../../lib/errors.js";
import { parseText } from "../../../lib/model-repository/config.js";
import { toModelSpec } from "../../../lib/model-repository/spec.js";
import type { Scheduling } from "../../../lib/model-repository/scheduling.js";
import type { Engine, EngineRequest, EngineResponse, Execution, InferOptions } from "../../src/engines/engine.js";
import { ModelRegistry } from "../../src/models/registry.js";
import type { ComputeTimings } from "../../src/models/statistics.js";
import { batchRulesOf, nextBatch, type BatchChoice } from "../../src/scheduling/batch.js";
import { queuePlaceOf, queueTimeoutUs, type QueuePlace } from "../../src/scheduling/parameters.js";
import { PriorityQueue } from "../../src/scheduling/queue.js";
import { Scheduler, type RequestScheduler, type ScheduledRequest } from "../../src/scheduling/scheduler.js";

/** A model's scheduling from the config lines after its name and tensors. */
function schedulingOf(lines: string, { maxBatchSize = 8, dims = "[ 2 ]" } = {}): Scheduling {
  const text = [
    'name: "m"',
    'backend: "identity"',
    `max_batch_size: ${maxBatchSize}`,
    `input [ { name: "IN" data_type: TYPE_FP32 dims: ${dims} } ]`,
    `output [ { name: "OUT" data_type: TYPE_FP32 dims: ${dims} } ]`,
    lines,
  ].join("\n");
  return toModelSpec(parseText(text, "config.pbtxt"), "config.pbtxt").scheduling;
}

/** One execution the fake engine was given: its instance, its requests' ids; `finish` ends it. */
interface SeenExecution {
  readonly instance: number;
  readonly ids: readonly string[];
  readonly execution: Execution;
  finish(): void;
}

/**
 * An engine that records each execution and answers each of its requests (with the
 * request's id) once the test finishes the execution, or at once when `holding` is off.
 */
class FakeEngine implements Engine {
  readonly executions: SeenExecution[] = [];
  holding = true;
  closed = false;
  private readonly gates = new Map<Execution, Promise<void>>();

  async *infer(request: EngineRequest, options: InferOptions): AsyncIterable<EngineResponse> {
    const execution = options.execution;
    assert.ok(execution !== undefined, "the scheduler gives every request its execution");
    assert.ok(execution.requests.includes(request));
    let gate = this.gates.get(execution);
    if (gate === undefined) {
      let finish: () => void = () => undefined;
      gate = this.holding ? new Promise<void>((resolve) => (finish = resolve)) : Promise.resolve();
      this.gates.set(execution, gate);
      const ids = execution.requests.map((one) => one.id);
      this.executions.push({ instance: execution.instance, ids, execution, finish });
    }
    await gate;
    yield { outputs: [], parameters: { id: { parameterChoice: { $case: "stringParam", value: request.id } } } };
  }

  /** The ids of each execution's requests, in the order they started. */
  get batches(): string[][] {
    return this.executions.map((execution) => [...execution.ids]);
  }

  finishAll(): void {
    for (const execution of this.executions) execution.finish();
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** A request of `batch` items of `width` FP32 each. */
const requestOf = (id: string, batch = 1, width = 2): EngineRequest => ({
  id,
  version: "1",
  parameters: {},
  inputs: [{ name: "IN", datatype: "FP32", shape: [batch, width], data: new Uint8Array(batch * width * 4) }],
  requestedOutputs: new Set(),
});

/** A one-item request as the pipeline gives it to the scheduler, at the default level. */
const scheduledOf = (id: string, signal: AbortSignal, oneResponse = false): ScheduledRequest => ({
  request: requestOf(id),
  batchSize: 1,
  place: { level: 0, timeoutUs: 0 },
  options: { signal, deadline: Infinity, traceHeaders: {} },
  oneResponse,
});

interface Sent {
  readonly id: string;
  readonly controller: AbortController;
  /** Resolves with the ids of its responses, or rejects with why it failed. */
  readonly outcome: Promise<string[]>;
}

/** Sends one request of `batch` items (`width` FP32 each) through the scheduler and reads it to the end. */
function send(
  scheduler: RequestScheduler,
  id: string,
  {
    batch = 1,
    width = 2,
    place = { level: 0, timeoutUs: 0 } as QueuePlace,
    done = [] as string[],
    report = undefined as ComputeTimings | undefined,
  } = {},
): Sent {
  const controller = new AbortController();
  const request = requestOf(id, batch, width);
  const outcome = (async () => {
    const ids: string[] = [];
    const results = scheduler.infer({
      request,
      batchSize: batch,
      place,
      options: { signal: controller.signal, deadline: Infinity, traceHeaders: {} },
      // What the pipeline's RequestScope does once the request is done.
      started: (_enqueuedNs, _startedNs, execution) => {
        if (report !== undefined) execution.report(report);
      },
    });
    for await (const response of results) {
      const choice = response.parameters?.["id"]?.parameterChoice;
      ids.push(choice?.$case === "stringParam" ? choice.value : "?");
    }
    done.push(id);
    return ids;
  })();
  outcome.catch(() => undefined);
  return { id, controller, outcome };
}

/** Rejects with a DataPlaneError of `kind` whose message matches `pattern`. */
async function rejectsWith(outcome: Promise<unknown>, kind: ErrorKind, pattern: RegExp): Promise<void> {
  await assert.rejects(outcome, (error: unknown) => {
    assert.ok(error instanceof DataPlaneError, String(error));
    assert.equal(error.kind, kind);
    assert.match(error.message, pattern);
    return true;
  });
}

/** Lets the event loop run what is ready (promise chains of the scheduler and the engine). */
const settle = (): Promise<void> => sleep(5);

describe("Scheduler: Triton's scheduling of a model's requests, with a fake engine", () => {
  let engine: FakeEngine;
  let scheduler: Scheduler | undefined;
  const start = (scheduling: Scheduling, statistics?: { recordExecution(size: number, t: ComputeTimings): void }) => {
    scheduler = new Scheduler({ model: "m", version: "1", scheduling, engine, ...(statistics ? { statistics } : {}) });
    return scheduler;
  };
  beforeEach(() => (engine = new FakeEngine()));
  afterEach(() => {
    scheduler?.close();
    engine.finishAll();
  });

  describe("batch formation (dynamic_batching)", () => {
    it("joins the requests that arrive within max_queue_delay_microseconds into one execution", async () => {
      const scheduler = start(schedulingOf("dynamic_batching { max_queue_delay_microseconds: 50000 }"));
      engine.holding = false;
      const sent = ["a", "b", "c", "d", "e"].map((id) => send(scheduler, id));
      await settle();
      assert.deepEqual(engine.batches, [], "the batch waits for more requests");
      assert.equal(scheduler.queued, 5);
      const answers = await Promise.all(sent.map((one) => one.outcome));
      assert.deepEqual(engine.batches, [["a", "b", "c", "d", "e"]]);
      assert.deepEqual(answers, [["a"], ["b"], ["c"], ["d"], ["e"]], "each request gets its own response");
      assert.equal(scheduler.queued, 0);
      assert.equal(scheduler.running, 0);
    });

    it("runs a batch at once when it reaches a preferred size, however long the delay", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 60000000 }"),
      );
      const sent = ["a", "b", "c", "d", "e"].map((id) => send(scheduler, id));
      await settle();
      // The second request made a batch of 2 (preferred) while the instance was free.
      assert.deepEqual(engine.batches, [["a", "b"]]);
      engine.executions[0]!.finish();
      await settle();
      // c, d, e queued meanwhile: the largest preferred size they reach is 2 (4 needs one more).
      assert.deepEqual(engine.batches, [
        ["a", "b"],
        ["c", "d"],
      ]);
      engine.executions[1]!.finish();
      await settle();
      assert.equal(engine.batches.length, 2, "e alone waits for the delay");
      assert.equal(scheduler.queued, 1);
      scheduler.close();
      await rejectsWith(sent[4]!.outcome, "Unavailable", /model 'm' version 1 is unloading/);
    });

    it("refuses what waits for its batch when closed, and starts nothing after (its timers cleared)", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 60000000 }"),
      );
      const sent = ["a", "b", "c"].map((id) => send(scheduler, id));
      await settle();
      assert.equal(scheduler.queued, 3, "the instance is free: they wait for a batch of 4");
      scheduler.close();
      for (const one of sent) await rejectsWith(one.outcome, "Unavailable", /is unloading/);
      await rejectsWith(send(scheduler, "d").outcome, "Unavailable", /takes no more requests/);
      assert.deepEqual(engine.batches, []);
    });

    it("with no delay, runs what is queued when the instance frees, up to max_batch_size", async () => {
      const scheduler = start(schedulingOf("dynamic_batching { }", { maxBatchSize: 4 }));
      const sent = ["a", "b", "c", "d", "e", "f"].map((id) => send(scheduler, id));
      await settle();
      assert.deepEqual(engine.batches, [["a"]], "the first runs alone: nothing else was queued");
      engine.executions[0]!.finish();
      await settle();
      assert.deepEqual(engine.batches.slice(1), [["b", "c", "d", "e"]]);
      engine.executions[1]!.finish();
      await settle();
      assert.deepEqual(engine.batches.slice(2), [["f"]]);
      engine.finishAll();
      await Promise.all(sent.map((one) => one.outcome));
    });

    it("counts batch items, not requests, against max_batch_size", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { max_queue_delay_microseconds: 20000 }", { maxBatchSize: 4 }),
      );
      engine.holding = false;
      const sent = [
        send(scheduler, "three", { batch: 3 }),
        send(scheduler, "two", { batch: 2 }),
        send(scheduler, "one"),
      ];
      await Promise.all(sent.map((one) => one.outcome));
      // As Triton: the batch ends at the first request that does not fit (none is skipped).
      assert.deepEqual(engine.batches, [["three"], ["two", "one"]]);
    });

    it("joins only requests whose variable-shape inputs have equal shapes", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { max_queue_delay_microseconds: 20000 }", { dims: "[ -1 ]" }),
      );
      engine.holding = false;
      const sent = [
        send(scheduler, "w3a", { width: 3 }),
        send(scheduler, "w3b", { width: 3 }),
        send(scheduler, "w4", { width: 4 }),
      ];
      await Promise.all(sent.map((one) => one.outcome));
      // As Triton: a request that cannot join ends the batch being formed, and starts the next.
      assert.deepEqual(engine.batches, [["w3a", "w3b"], ["w4"]]);
    });

    it("records one execution per batch, of its batch items, with its requests' compute times", async () => {
      const recorded: { size: number; timings: ComputeTimings }[] = [];
      const scheduler = start(schedulingOf("dynamic_batching { max_queue_delay_microseconds: 20000 }"), {
        recordExecution: (size, timings) => recorded.push({ size, timings }),
      });
      engine.holding = false;
      const timings = (input: number, infer: number, output: number): ComputeTimings => ({
        computeInputNs: BigInt(input),
        computeInferNs: BigInt(infer),
        computeOutputNs: BigInt(output),
      });
      const sent = [
        send(scheduler, "a", { report: timings(1, 10, 100) }),
        send(scheduler, "b", { batch: 2, report: timings(2, 30, 200) }),
      ];
      await Promise.all(sent.map((one) => one.outcome));
      assert.deepEqual(engine.batches, [["a", "b"]]);
      // Inputs and outputs added up, the longest time in the engine.
      assert.deepEqual(recorded, [{ size: 3, timings: timings(3, 30, 300) }]);
    });
  });

  describe("queue policies and priorities", () => {
    it("takes higher priority levels first under saturation", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { priority_levels: 3 default_priority_level: 2 }", { maxBatchSize: 1 }),
      );
      const at = (level: number): QueuePlace => ({ level, timeoutUs: 0 });
      const sent = [
        send(scheduler, "busy", { place: at(2) }),
        send(scheduler, "low", { place: at(3) }),
        send(scheduler, "default", { place: at(2) }),
        send(scheduler, "high", { place: at(1) }),
        send(scheduler, "high2", { place: at(1) }),
      ];
      await settle();
      for (let index = 0; index < 5; index++) {
        engine.executions[index]!.finish();
        await settle();
      }
      assert.deepEqual(engine.batches.flat(), ["busy", "high", "high2", "default", "low"]);
      await Promise.all(sent.map((one) => one.outcome));
    });

    it("refuses a request past max_queue_size UNAVAILABLE, in Triton's words, and serves the others", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { default_queue_policy { max_queue_size: 1 } }", { maxBatchSize: 1 }),
      );
      const running = send(scheduler, "running");
      await settle();
      const queued = send(scheduler, "queued");
      const extra = send(scheduler, "extra");
      await rejectsWith(
        extra.outcome,
        "Unavailable",
        /^Exceeds maximum queue size: model 'm' version 1 queues at most 1 request/,
      );
      engine.finishAll();
      await settle();
      engine.finishAll();
      assert.deepEqual(await running.outcome, ["running"]);
      assert.deepEqual(await queued.outcome, ["queued"]);
    });

    it("rejects a request past its queue timeout (timeout_action REJECT) without running it", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { default_queue_policy { default_timeout_microseconds: 30000 } }", {
          maxBatchSize: 1,
        }),
      );
      const running = send(scheduler, "running");
      await settle();
      const late = send(scheduler, "late");
      await rejectsWith(late.outcome, "Unavailable", /^Request timeout expired/);
      assert.equal(scheduler.queued, 0);
      engine.finishAll();
      await running.outcome;
      assert.deepEqual(engine.batches.flat(), ["running"]);
    });

    it("moves a request past its timeout behind the others (timeout_action DELAY), and still runs it", async () => {
      const scheduler = start(
        schedulingOf(
          "dynamic_batching { default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 20000 } }",
          { maxBatchSize: 1 },
        ),
      );
      const sent = [send(scheduler, "running"), send(scheduler, "delayed")];
      await sleep(60);
      sent.push(send(scheduler, "fresh"));
      await settle();
      for (let index = 0; index < 3; index++) {
        engine.executions[index]?.finish();
        await settle();
      }
      assert.deepEqual(engine.batches.flat(), ["running", "fresh", "delayed"]);
      await Promise.all(sent.map((one) => one.outcome));
    });

    it("takes a request cancelled, or past its deadline, out of the queue at once; it never runs", async () => {
      const scheduler = start(schedulingOf("instance_group [ { count: 1 } ]"));
      const running = send(scheduler, "running");
      await settle();
      const cancelled = send(scheduler, "cancelled");
      const expired = send(scheduler, "expired");
      const kept = send(scheduler, "kept");
      await settle();
      assert.equal(scheduler.queued, 3);
      cancelled.controller.abort();
      expired.controller.abort(new DataPlaneError("DeadlineExceeded", "deadline exceeded"));
      await rejectsWith(cancelled.outcome, "Cancelled", /cancelled/);
      await rejectsWith(expired.outcome, "DeadlineExceeded", /deadline/);
      assert.equal(scheduler.queued, 1);
      engine.finishAll();
      await settle();
      engine.finishAll();
      await Promise.all([running.outcome, kept.outcome]);
      assert.deepEqual(engine.batches.flat(), ["running", "kept"]);
    });
  });

  describe("instances and ordering", () => {
    it("runs at most instance_group's count of executions at once, one request each without dynamic_batching", async () => {
      const scheduler = start(schedulingOf("instance_group [ { count: 3 kind: KIND_CPU } ]"));
      const sent = ["a", "b", "c", "d", "e"].map((id) => send(scheduler, id));
      await settle();
      assert.deepEqual(
        engine.executions.map(({ instance, ids }) => [instance, ...ids]),
        [
          [0, "a"],
          [1, "b"],
          [2, "c"],
        ],
      );
      assert.equal(scheduler.queued, 2);
      assert.equal(scheduler.running, 3);
      engine.executions[1]!.finish();
      await settle();
      assert.deepEqual(
        engine.executions.slice(3).map(({ instance, ids }) => [instance, ...ids]),
        [[1, "d"]],
      );
      engine.finishAll();
      await settle();
      engine.finishAll();
      await Promise.all(sent.map((one) => one.outcome));
    });

    it("frees the instance when the engine releases the execution, before its requests are done", async () => {
      const scheduler = start(schedulingOf("instance_group [ { count: 1 } ]"));
      const sent = [send(scheduler, "a"), send(scheduler, "b")];
      await settle();
      assert.deepEqual(engine.batches, [["a"]]);
      engine.executions[0]!.execution.release();
      engine.executions[0]!.execution.release();
      await settle();
      assert.deepEqual(engine.batches, [["a"], ["b"]]);
      assert.equal(scheduler.running, 2, "both still running");
      engine.finishAll();
      await Promise.all(sent.map((one) => one.outcome));
    });

    it("frees the instance once a one-response model has answered, while that answer is still on its way", async () => {
      const scheduler = start(schedulingOf("instance_group [ { count: 1 } ]"));
      engine.holding = false;
      const signal = new AbortController().signal;
      const answered = scheduler.infer(scheduledOf("answered", signal, true));
      // Its response is taken, and nothing more read (as while the pipeline encodes and sends it).
      assert.equal((await answered.next()).done, false);
      assert.equal(scheduler.running, 0);
      assert.deepEqual(await send(scheduler, "next").outcome, ["next"]);
      await answered.return(undefined);
    });

    it("frees the instance once a decoupled model has made its responses, however slowly its caller reads them", async () => {
      const decoupled: Engine = {
        async *infer(request: EngineRequest) {
          for (let index = 0; index < 3; index++) {
            await sleep(1);
            yield { outputs: [], parameters: { id: { parameterChoice: { $case: "stringParam", value: request.id } } } };
          }
        },
        close: async () => undefined,
      };
      const scheduler = new Scheduler({
        model: "m",
        version: "1",
        scheduling: schedulingOf("instance_group [ { count: 1 } ]"),
        engine: decoupled,
      });
      const signal = new AbortController().signal;
      const stalled = scheduler.infer(scheduledOf("stalled", signal));
      // Its caller takes the first response, then reads no more (a client that stopped reading its stream).
      assert.equal((await stalled.next()).done, false);
      const next = scheduler.infer(scheduledOf("next", signal));
      const answered: unknown[] = [];
      const reading = (async () => {
        for await (const response of next) answered.push(response);
      })();
      await Promise.race([reading, sleep(500)]);
      assert.equal(answered.length, 3, "the next request ran while the first one's caller read nothing");
      // The first one's responses were kept for its caller.
      assert.equal((await stalled.next()).done, false);
      assert.equal((await stalled.next()).done, false);
      assert.equal((await stalled.next()).done, true);
      scheduler.close();
    });

    it("releases responses in arrival order with preserve_ordering, whichever execution ends first", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { preserve_ordering: true } instance_group [ { count: 2 } ]", {
          maxBatchSize: 1,
        }),
      );
      const done: string[] = [];
      const sent = [send(scheduler, "first", { done }), send(scheduler, "second", { done })];
      await settle();
      assert.equal(engine.executions.length, 2, "both run at once");
      engine.executions[1]!.finish();
      await settle();
      assert.deepEqual(done, [], "the second waits for the first");
      engine.executions[0]!.finish();
      await Promise.all(sent.map((one) => one.outcome));
      assert.deepEqual(done, ["first", "second"]);
    });

    it("with preserve_ordering, a request cancelled between two does not let the later one overtake the earlier", async () => {
      const scheduler = start(
        schedulingOf("dynamic_batching { preserve_ordering: true } instance_group [ { count: 2 } ]", {
          maxBatchSize: 1,
        }),
      );
      const done: string[] = [];
      const first = send(scheduler, "first", { done });
      const cancelled = send(scheduler, "cancelled", { done });
      const last = send(scheduler, "last", { done });
      await settle();
      assert.deepEqual(engine.batches, [["first"], ["cancelled"]]);
      // Answered by the engine, it waits for the first; its caller gives up meanwhile.
      engine.executions[1]!.finish();
      await settle();
      cancelled.controller.abort();
      await rejectsWith(cancelled.outcome, "Cancelled", /cancelled/);
      await settle();
      assert.deepEqual(engine.batches, [["first"], ["cancelled"], ["last"]]);
      engine.executions[2]!.finish();
      await settle();
      assert.deepEqual(done, [], "the last still waits for the first");
      engine.executions[0]!.finish();
      await Promise.all([first.outcome, last.outcome]);
      assert.deepEqual(done, ["first", "last"]);
    });

    it("answers in completion order without preserve_ordering", async () => {
      const scheduler = start(schedulingOf("instance_group [ { count: 2 } ]"));
      const done: string[] = [];
      const sent = [send(scheduler, "first", { done }), send(scheduler, "second", { done })];
      await settle();
      engine.executions[1]!.finish();
      await sent[1]!.outcome;
      assert.deepEqual(done, ["second"]);
      engine.executions[0]!.finish();
      await sent[0]!.outcome;
    });
  });
});

describe("the priority and timeout parameters", () => {
  const int = (value: number) => ({ parameterChoice: { $case: "int64Param" as const, value: BigInt(value) } });
  const levels = schedulingOf(
    "dynamic_batching { priority_levels: 3 default_priority_level: 2 default_queue_policy { default_timeout_microseconds: 1000 allow_timeout_override: true } priority_queue_policy { key: 1 value { default_timeout_microseconds: 5000 } } }",
  );

  it("reads priority 0 as the default level, and 1..priority_levels as they are", () => {
    assert.deepEqual(queuePlaceOf("m", levels, { priority: int(0) }), { level: 2, timeoutUs: 0 });
    assert.deepEqual(queuePlaceOf("m", levels, { priority: int(3) }), { level: 3, timeoutUs: 0 });
    assert.deepEqual(queuePlaceOf("m", levels, { priority: int(3), timeout: int(500) }), { level: 3, timeoutUs: 500 });
  });

  it("refuses a priority outside the levels INVALID_ARGUMENT, naming them", () => {
    assert.throws(
      () => queuePlaceOf("m", levels, { priority: int(4) }),
      /model 'm': parameters\["priority"\] 4 is not a priority level: its levels are 1\.\.3 \(dynamic_batching\.priority_levels\)/,
    );
    assert.throws(
      () => queuePlaceOf("m", schedulingOf(""), { priority: int(1) }),
      /has no priority levels \(dynamic_batching\.priority_levels\)/,
    );
    assert.throws(() => queuePlaceOf("m", levels, { priority: int(-1) }), /must be a whole number/);
  });

  it("refuses a timeout where the level's policy does not allow an override, naming the field to set", () => {
    assert.throws(
      () => queuePlaceOf("m", levels, { priority: int(1), timeout: int(10) }),
      (error: unknown) =>
        error instanceof DataPlaneError &&
        error.kind === "InvalidArgument" &&
        /parameters\["timeout"\] is not allowed.*dynamic_batching\.priority_queue_policy\[1\]\.allow_timeout_override: true/.test(
          error.message,
        ),
    );
    assert.throws(
      () => queuePlaceOf("m", schedulingOf("instance_group [ { count: 2 } ]"), { timeout: int(10) }),
      /default_queue_policy \{ allow_timeout_override: true \}/,
    );
  });

  it("follows Triton's rule: a request's timeout only ever shortens the policy's, and 0 is no bound", () => {
    const policy = {
      timeoutAction: "REJECT" as const,
      defaultTimeoutUs: 1000,
      allowTimeoutOverride: true,
      maxQueueSize: 0,
    };
    assert.equal(queueTimeoutUs(policy, 500), 500);
    assert.equal(queueTimeoutUs(policy, 5000), 1000);
    assert.equal(queueTimeoutUs(policy, 0), 1000);
    assert.equal(queueTimeoutUs({ ...policy, defaultTimeoutUs: 0 }, 500), 0);
    assert.equal(queueTimeoutUs({ ...policy, allowTimeoutOverride: false }, 500), 1000);
  });
});

describe("a scheduled model reloaded or unloaded with requests queued", () => {
  let repository: string;
  let engines: FakeEngine[];
  let registry: ModelRegistry;
  const config = (revision: number): string =>
    `# revision ${revision}\nname: "m"\nbackend: "identity"\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]\ninstance_group [ { count: 1 } ]\n`;
  beforeEach(async () => {
    repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-scheduled-"));
    mkdirSync(join(repository, "m", "1"), { recursive: true });
    writeFileSync(join(repository, "m", "config.pbtxt"), config(0));
    engines = [];
    registry = new ModelRegistry({
      repositories: [repository],
      configFiles: [],
      controlMode: "poll",
      startupModels: [],
      createEngine: () => {
        const engine = new FakeEngine();
        engines.push(engine);
        return engine;
      },
      schedules: () => true,
      retireGraceMs: 60_000,
      logger: pino({ level: "silent" }),
    });
    await registry.start();
  });
  afterEach(async () => {
    for (const engine of engines) engine.finishAll();
    await registry.close();
    rmSync(repository, { recursive: true, force: true });
  });

  /** A request as the pipeline runs it: the engine held by a lease, through the version's scheduler. */
  const request = (id: string): Sent & { engine: FakeEngine } => {
    const lease = registry.hold(registry.resolve("m", ""));
    const scheduler = lease.model.schedulers?.get(lease.version);
    assert.ok(scheduler !== undefined, "an instance_group gives the model a scheduler");
    const sent = send(scheduler, id);
    void sent.outcome.finally(() => lease.release()).catch(() => undefined);
    return { ...sent, engine: lease.model.engine as FakeEngine };
  };

  it("runs the queued requests on the engine they were admitted to, then closes it; new ones go to the new engine", async () => {
    const old = [request("a"), request("b"), request("c")];
    await settle();
    assert.deepEqual(engines[0]!.batches, [["a"]]);
    writeFileSync(join(repository, "m", "config.pbtxt"), config(1));
    await registry.sync();
    const fresh = request("d");
    await settle();
    assert.equal(fresh.engine, engines[1]);
    assert.deepEqual(engines[1]!.batches, [["d"]], "the new engine's instance is its own");
    // What the replaced engine still queues is pending for the model's version, and its load.
    assert.deepEqual(registry.pendingRequests(), [{ name: "m", version: "1", pending: 2 }]);
    assert.deepEqual(
      registry.loads().map(({ load }) => [load.waiting, load.running]),
      [[2, 2]],
      "b and c wait; a (old engine) and d (new) run",
    );
    for (let index = 0; index < 3; index++) {
      engines[0]!.finishAll();
      await settle();
    }
    assert.deepEqual(await Promise.all(old.map((one) => one.outcome)), [["a"], ["b"], ["c"]]);
    assert.deepEqual(engines[0]!.batches, [["a"], ["b"], ["c"]]);
    await settle();
    assert.equal(engines[0]!.closed, true, "closed once its queue and executions are done");
    assert.equal(engines[1]!.closed, false);
    engines[1]!.finishAll();
    await fresh.outcome;
  });

  it("refuses what is still queued UNAVAILABLE when the engine closes at shutdown, and clears its timers", async () => {
    const running = request("a");
    const queued = request("b");
    await settle();
    await registry.close();
    await rejectsWith(queued.outcome, "Unavailable", /model 'm' version 1 is unloading/);
    engines[0]!.finishAll();
    assert.deepEqual(await running.outcome, ["a"]);
  });
});

describe("the scheduling spec: configs Triton refuses with preserve_ordering", () => {
  it("refuses priority levels, and DELAY past a timeout, naming dynamic_batching.preserve_ordering", () => {
    assert.throws(
      () => schedulingOf("dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }"),
      /dynamic_batching\.preserve_ordering.*one priority level at most/,
    );
    assert.throws(
      () =>
        schedulingOf(
          "dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 10 } }",
        ),
      /dynamic_batching\.preserve_ordering.*cannot DELAY/,
    );
    assert.equal(schedulingOf("dynamic_batching { preserve_ordering: true }").dynamicBatching?.preserveOrdering, true);
  });
});

describe("the scheduling spec: priority fields Triton loads without priority levels", () => {
  it("takes default_priority_level and priority_queue_policy without priority_levels, as one level", () => {
    const batching = schedulingOf(
      "dynamic_batching { default_priority_level: 3 priority_queue_policy { key: 2 value { max_queue_size: 1 } } }",
    ).dynamicBatching;
    assert.equal(batching?.priorityLevels, 0);
    assert.equal(batching?.defaultPriorityLevel, 0);
    assert.equal(batching?.queuePolicies.size, 0);
    // With levels, Triton's checks hold.
    assert.throws(
      () =>
        schedulingOf(
          "dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 3 value { } } }",
        ),
      /dynamic_batching\.priority_queue_policy.*level 3 is not one of 1\.\.2/,
    );
  });
});

describe("PriorityQueue: the levels requests use", () => {
  it("keeps only the levels that hold requests, so a client cycling through a million levels leaves none behind", () => {
    const batching = schedulingOf(
      "dynamic_batching { priority_levels: 1000000 default_priority_level: 1 }",
    ).dynamicBatching;
    const queue = new PriorityQueue<{ level: number }>(batching, "model 'm' version 1");
    for (let level = 1000; level >= 1; level--) {
      const entry = { level };
      queue.add(entry);
      assert.ok(queue.remove(entry));
    }
    assert.equal(queue.levelCount, 0);
    const low = { level: 7 };
    const high = { level: 3 };
    queue.add(low);
    queue.add(high);
    assert.equal(queue.levelCount, 2);
    assert.deepEqual([...queue.ordered()], [high, low]);
    queue.remove(high);
    assert.deepEqual([...queue.ordered()], [low]);
    assert.equal(queue.levelCount, 1);
  });
});

describe("nextBatch: Triton's batch formation, at a given time", () => {
  const rules = batchRulesOf(
    schedulingOf("dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 1000 }"),
  );
  /** Queued requests of these batch sizes, queued at `at` ns. */
  const queued = (sizes: readonly number[], at = 0n) =>
    sizes.map((batchSize, index) => ({
      id: index,
      batchSize,
      enqueuedNs: at,
      inputs: requestOf("", batchSize).inputs,
    }));
  const ids = (choice: BatchChoice<{ id: number }>) => ("run" in choice ? choice.run.map(({ id }) => id) : choice);

  it("runs the largest preferred size reached while the oldest request is within its delay", () => {
    assert.deepEqual(ids(nextBatch(queued([1, 1, 1]), rules, 500_000n)), [0, 1]);
    assert.deepEqual(ids(nextBatch(queued([1, 1, 1, 1, 1]), rules, 500_000n)), [0, 1, 2, 3]);
  });

  it("waits for the rest of the delay when no preferred size is reached, then runs what is there", () => {
    assert.deepEqual(ids(nextBatch(queued([1]), rules, 400_000n)), { waitNs: 600_000n });
    assert.deepEqual(ids(nextBatch(queued([1]), rules, 1_000_000n)), [0]);
    // Past the delay, everything that fits goes, preferred size or not.
    assert.deepEqual(ids(nextBatch(queued([1, 1, 1]), rules, 2_000_000n)), [0, 1, 2]);
  });

  it("runs at once a batch that cannot grow past the largest preferred size", () => {
    assert.deepEqual(ids(nextBatch(queued([3, 3]), rules, 0n)), [0]);
    assert.deepEqual(ids(nextBatch(queued([5]), rules, 0n)), [0]);
  });

  it("without dynamic_batching, one request per execution", () => {
    const single = batchRulesOf(schedulingOf("instance_group [ { count: 2 } ]"));
    assert.deepEqual(ids(nextBatch(queued([1, 1, 1]), single, 0n)), [0]);
  });
});

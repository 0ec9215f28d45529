import { Metadata } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { StreamInferReply } from "../../src/server/reply-encoding.js";
import type { RequestHead } from "../../src/inference/request-scope.js";
import { serveStream, type StreamCall } from "../../src/services/model-stream-infer.js";
import { laneOf, SequenceLanes } from "../../src/services/sequence-lanes.js";

/** A request a test finishes by hand: `started` once its turn came. */
interface Held {
  started: boolean;
  finish(): void;
  fail(error: Error): void;
}

/** Runs a request in `lane` whose serve waits for the test; `log` records starts by name. */
function hold(lanes: SequenceLanes, lane: string | undefined, name: string, log: string[]) {
  const held: Held = { started: false, finish: () => {}, fail: () => {} };
  const done = lanes.run(lane, () => {
    held.started = true;
    log.push(name);
    return new Promise<void>((resolve, reject) => {
      held.finish = resolve;
      held.fail = reject;
    });
  });
  return { held, done };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("sequence lanes on a stream", () => {
  it("starts a lane's requests one at a time, in arrival order", async () => {
    const lanes = new SequenceLanes(new AbortController().signal);
    const log: string[] = [];
    const requests = ["a0", "a1", "a2"].map((name) => hold(lanes, "A", name, log));
    await tick();
    assert.deepEqual(log, ["a0"], "the later ones wait");
    requests[0]!.held.finish();
    await tick();
    assert.deepEqual(log, ["a0", "a1"]);
    requests[1]!.held.finish();
    await tick();
    assert.deepEqual(log, ["a0", "a1", "a2"]);
    requests[2]!.held.finish();
    await Promise.all(requests.map(({ done }) => done));
  });

  it("runs different lanes and requests without a lane concurrently", async () => {
    const lanes = new SequenceLanes(new AbortController().signal);
    const log: string[] = [];
    const requests = [
      hold(lanes, "A", "a0", log),
      hold(lanes, "B", "b0", log),
      hold(lanes, undefined, "x", log),
      hold(lanes, undefined, "y", log),
      hold(lanes, "A", "a1", log),
    ];
    await tick();
    assert.deepEqual(log, ["a0", "b0", "x", "y"], "only a1 waits, behind a0");
    for (const { held } of requests.slice(0, 4)) held.finish();
    await tick();
    assert.deepEqual(log.at(-1), "a1");
    requests[4]!.held.finish();
    await Promise.all(requests.map(({ done }) => done));
  });

  it("forgets a lane once nothing of it runs or waits", async () => {
    const lanes = new SequenceLanes(new AbortController().signal);
    const log: string[] = [];
    const first = hold(lanes, "A", "a0", log);
    const second = hold(lanes, "A", "a1", log);
    const other = hold(lanes, "B", "b0", log);
    await tick();
    assert.equal(lanes.size, 2);
    first.held.finish();
    other.held.finish();
    await Promise.all([first.done, other.done]);
    assert.equal(lanes.size, 1, "B is gone; A still runs a1");
    second.held.finish();
    await second.done;
    assert.equal(lanes.size, 0);
    // A lane used again later starts afresh, at once.
    const again = hold(lanes, "A", "a2", log);
    await tick();
    assert.equal(again.held.started, true);
    again.held.finish();
    await again.done;
    assert.equal(lanes.size, 0);
  });

  it("starts the next request of a lane when the one before failed", async () => {
    const lanes = new SequenceLanes(new AbortController().signal);
    const log: string[] = [];
    const failing = hold(lanes, "A", "a0", log);
    const next = hold(lanes, "A", "a1", log);
    await tick();
    failing.held.fail(new Error("model failed"));
    await assert.rejects(failing.done, /model failed/);
    await tick();
    assert.equal(next.held.started, true);
    next.held.finish();
    await next.done;
    assert.equal(lanes.size, 0);
  });

  it("drops the waiting requests when the stream ends, without running them", async () => {
    const stream = new AbortController();
    const lanes = new SequenceLanes(stream.signal);
    const log: string[] = [];
    const running = hold(lanes, "A", "a0", log);
    const waiting = [hold(lanes, "A", "a1", log), hold(lanes, "A", "a2", log)];
    await tick();
    stream.abort();
    await Promise.all(waiting.map(({ done }) => done));
    assert.equal(lanes.size, 0);
    running.held.finish();
    await running.done;
    const late = hold(lanes, "A", "a3", log);
    await late.done;
    assert.deepEqual(log, ["a0"], "nothing ran after the stream ended");
  });
});

const sequenceId = (value: number | string): InferParameter => ({
  parameterChoice:
    typeof value === "number" ? { $case: "int64Param", value: BigInt(value) } : { $case: "stringParam", value },
});

function request(
  id: string,
  parameters: Record<string, InferParameter>,
  modelName = "m",
  modelVersion = "",
): ModelInferRequest {
  return { modelName, modelVersion, id, parameters, inputs: [], outputs: [], rawInputContents: [] };
}

describe("a stream request's lane", () => {
  it("is the model, the version asked and the typed correlation ID", () => {
    const lanes = [
      laneOf(request("", { sequence_id: sequenceId(5) })),
      laneOf(request("", { sequence_id: sequenceId("5") })),
      laneOf(request("", { sequence_id: sequenceId(5) }, "m", "1")),
      laneOf(request("", { sequence_id: sequenceId(5) }, "m2")),
    ];
    assert.equal(new Set(lanes).size, 4, lanes.join(" | "));
    assert.equal(
      laneOf(
        request("", {
          sequence_id: sequenceId(5),
          sequence_start: { parameterChoice: { $case: "boolParam", value: true } },
        }),
      ),
      lanes[0],
    );
  });

  it('is none without a sequence (no ID, 0 or "")', () => {
    assert.equal(laneOf(request("", {})), undefined);
    assert.equal(laneOf(request("", { sequence_id: sequenceId(0) })), undefined);
    assert.equal(laneOf(request("", { sequence_id: sequenceId("") })), undefined);
  });
});

const responseTo = ({ modelName, modelVersion, id }: RequestHead): ModelInferResponse => ({
  modelName,
  modelVersion,
  id,
  parameters: {},
  outputs: [],
  rawOutputContents: [],
});

/** A stream reply the pipeline made (never one passed through as it came, in these tests). */
function made(reply: StreamInferReply | undefined): { errorMessage: string; inferResponse: unknown } {
  assert(reply !== undefined && "errorMessage" in reply, "a reply made here");
  return reply;
}

/** The id of the request a stream reply answers. */
const repliedTo = (reply: StreamInferReply): string => (made(reply).inferResponse as ModelInferResponse).id;

/** A grpc-js bidirectional call as serveStream sees it: the test plays the client. */
class FakeCall extends EventEmitter implements StreamCall {
  readonly metadata = new Metadata();
  readonly replies: StreamInferReply[] = [];
  paused = false;
  ended = false;
  getDeadline = (): number => Infinity;
  write(reply: StreamInferReply): boolean {
    this.replies.push(reply);
    return true;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  end(): void {
    this.ended = true;
  }
}

describe("a stream's requests in their sequence's order", () => {
  /** Serves a stream whose requests the test finishes by id; `started` lists them as they start. */
  function served(maxPending: number) {
    const call = new FakeCall();
    const started: string[] = [];
    const finishers = new Map<string, () => void>();
    serveStream(call, maxPending, (request, writer) => {
      started.push(request.id);
      return new Promise<void>((resolve) =>
        finishers.set(request.id, () => {
          void writer.write({ errorMessage: "", inferResponse: responseTo(request) }).then(resolve);
        }),
      );
    });
    const finish = async (id: string): Promise<void> => {
      finishers.get(id)!();
      await tick();
    };
    return { call, started, finish };
  }

  it("counts a request waiting its turn toward maxPending: the stream is not read further", async () => {
    const { call, started, finish } = served(2);
    call.emit("data", request("a0", { sequence_id: sequenceId(7) }));
    call.emit("data", request("a1", { sequence_id: sequenceId(7) }));
    await tick();
    assert.deepEqual(started, ["a0"]);
    assert.equal(call.paused, true, "two in hand, one of them waiting: at the cap");
    await finish("a0");
    assert.deepEqual(started, ["a0", "a1"]);
    assert.equal(call.paused, false, "one in hand again: reading resumes");
    call.emit("end");
    await finish("a1");
    assert.deepEqual(call.replies.map(repliedTo), ["a0", "a1"]);
    assert.equal(call.ended, true);
  });

  it("answers malformed sequence parameters with INVALID_ARGUMENT's text, and the stream goes on", async () => {
    const { call, started, finish } = served(8);
    call.emit("data", request("bad", { sequence_id: { parameterChoice: { $case: "boolParam", value: true } } }));
    call.emit("data", request("good", {}));
    await tick();
    assert.deepEqual(started, ["good"]);
    assert.equal(
      made(call.replies[0]).errorMessage,
      "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.",
    );
    assert.equal(repliedTo(call.replies[0]!), "bad");
    call.emit("end");
    await finish("good");
    assert.equal(call.ended, true);
  });

  it("drops a sequence's waiting requests when the client cancels the stream", async () => {
    const { call, started, finish } = served(8);
    call.emit("data", request("a0", { sequence_id: sequenceId("s") }));
    call.emit("data", request("a1", { sequence_id: sequenceId("s") }));
    await tick();
    call.emit("cancelled");
    await finish("a0");
    assert.deepEqual(started, ["a0"], "a1 never ran");
    assert.equal(call.ended, false, "a cancelled stream is not ended by the server");
  });
});

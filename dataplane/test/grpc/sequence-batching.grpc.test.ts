import { status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { MODELS_PYTHON, requireTritonPeers } from "../fixtures/peers.js";
import { REPO_ROOT } from "../fixtures/paths.js";
import {
  call,
  eventually,
  infer,
  inferRequest,
  startServer,
  streamAll,
  type ServerProcess,
} from "../fixtures/server.js";

/**
 * Sequence batching run here, end to end: the probe models (dataplane/test/python-sequence-probe/,
 * Python models answering with what they received) over gRPC and HTTP — the control tensors,
 * request.correlation_id() and flags(), Direct's null requests and instances, Oldest's
 * batches, string IDs, Triton's errors, an idle sequence's slot freed, a cancelled stream's
 * sequences ended, and what ModelStatistics and nv_inference_* count.
 */

const PROBES = join(REPO_ROOT, "dataplane", "test", "python-sequence-probe");

/** What a probe model saw of a request. */
interface Seen {
  readonly start: number | boolean | null;
  readonly end: number | boolean | null;
  readonly ready: number | boolean | null;
  /** The CORRID tensor's value, as text. */
  readonly corrid: string;
  readonly correlation_id: string;
  readonly id_type: string;
  readonly flags: number;
  readonly position: number;
  /** request.correlation_id() of every request of its execute call, in order ("0": a null request). */
  readonly call: readonly string[];
  readonly instance: string;
  readonly input: number;
}

type Id = number | bigint | string;

const idParameter = (id: Id): InferParameter =>
  typeof id === "string"
    ? { parameterChoice: { $case: "stringParam", value: id } }
    : { parameterChoice: { $case: "int64Param", value: BigInt(id) } };
const flag = (value: boolean): InferParameter => ({ parameterChoice: { $case: "boolParam", value } });

/** A request of a probe model: INPUT = `input`, in sequence `id` (none when undefined). */
function probeRequest(
  model: string,
  id: Id | undefined,
  { start = false, end = false, input = 0, delayMs = 0 } = {},
): ModelInferRequest {
  const parameters: Record<string, InferParameter> = {};
  if (id !== undefined) parameters["sequence_id"] = idParameter(id);
  if (start) parameters["sequence_start"] = flag(true);
  if (end) parameters["sequence_end"] = flag(true);
  if (delayMs > 0) parameters["delay_ms"] = { parameterChoice: { $case: "int64Param", value: BigInt(delayMs) } };
  return inferRequest({
    modelName: model,
    parameters,
    inputs: [
      {
        name: "INPUT",
        datatype: "INT32",
        shape: model === "seq_string" || model === "seq_bls" ? [1n] : [1n, 1n],
        parameters: {},
        contents: undefined,
      },
    ],
    rawInputContents: [new Uint8Array(new Int32Array([input]).buffer)],
  });
}

function seenOf(response: ModelInferResponse): Seen {
  const raw = response.rawOutputContents[0]!;
  const length = new DataView(raw.buffer, raw.byteOffset, raw.byteLength).getUint32(0, true);
  return JSON.parse(new TextDecoder().decode(raw.subarray(4, 4 + length))) as Seen;
}

async function inferError(server: ServerProcess, request: ModelInferRequest): Promise<ServiceError> {
  try {
    await infer(server.client, request);
  } catch (error) {
    return error as ServiceError;
  }
  throw new Error("the request succeeded but an error was expected");
}

describe("sequence batching: the probe models over gRPC and HTTP", function () {
  this.timeout(60_000);
  let server: ServerProcess;
  before(async function () {
    requireTritonPeers(this);
    server = await startServer(["--model-repository", PROBES, "--python", MODELS_PYTHON]);
  });
  after(() => server?.stop());

  const send = async (model: string, id: Id | undefined, options: Parameters<typeof probeRequest>[2] = {}) =>
    seenOf(await infer(server.client, probeRequest(model, id, options)));

  it("gives the model the control tensors, correlation_id() and flags() of each request of a sequence", async () => {
    const first = await send("seq_direct", 1001, { start: true, input: 1 });
    const middle = await send("seq_direct", 1001, { input: 2 });
    const last = await send("seq_direct", 1001, { end: true, input: 3 });
    assert.deepEqual(
      [first, middle, last].map(({ start, end, ready, corrid, correlation_id, id_type, flags, input }) => ({
        start,
        end,
        ready,
        corrid,
        correlation_id,
        id_type,
        flags,
        input,
      })),
      [
        { start: 1, end: 0, ready: 1, corrid: "1001", correlation_id: "1001", id_type: "int", flags: 1, input: 1 },
        { start: 0, end: 0, ready: 1, corrid: "1001", correlation_id: "1001", id_type: "int", flags: 0, input: 2 },
        { start: 0, end: 1, ready: 1, corrid: "1001", correlation_id: "1001", id_type: "int", flags: 2, input: 3 },
      ],
    );
    // Its END freed the ID: the same ID without START is refused.
    const error = await inferError(server, probeRequest("seq_direct", 1001));
    assert.equal(error.code, status.INVALID_ARGUMENT);
    assert.equal(
      error.details,
      "inference request for sequence 1001 to model 'seq_direct' must specify the START flag on the first request of the sequence",
    );
  });

  it("reads an int64 -1 as Triton does, as the unsigned 2^64 - 1, in the tensor and in correlation_id()", async () => {
    const seen = await send("seq_direct", -1, { start: true, end: true });
    assert.equal(seen.correlation_id, "18446744073709551615");
    assert.equal(seen.id_type, "int");
    assert.equal(seen.corrid, "18446744073709551615");
  });

  it("keeps each sequence on one instance; a new one takes slot 0 of the other instance before slot 1 of the first", async () => {
    const a = await send("seq_direct", 2001, { start: true });
    const b = await send("seq_direct", 2002, { start: true });
    assert.notEqual(a.instance, b.instance, "slot 0 of each instance first");
    for (let n = 0; n < 3; n++) {
      assert.equal((await send("seq_direct", 2001)).instance, a.instance);
      assert.equal((await send("seq_direct", 2002)).instance, b.instance);
    }
    // A third sequence takes slot 1 of the first instance: its request alone runs beside a null request in slot 0.
    const c = await send("seq_direct", 2003, { start: true });
    assert.equal(c.instance, a.instance);
    assert.deepEqual(c.call, ["0", "2003"]);
    assert.equal(c.position, 1);
    for (const id of [2001, 2002, 2003]) await send("seq_direct", id, { end: true });
  });

  it("Oldest: a sequence's requests one at a time and in order on a stream, sequences batched together", async () => {
    const requests = [3001, 3002].flatMap((id) =>
      [1, 2, 3].map((input) => probeRequest("seq_oldest", id, { start: input === 1, end: input === 3, input })),
    );
    const replies = await streamAll(server.client, requests);
    assert.ok(
      replies.every((reply) => reply.errorMessage === ""),
      replies.map((r) => r.errorMessage).join("; "),
    );
    const seen = replies.map((reply) => seenOf(reply.inferResponse!));
    for (const one of seen) {
      assert.equal(
        new Set(one.call).size,
        one.call.length,
        `one request of a sequence per call: ${one.call.join(",")}`,
      );
      assert.ok(!one.call.includes("0"), "Oldest never pads");
    }
    for (const id of ["3001", "3002"]) {
      const mine = seen.filter((one) => one.correlation_id === id);
      assert.deepEqual(
        mine.map(({ start, end, ready, input }) => ({ start, end, ready, input })),
        [
          { start: true, end: 0, ready: 1, input: 1 },
          { start: false, end: 0, ready: 1, input: 2 },
          { start: false, end: 1, ready: 1, input: 3 },
        ],
      );
    }
  });

  it("takes string correlation IDs (an int and a string of the same digits are different sequences)", async () => {
    const seen = await send("seq_string", "session-a", { start: true });
    assert.deepEqual([seen.corrid, seen.correlation_id, seen.id_type], ["session-a", "session-a", "str"]);
    await send("seq_string", "session-a", { end: true });
    const error = await inferError(server, probeRequest("seq_string", 5, { start: true }));
    assert.equal(error.code, status.INVALID_ARGUMENT);
    assert.equal(
      error.details,
      "[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'UINT64', but model 'seq_string' expects 'BYTES'",
    );
  });

  it("gives a BLS call's correlation_id and flags to the called sequence model (pb_utils.InferenceRequest)", async () => {
    // seq_bls is no sequence model: it passes its own request's ID and flags on to seq_direct.
    const started = await send("seq_bls", 8001, { start: true, input: 5 });
    assert.deepEqual(
      [started.start, started.end, started.ready, started.corrid, started.correlation_id, started.flags, started.input],
      [1, 0, 1, "8001", "8001", 1, 5],
    );
    const ended = await send("seq_bls", 8001, { end: true, input: 6 });
    assert.deepEqual([ended.start, ended.end, ended.corrid, ended.flags, ended.input], [0, 1, "8001", 2, 6]);
    const text = await send("seq_bls", "bls-string", { start: true, end: true }).catch((error: ServiceError) => error);
    assert.ok(!("start" in text), "a string ID to a UINT64 CORRID is refused, as Triton");
    assert.match((text as ServiceError).details, /data-type is 'BYTES', but model 'seq_direct' expects 'UINT64'/);
  });

  it("refuses what Triton refuses, with its words", async () => {
    const cases: [ModelInferRequest, string][] = [
      [
        probeRequest("seq_direct", undefined),
        "inference request to model 'seq_direct' must specify a non-zero or non-empty correlation ID",
      ],
      [
        { ...probeRequest("seq_direct", 7, { start: true }), parameters: { sequence_id: flag(true) } },
        "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.",
      ],
      [
        {
          ...probeRequest("seq_direct", 7),
          parameters: { sequence_id: idParameter(7), sequence_start: idParameter(1) },
        },
        "invalid value type for 'sequence_start' parameter, expected bool_param.",
      ],
    ];
    for (const [request, details] of cases) {
      const error = await inferError(server, request);
      assert.equal(error.code, status.INVALID_ARGUMENT);
      assert.equal(error.details, details);
    }
  });

  it("runs sequences over HTTP: a JSON whole number or string as sequence_id", async () => {
    const post = async (parameters: Record<string, unknown>, model = "seq_direct"): Promise<Seen> => {
      const shape = model === "seq_string" ? [1] : [1, 1];
      const reply = await fetch(`http://127.0.0.1:${server.httpPort}/v2/models/${model}/infer`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ inputs: [{ name: "INPUT", datatype: "INT32", shape, data: [4] }], parameters }),
      });
      const body = (await reply.json()) as { outputs?: { data: string[] }[]; error?: string };
      assert.equal(reply.status, 200, body.error);
      return JSON.parse(body.outputs![0]!.data[0]!) as Seen;
    };
    const seen = await post({ sequence_id: 4001, sequence_start: true });
    assert.deepEqual([seen.start, seen.correlation_id, seen.flags], [1, "4001", 1]);
    assert.equal((await post({ sequence_id: 4001, sequence_end: true })).end, 1);
    const text = await post({ sequence_id: "4001", sequence_start: true, sequence_end: true }, "seq_string");
    assert.deepEqual([text.corrid, text.id_type], ["4001", "str"]);
    const reply = await fetch(`http://127.0.0.1:${server.httpPort}/v2/models/seq_direct/infer`, {
      method: "POST",
      body: JSON.stringify({
        inputs: [{ name: "INPUT", datatype: "INT32", shape: [1, 1], data: [4] }],
        parameters: { sequence_id: 4001 },
      }),
    });
    assert.equal(reply.status, 400);
    assert.match(((await reply.json()) as { error: string }).error, /must specify the START flag/);
  });

  it("frees an idle sequence's slot for a backlogged one; the idle sequence is forgotten", async () => {
    // 8 slots (4 on each of 2 instances): 8 sequences left open, a 9th waits in the backlog.
    for (let id = 5001; id <= 5008; id++) await send("seq_direct", id, { start: true });
    const waiting = send("seq_direct", 5009, { start: true, end: true });
    const metrics = `http://127.0.0.1:${server.metricsPort}/metrics`;
    await eventually(async () => {
      const pending = valueOf(await scrape(metrics), "nv_inference_pending_request_count", { model: "seq_direct" });
      assert.equal(pending, 1, "the backlogged START is pending");
    });
    // max_sequence_idle_microseconds is 1 s: an idle sequence's slot goes to the backlog.
    const seen = await waiting;
    assert.equal(seen.correlation_id, "5009");
    await sleep(1200);
    const error = await inferError(server, probeRequest("seq_direct", 5001));
    assert.match(error.details, /sequence 5001 .* must specify the START flag/);
  });

  it("ends the sequences of a cancelled stream's queued requests: their slots go to the backlog at once", async () => {
    // seq_oldest: 4 slots, an idle time of a minute: only the cancel can free them in this test.
    const ids = [6001, 6002, 6003, 6004];
    for (const id of ids) await send("seq_oldest", id, { start: true });
    const stream = server.client.modelStreamInfer();
    stream.on("error", () => undefined);
    stream.on("data", () => undefined);
    // The first batch (2 requests, the preferred size) runs for a second; the other 2 wait.
    for (const id of ids) stream.write(probeRequest("seq_oldest", id, { delayMs: 1000 }));
    await sleep(300);
    const backlogged = send("seq_oldest", 6005, { start: true, end: true });
    await sleep(100);
    stream.cancel();
    const seen = await backlogged;
    assert.equal(seen.correlation_id, "6005");
    // Two sequences were ended by the cancel: their IDs are forgotten; the two that ran are still open.
    const refused = await Promise.all(
      ids.map((id) => inferError(server, probeRequest("seq_oldest", id)).catch(() => undefined)),
    );
    assert.equal(refused.filter((error) => error !== undefined).length, 2, "two sequences ended");
    for (const id of ids) await send("seq_oldest", id, { start: true, end: true });
  });

  it("counts real requests as inferences and null requests in their execution's batch size", async () => {
    const before = (await call(server.client, "modelStatistics", { name: "seq_direct", version: "1" })).modelStats[0]!;
    const a = await send("seq_direct", 7001, { start: true });
    await send("seq_direct", 7002, { start: true });
    const c = await send("seq_direct", 7003, { start: true });
    assert.equal(c.instance, a.instance);
    assert.deepEqual(c.call, ["0", "7003"], "slot 1's request ran beside a null request");
    const after = (await call(server.client, "modelStatistics", { name: "seq_direct", version: "1" })).modelStats[0]!;
    assert.equal(after.inferenceCount - before.inferenceCount, 3n, "null requests are not inferences");
    assert.equal(after.executionCount - before.executionCount, 3n);
    const pairs = (stats: typeof after) =>
      stats.batchStats.find((batch) => batch.batchSize === 2n)?.computeInfer?.count ?? 0n;
    assert.ok(pairs(after) > pairs(before), "an execution of batch size 2: the request and its null request");
    const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
    assert.equal(
      valueOf(samples, "nv_inference_count", { model: "seq_direct", version: "1" }),
      Number(after.inferenceCount),
    );
    assert.equal(
      valueOf(samples, "nv_inference_exec_count", { model: "seq_direct", version: "1" }),
      Number(after.executionCount),
    );
    for (const id of [7001, 7002, 7003]) await send("seq_direct", id, { end: true });
  });
});

describe("sequence batching under --grpc-workers 2", function () {
  this.timeout(60_000);
  let server: ServerProcess | undefined;
  after(() => server?.stop());

  it("does not load a sequence model, saying why (a sequence's requests could reach any worker)", async function () {
    requireTritonPeers(this);
    server = await startServer(["--grpc-workers", "2", "--model-repository", PROBES, "--python", MODELS_PYTHON]);
    const { models } = await call(server.client, "repositoryIndex", { repositoryName: "", ready: false });
    const direct = models.find((model) => model.name === "seq_direct");
    assert.equal(direct?.state, "UNAVAILABLE");
    assert.match(direct.reason, /sequence_batching keeps a sequence in one process.*serve it with --grpc-workers 1/);
  });
});

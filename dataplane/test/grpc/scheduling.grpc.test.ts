import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { InferParameter, ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { scrape, seriesValue, valueOf } from "../../../e2e/support/prometheus.js";
import { MODELS_PYTHON, requireTritonPeers } from "../fixtures/peers.js";
import { identityRequest } from "../fixtures/requests.js";
import { sleepRequest, writeSleeper } from "../fixtures/sleeper.js";
import { call, callError, eventually, infer, inferRequest, streamAll, type ServerProcess } from "../fixtures/server.js";
import { EXAMPLES } from "../fixtures/paths.js";
import { useServer } from "../fixtures/serving.js";

/**
 * Triton's scheduling of local engines, end to end on real data-plane processes: dynamic
 * batching seen in ModelStatistics' batch_stats and nv_inference_exec_count, a bounded
 * queue shedding load UNAVAILABLE, priorities reordering a saturated model, and the
 * priority and timeout parameters refused where the config does not allow them.
 */

/** identity_fp32's tensors, batched up to 8, with `scheduling` config lines. */
const identity = (name: string, scheduling: string): string =>
  [
    `name: "${name}"`,
    'backend: "identity"',
    "max_batch_size: 8",
    'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]',
    'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]',
    scheduling,
  ].join("\n");

const int = (value: number): InferParameter => ({ parameterChoice: { $case: "int64Param", value: BigInt(value) } });

/** A request of one batch item for an identity model: INPUT0 = [value, -value]. */
function identityFor(model: string, parameters: Record<string, InferParameter> = {}, value = 1): ModelInferRequest {
  return {
    ...identityRequest({ model, batch: 1, width: 2 }),
    parameters,
    rawInputContents: [new Uint8Array(new Float32Array([value, -value]).buffer)],
  };
}

describe("scheduling: dynamic batching, queue policies and priorities of local engines", function () {
  this.timeout(30_000);
  const serving = useServer({
    batched: identity("batched", "dynamic_batching { max_queue_delay_microseconds: 300000 }"),
    prioritized: identity(
      "prioritized",
      "dynamic_batching { priority_levels: 2 default_priority_level: 2 priority_queue_policy { key: 1 value { default_timeout_microseconds: 5000000 allow_timeout_override: true } } }",
    ),
  });
  let server: ServerProcess;
  before(() => ({ server } = serving));

  it("joins concurrent requests into batches: batch_stats sizes > 1, execution_count < inference_count", async () => {
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, index) => infer(server.client, identityFor("batched", {}, index))),
    );
    // Each request gets its own slice back.
    replies.forEach((reply, index) => {
      assert.deepEqual([...new Float32Array(new Uint8Array(reply.rawOutputContents[0]!).buffer)], [index, -index]);
    });
    const { modelStats } = await call(server.client, "modelStatistics", { name: "batched", version: "1" });
    const stats = modelStats[0]!;
    assert.equal(stats.inferenceCount, 8n);
    assert.ok(stats.executionCount < stats.inferenceCount, `${stats.executionCount} executions for 8 requests`);
    assert.ok(
      stats.batchStats.some((batch) => batch.batchSize > 1n),
      "a batch of more than one request",
    );
    const executions = stats.batchStats.reduce((total, batch) => total + batch.computeInfer!.count, 0n);
    assert.equal(executions, stats.executionCount, "batch_stats count every execution once");
    const items = stats.batchStats.reduce((total, batch) => total + batch.batchSize * batch.computeInfer!.count, 0n);
    assert.equal(items, 8n, "and their sizes add up to the requests' batch items");
    assert.equal(stats.inferenceStats!.success!.count, 8n);
    assert.ok(stats.inferenceStats!.queue!.ns > 0n, "requests waited in the queue for their batch");

    const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
    const labels = { model: "batched", version: "1" };
    assert.equal(valueOf(samples, "nv_inference_exec_count", labels), Number(stats.executionCount));
    assert.equal(valueOf(samples, "nv_inference_count", labels), 8);
    assert.equal(seriesValue(samples, "nv_inference_pending_request_count", labels), 0);
    assert.equal(
      seriesValue(samples, "nv_inference_pending_request_count", { model: "identity_fp32", version: "1" }),
      0,
    );
    assert.equal(seriesValue(samples, "dynamo_kserve_requests_waiting", { model: "batched" }), 0);
  });

  it("keeps an unscheduled model's statistics one execution per request, batch_stats by its batch size", async () => {
    await infer(server.client, identityRequest({ batch: 3, width: 2 }));
    const { modelStats } = await call(server.client, "modelStatistics", { name: "identity_fp32", version: "1" });
    const three = modelStats[0]!.batchStats.find((batch) => batch.batchSize === 3n);
    assert.ok(three !== undefined && three.computeInfer!.count >= 1n);
  });

  it("refuses a priority outside the levels and a timeout the policy does not allow INVALID_ARGUMENT", async () => {
    const outside = await callError(server.client, "modelInfer", identityFor("prioritized", { priority: int(3) }));
    assert.equal(outside.code, status.INVALID_ARGUMENT);
    assert.match(
      outside.details,
      /model 'prioritized': parameters\["priority"\] 3 is not a priority level: its levels are 1\.\.2/,
    );
    const timeout = await callError(server.client, "modelInfer", identityFor("prioritized", { timeout: int(1000) }));
    assert.equal(timeout.code, status.INVALID_ARGUMENT);
    assert.match(
      timeout.details,
      /parameters\["timeout"\] is not allowed.*set dynamic_batching\.default_queue_policy\.allow_timeout_override: true/,
    );
    const elsewhere = await callError(server.client, "modelInfer", identityFor("batched", { priority: int(1) }));
    assert.equal(elsewhere.code, status.INVALID_ARGUMENT);
    assert.match(elsewhere.details, /has no priority levels/);
    // Where allowed, both are taken (and are the scheduler's: identity echoes no parameters).
    const reply = await infer(server.client, identityFor("prioritized", { priority: int(1), timeout: int(1_000_000) }));
    assert.deepEqual(reply.parameters, {});
    await infer(server.client, identityFor("prioritized", { priority: int(0) }));
  });
});

describe("scheduling at shutdown: the drain waits for queued requests", function () {
  this.timeout(30_000);
  const serving = useServer(
    { waits: identity("waits", "dynamic_batching { max_queue_delay_microseconds: 1500000 }") },
    ["--drain-delay-secs", "0"],
  );

  it("answers a request still queued for its batch when SIGTERM comes, then exits 0", async () => {
    const { server } = serving;
    const exited = new Promise<number | null>((resolve) => server.process.once("exit", (code) => resolve(code)));
    const queued = infer(server.client, identityFor("waits", {}, 7));
    await eventually(async () => {
      const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
      assert.equal(seriesValue(samples, "nv_inference_pending_request_count", { model: "waits", version: "1" }), 1);
    });
    server.process.kill("SIGTERM");
    const reply = await queued;
    assert.deepEqual([...new Float32Array(new Uint8Array(reply.rawOutputContents[0]!).buffer)], [7, -7]);
    assert.equal(await exited, 0, server.stderr);
  });
});

describe("scheduling a slow Python-backend model: a bounded queue, priorities under saturation", function () {
  this.timeout(60_000);
  before(function () {
    requireTritonPeers(this);
  });
  const serving = useServer({}, ["--python", MODELS_PYTHON], (repository) => {
    writeSleeper(repository.dir, "bounded", "dynamic_batching { default_queue_policy { max_queue_size: 1 } }");
    writeSleeper(repository.dir, "ranked", "dynamic_batching { priority_levels: 2 default_priority_level: 2 }");
  });
  let server: ServerProcess;
  before(() => ({ server } = serving));

  const gauge = async (name: string, labels: Record<string, string>): Promise<number | undefined> =>
    seriesValue(await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`), name, labels);
  const pending = (model: string) => gauge("nv_inference_pending_request_count", { model, version: "1" });

  it("refuses the request past max_queue_size UNAVAILABLE (Triton's words) while the others succeed", async () => {
    const running = infer(server.client, sleepRequest("bounded", 1.5));
    // The first runs (the instance is busy); the second takes the queue's one place.
    await eventually(async () => assert.equal(await gauge("dynamo_kserve_requests_running", { model: "bounded" }), 1));
    const queued = infer(server.client, sleepRequest("bounded", 0.01));
    await eventually(async () => assert.equal(await pending("bounded"), 1));
    const extra = await callError(server.client, "modelInfer", sleepRequest("bounded", 0.01));
    assert.equal(extra.code, status.UNAVAILABLE);
    assert.match(extra.details, /Exceeds maximum queue size: model 'bounded' version 1 queues at most 1 request/);
    const [first, second] = await Promise.all([running, queued]);
    assert.ok(first.outputs.length === 1 && second.outputs.length === 1);
    assert.equal(await pending("bounded"), 0);
  });

  it("runs the higher priority first when the model is saturated", async () => {
    const finished: string[] = [];
    const send = (label: string, seconds: number, priority: number) =>
      infer(server.client, sleepRequest("ranked", seconds, { priority: int(priority) })).then(() =>
        finished.push(label),
      );
    const busy = send("busy", 2, 0);
    await eventually(async () => assert.equal(await gauge("dynamo_kserve_requests_running", { model: "ranked" }), 1));
    const low = send("low", 0.01, 2);
    const lower = send("lower", 0.01, 0);
    const high = send("high", 0.01, 1);
    await eventually(async () => assert.equal(await pending("ranked"), 3));
    await Promise.all([busy, low, lower, high]);
    assert.deepEqual(finished, ["busy", "high", "low", "lower"]);
  });
});

describe("scheduling a decoupled model: a client that stops reading holds up no other", function () {
  this.timeout(30_000);
  const serving = useServer({}, [], (repository) => {
    const config = readFileSync(join(EXAMPLES, "repeat_int32", "config.pbtxt"), "utf8").replace(
      'name: "repeat_int32"',
      'name: "one_instance"',
    );
    mkdirSync(join(repository.dir, "one_instance", "1"), { recursive: true });
    writeFileSync(join(repository.dir, "one_instance", "config.pbtxt"), `${config}\ninstance_group [ { count: 1 } ]\n`);
  });

  /** A stream request for `count` responses of the one-instance repeat model. */
  const repeat = (count: number): ModelInferRequest =>
    inferRequest({
      modelName: "one_instance",
      inputs: [{ name: "IN", datatype: "INT32", shape: [BigInt(count)], parameters: {}, contents: undefined }],
      rawInputContents: [new Uint8Array(new Int32Array(count).fill(7).buffer)],
    });

  it("answers another client while the only instance's last request waits for its caller to read", async () => {
    const { server } = serving;
    const stalled = server.client.modelStreamInfer();
    stalled.on("error", () => undefined);
    // Many responses; the client takes the first and reads no more (HTTP/2 flow control fills up).
    const first = new Promise<void>((resolve) =>
      stalled.once("data", () => {
        stalled.pause();
        resolve();
      }),
    );
    stalled.write(repeat(50_000));
    await first;
    try {
      const replies = await Promise.race([
        streamAll(server.client, [repeat(3)]),
        sleep(10_000, undefined, { ref: false }).then(() =>
          assert.fail("the other client's request never ran: the instance is held"),
        ),
      ]);
      assert.equal(replies.length, 3);
      assert.ok(replies.every((reply) => reply.errorMessage === ""));
    } finally {
      stalled.cancel();
    }
  });
});

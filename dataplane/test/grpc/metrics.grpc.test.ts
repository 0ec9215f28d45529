import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { InferenceExtensionsClient } from "../../../proto/gen/ts/extensions.js";
import { credentials } from "@grpc/grpc-js";
import { scrape, seriesValue, valueOf, type Sample } from "../../../e2e/support/prometheus.js";
import { callError, eventually, infer, streamAll, type ServerProcess } from "../fixtures/server.js";
import { mockerConfig } from "../fixtures/repository.js";
import { identityRequest, promptRequest } from "../fixtures/requests.js";
import { useServer } from "../fixtures/serving.js";

const INFERENCE = "inference.GRPCInferenceService";

describe("Prometheus metrics after known traffic (dynamo_frontend_*, nv_inference_*, grpc_server_*)", function () {
  this.timeout(20_000);
  const serving = useServer();
  let server: ServerProcess;
  let samples: Sample[];

  before(async () => {
    ({ server } = serving);
    // 3 successes (batch sizes 1, 2, 3), 1 bad request, 1 unknown model.
    for (const batch of [1, 2, 3]) await infer(server.client, identityRequest({ batch: batch, width: 2 }));
    const bad = await callError(server.client, "modelInfer", {
      ...identityRequest({ batch: 1, width: 2 }),
      inputs: [{ ...identityRequest({ batch: 1, width: 2 }).inputs[0]!, datatype: "INT32" }],
    });
    assert.equal(bad.code, status.INVALID_ARGUMENT);
    const missing = await callError(server.client, "modelInfer", {
      ...identityRequest({ batch: 1, width: 2 }),
      modelName: "no_such_model",
    });
    assert.equal(missing.code, status.NOT_FOUND);
    // One stream carrying two LLM requests of 4 and 6 tokens.
    const replies = await streamAll(server.client, [promptRequest({ maxTokens: 4 }), promptRequest({ maxTokens: 6 })]);
    assert.equal(replies.length, 10);
    // One server-streaming request of 3 tokens.
    const extensions = new InferenceExtensionsClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
    await new Promise<void>((resolve, reject) => {
      const call = extensions.modelInferStream(promptRequest({ maxTokens: 3 }));
      call.on("data", () => undefined);
      call.on("end", resolve);
      call.on("error", reject);
    });
    extensions.close();
    samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
  });

  it("counts requests by model, endpoint, type and status, and nothing stays in flight", () => {
    const requests = (labels: Record<string, string>) => valueOf(samples, "dynamo_frontend_requests_total", labels);
    assert.equal(
      requests({ model: "identity_fp32", endpoint: "ModelInfer", request_type: "unary", status: "success" }),
      3,
    );
    assert.equal(
      requests({ model: "identity_fp32", endpoint: "ModelInfer", request_type: "unary", status: "error" }),
      1,
    );
    assert.equal(
      requests({ model: "mock_llm", endpoint: "ModelStreamInfer", request_type: "stream", status: "success" }),
      2,
    );
    assert.equal(
      requests({ model: "mock_llm", endpoint: "ModelInferStream", request_type: "stream", status: "success" }),
      1,
    );
    assert.equal(
      samples.some((sample) => sample.labels["model"] === "no_such_model"),
      false,
      "a client cannot mint series with made-up model names",
    );
    assert.equal(valueOf(samples, "dynamo_frontend_inflight_requests", { model: "identity_fp32" }), 0);
    assert.equal(valueOf(samples, "dynamo_frontend_request_duration_seconds_count", { model: "identity_fp32" }), 4);
  });

  it("publishes the pod's totals, 0 waiting and running, and no KV-cache total when no model keeps a KV cache", () => {
    const pod = (name: string) => samples.filter((sample) => sample.name === name);
    for (const name of ["dynamo_kserve_server_requests_waiting", "dynamo_kserve_server_requests_running"]) {
      assert.deepEqual(pod(name), [{ name, labels: {}, value: 0 }], name);
    }
    assert.deepEqual(pod("dynamo_kserve_server_kv_cache_usage_ratio"), []);
  });

  it("publishes in-flight requests for every served model, 0 before its first request (autoscalers read a value per pod)", () => {
    const idle = seriesValue(samples, "dynamo_frontend_inflight_requests", { model: "identity_bytes" });
    assert.equal(idle, 0, "identity_bytes was never called, and still has a series");
  });

  it("times first tokens and the gaps between tokens of streamed requests", () => {
    const model = { model: "mock_llm" };
    assert.equal(valueOf(samples, "dynamo_frontend_time_to_first_token_seconds_count", model), 3);
    // mock_llm waits 50 ms before the first token.
    assert.ok(valueOf(samples, "dynamo_frontend_time_to_first_token_seconds_sum", model) >= 3 * 0.045);
    assert.equal(valueOf(samples, "dynamo_frontend_inter_token_latency_seconds_count", model), 3 + 5 + 2);
    assert.equal(valueOf(samples, "dynamo_frontend_output_sequence_tokens_sum", model), 13);
    assert.equal(valueOf(samples, "dynamo_frontend_output_sequence_tokens_count", model), 3);
  });

  it("reports Triton's nv_inference_* per model and version", () => {
    const version = { model: "identity_fp32", version: "1" };
    assert.equal(valueOf(samples, "nv_inference_request_success", version), 3);
    assert.equal(valueOf(samples, "nv_inference_request_failure", version), 1);
    assert.equal(valueOf(samples, "nv_inference_count", version), 6, "batch sizes 1 + 2 + 3");
    assert.equal(valueOf(samples, "nv_inference_exec_count", version), 3);
    assert.ok(valueOf(samples, "nv_inference_request_duration_us", version) > 0);
    for (const family of ["queue", "compute_input", "compute_infer", "compute_output"]) {
      assert.ok(
        samples.some(
          (sample) =>
            sample.name === `nv_inference_${family}_duration_us` && sample.labels["model"] === "identity_fp32",
        ),
        family,
      );
    }
    assert.equal(valueOf(samples, "nv_inference_request_success", { model: "add_sub_onnx", version: "1" }), 0);
  });

  it("counts every RPC with the standard grpc_server_* families", () => {
    const unary = { grpc_type: "unary", grpc_service: INFERENCE, grpc_method: "ModelInfer" };
    assert.equal(valueOf(samples, "grpc_server_started_total", unary), 5);
    assert.equal(valueOf(samples, "grpc_server_handled_total", { ...unary, grpc_code: "OK" }), 3);
    assert.equal(valueOf(samples, "grpc_server_handled_total", { ...unary, grpc_code: "INVALID_ARGUMENT" }), 1);
    assert.equal(valueOf(samples, "grpc_server_handled_total", { ...unary, grpc_code: "NOT_FOUND" }), 1);
    assert.equal(valueOf(samples, "grpc_server_handling_seconds_count", unary), 5);
    const bidi = { grpc_type: "bidi_stream", grpc_service: INFERENCE, grpc_method: "ModelStreamInfer" };
    assert.equal(valueOf(samples, "grpc_server_msg_received_total", bidi), 2);
    assert.equal(valueOf(samples, "grpc_server_msg_sent_total", bidi), 10);
    assert.equal(valueOf(samples, "grpc_server_handled_total", { ...bidi, grpc_code: "OK" }), 1);
    const serverStream = {
      grpc_type: "server_stream",
      grpc_service: "dynamokserve.v1.InferenceExtensions",
      grpc_method: "ModelInferStream",
    };
    assert.equal(valueOf(samples, "grpc_server_msg_sent_total", serverStream), 3);
  });
});

describe("load signals for endpoint pickers (the model-server protocol's waiting, running, KV cache)", function () {
  this.timeout(20_000);
  // Two sequences at once, a 100-token KV cache, each answer after 60 s unless cancelled;
  // a second model of one sequence and a 20-token KV cache, for the pod's totals.
  const serving = useServer({
    busy_llm: mockerConfig("busy_llm", { ttftMs: 60_000, maxTokens: 1, maxNumSeqs: 2, kvCacheTokens: 100 }),
    narrow_llm: mockerConfig("narrow_llm", { ttftMs: 60_000, maxTokens: 1, maxNumSeqs: 1, kvCacheTokens: 20 }),
  });
  let server: ServerProcess;
  before(() => ({ server } = serving));

  /** The model's three signals as scraped; undefined for a series that is not there. */
  const signals = async (model: string) => {
    const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
    const of = (name: string) => seriesValue(samples, name, { model });
    return {
      waiting: of("dynamo_kserve_requests_waiting"),
      running: of("dynamo_kserve_requests_running"),
      kvCache: of("dynamo_kserve_kv_cache_usage_ratio"),
    };
  };

  /** The pod's totals as scraped: one series each, no labels; undefined for one that is not there. */
  const podSignals = async () => {
    const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
    const of = (name: string) => {
      const found = samples.filter((sample) => sample.name === name);
      assert.ok(found.length <= 1, `${name}: ${found.length} series, not one per pod`);
      assert.deepEqual(found[0]?.labels ?? {}, {}, `${name} has no labels`);
      return found[0]?.value;
    };
    return {
      waiting: of("dynamo_kserve_server_requests_waiting"),
      running: of("dynamo_kserve_server_requests_running"),
      kvCache: of("dynamo_kserve_server_kv_cache_usage_ratio"),
    };
  };

  /** Requests held until a test, or at the latest the test's end, aborts them. */
  const held: AbortController[] = [];
  afterEach(() => {
    for (const controller of held.splice(0)) controller.abort();
  });

  /** Holds a request on `model` until the returned controller aborts it. */
  const hold = (model: string, text: string): AbortController => {
    const controller = new AbortController();
    const call = server.client.modelInfer(promptRequest({ model, text }), () => undefined);
    controller.signal.addEventListener("abort", () => call.cancel());
    held.push(controller);
    return controller;
  };

  it("counts a model's waiting and running requests and its KV-cache share, and returns to 0 when they end", async () => {
    assert.deepEqual(await signals("busy_llm"), { waiting: 0, running: 0, kvCache: 0 });
    const calls = ["one two three", "four five", "six"].map((text) => hold("busy_llm", text));
    // Two run (5 prompt words held of 100), the third waits for a sequence slot.
    await eventually(async () =>
      assert.deepEqual(await signals("busy_llm"), { waiting: 1, running: 2, kvCache: 0.05 }),
    );
    calls[0]!.abort();
    // The waiting one ("six") takes the freed slot.
    await eventually(async () =>
      assert.deepEqual(await signals("busy_llm"), { waiting: 0, running: 2, kvCache: 0.03 }),
    );
    for (const call of calls) call.abort();
    await eventually(async () => assert.deepEqual(await signals("busy_llm"), { waiting: 0, running: 0, kvCache: 0 }));
  });

  it("totals waiting and running over every model of the pod and reports its fullest KV cache", async () => {
    // Idle: both LLMs report an empty KV cache, every other model nothing waiting or running.
    assert.deepEqual(await podSignals(), { waiting: 0, running: 0, kvCache: 0 });
    // busy_llm: two run (5 prompt words of 100: 0.05), the third waits.
    const calls = ["one two three", "four five", "six"].map((text) => hold("busy_llm", text));
    // narrow_llm: one runs (4 prompt words of 20: 0.2), then a second waits.
    calls.push(hold("narrow_llm", "seven eight nine ten"));
    await eventually(async () => assert.equal((await signals("narrow_llm")).running, 1));
    calls.push(hold("narrow_llm", "eleven"));
    await eventually(async () => {
      assert.deepEqual(await signals("busy_llm"), { waiting: 1, running: 2, kvCache: 0.05 });
      assert.deepEqual(await signals("narrow_llm"), { waiting: 1, running: 1, kvCache: 0.2 });
    });
    // Sums of waiting (1 + 1) and running (2 + 1); the larger ratio, not their sum (0.25).
    assert.deepEqual(await podSignals(), { waiting: 2, running: 3, kvCache: 0.2 });
    calls[3]!.abort();
    calls[4]!.abort();
    // narrow_llm holds nothing: busy_llm's cache is now the fullest.
    await eventually(async () => assert.deepEqual(await podSignals(), { waiting: 1, running: 2, kvCache: 0.05 }));
    for (const call of calls) call.abort();
    await eventually(async () => assert.deepEqual(await podSignals(), { waiting: 0, running: 0, kvCache: 0 }));
  });

  it("publishes tensor models' signals too, without a KV cache", async () => {
    await infer(server.client, identityRequest({ batch: 1, width: 2 }));
    assert.deepEqual(await signals("identity_fp32"), { waiting: 0, running: 0, kvCache: undefined });
  });
});

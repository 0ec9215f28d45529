import { status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { scrape, seriesValue, valueOf, type Sample } from "../../../e2e/support/prometheus.js";
import { callError, eventually, infer, streamAll, type ServerProcess } from "../fixtures/server.js";
import { identityRequest, promptRequest } from "../fixtures/requests.js";
import { useServer } from "../fixtures/serving.js";

/** NVIDIA Dynamo's component labels as this data plane fills them (metrics/component.ts says why). */
const identityModelInfer = {
  dynamo_namespace: "kserve-parity",
  dynamo_component: "identity",
  dynamo_endpoint: "ModelInfer",
  model: "identity_fp32",
};

describe("NVIDIA Dynamo's dynamo_component_* families after known traffic, and error_type on dynamo_frontend_requests_total", function () {
  this.timeout(30_000);
  const serving = useServer({}, ["--server-name", "kserve-parity"]);
  let server: ServerProcess;
  let samples: Sample[];

  before(async () => {
    ({ server } = serving);
    // 3 successes of 2, 4 and 6 FP32 elements: 48 bytes in, 48 out.
    for (const batch of [1, 2, 3]) await infer(server.client, identityRequest({ batch, width: 2 }));
    // A request whose input has the wrong datatype: admitted, then refused (validation).
    const bad = identityRequest({ batch: 1, width: 2 });
    const wrongType = await callError(server.client, "modelInfer", {
      ...bad,
      inputs: [{ ...bad.inputs[0]!, datatype: "INT32" }],
    });
    assert.equal(wrongType.code, status.INVALID_ARGUMENT);
    // An unknown model: no series of its name.
    const missing = await callError(server.client, "modelInfer", identityRequest({ model: "no_such_model" }));
    assert.equal(missing.code, status.NOT_FOUND);
    // A decoupled model on the unary HTTP route: refused at admission (501, not_implemented).
    const refused = await fetch(`http://127.0.0.1:${server.httpPort}/v2/models/repeat_int32/infer`, {
      method: "POST",
      body: JSON.stringify({ inputs: [{ name: "IN", shape: [1], datatype: "INT32", data: [1] }] }),
    });
    assert.equal(refused.status, 501);
    await refused.arrayBuffer();
    // Two LLM requests on one stream (4 and 6 tokens).
    assert.equal(
      (await streamAll(server.client, [promptRequest({ maxTokens: 4 }), promptRequest({ maxTokens: 6 })])).length,
      10,
    );
    // One whose deadline passes before its first token (mock_llm takes 50 ms to it).
    await new Promise<void>((resolve) => {
      const call = server.client.modelStreamInfer({ deadline: Date.now() + 15 });
      call.on("data", () => undefined);
      call.on("error", (error: ServiceError) => {
        assert.equal(error.code, status.DEADLINE_EXCEEDED);
        resolve();
      });
      call.write(promptRequest({ maxTokens: 4 }));
    });
    // The data plane ends the request when it sees the deadline pass.
    await eventually(async () => {
      samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
      const ended = { model: "mock_llm", endpoint: "ModelStreamInfer", status: "error" };
      assert.equal(valueOf(samples, "dynamo_frontend_requests_total", ended), 1);
    });
  });

  it("counts requests, errors by type, time, bytes and in-flight requests per namespace, component, endpoint and model", () => {
    const of = (name: string, labels: Record<string, string> = {}) =>
      valueOf(samples, name, { ...identityModelInfer, ...labels });
    assert.equal(of("dynamo_component_requests_total"), 4);
    assert.equal(of("dynamo_component_errors_total", { error_type: "validation" }), 1);
    assert.equal(of("dynamo_component_errors_total"), 1, "one error series, of one type");
    assert.equal(of("dynamo_component_request_duration_seconds_count"), 4);
    assert.ok(of("dynamo_component_request_duration_seconds_sum") > 0);
    assert.equal(
      of("dynamo_component_request_bytes_total"),
      48,
      "the successes' input tensors (the bad one was not read)",
    );
    assert.equal(of("dynamo_component_response_bytes_total"), 48);
    assert.equal(of("dynamo_component_inflight_requests"), 0);
    assert.equal(of("dynamo_component_cancellation_total"), 0);
    assert.equal(
      samples.some((sample) => Object.values(sample.labels).includes("no_such_model")),
      false,
      "a client cannot mint series with made-up model names",
    );
  });

  it("counts a request refused at admission as a request and a not_implemented error", () => {
    const refused = {
      dynamo_namespace: "kserve-parity",
      dynamo_component: "repeat",
      dynamo_endpoint: "infer",
      model: "repeat_int32",
    };
    assert.equal(valueOf(samples, "dynamo_component_requests_total", refused), 1);
    assert.equal(valueOf(samples, "dynamo_component_errors_total", { ...refused, error_type: "not_implemented" }), 1);
    assert.equal(
      seriesValue(samples, "dynamo_component_request_duration_seconds_count", refused),
      undefined,
      "nothing ran, nothing timed",
    );
  });

  it("counts streamed requests, their response bytes, and a request whose deadline passed as cancelled", () => {
    const stream = {
      dynamo_namespace: "kserve-parity",
      dynamo_component: "mocker",
      dynamo_endpoint: "ModelStreamInfer",
      model: "mock_llm",
    };
    assert.equal(valueOf(samples, "dynamo_component_requests_total", stream), 3);
    assert.equal(valueOf(samples, "dynamo_component_errors_total", { ...stream, error_type: "cancelled" }), 1);
    assert.equal(valueOf(samples, "dynamo_component_cancellation_total", stream), 1);
    assert.ok(valueOf(samples, "dynamo_component_request_bytes_total", stream) > 0);
    // 10 tokens of text_output, each at least one 4-byte length prefix and a character.
    assert.ok(valueOf(samples, "dynamo_component_response_bytes_total", stream) >= 10 * 5);
  });

  it("labels dynamo_frontend_requests_total with the error type, empty for successes", () => {
    const requests = (labels: Record<string, string>) =>
      valueOf(samples, "dynamo_frontend_requests_total", { model: "identity_fp32", endpoint: "ModelInfer", ...labels });
    assert.equal(requests({ status: "success", error_type: "" }), 3);
    assert.equal(requests({ status: "error", error_type: "validation" }), 1);
    const stream = { model: "mock_llm", endpoint: "ModelStreamInfer", status: "error" };
    assert.equal(valueOf(samples, "dynamo_frontend_requests_total", { ...stream, error_type: "cancelled" }), 1);
    const refused = { model: "repeat_int32", endpoint: "infer", status: "error" };
    assert.equal(valueOf(samples, "dynamo_frontend_requests_total", { ...refused, error_type: "not_implemented" }), 1);
  });
});

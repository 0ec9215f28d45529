import { credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { InferenceExtensionsClient } from "../../../proto/gen/ts/extensions.js";
import { GRPCInferenceServiceClient, type ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { parseMetrics, valueOf, type Sample } from "../../../e2e/support/prometheus.js";
import { HealthTestClient } from "../fixtures/health.js";
import { identityRequest } from "../fixtures/requests.js";
import { SecretFiles } from "../fixtures/secret-files.js";
import { useServer } from "../fixtures/serving.js";
import type { ServerProcess } from "../fixtures/server.js";

/**
 * The one gRPC call interceptor (server/call-interceptor.ts) on every kind of RPC with
 * bearer tokens on: a refusal comes before the handler (no request reaches a model) and is
 * counted once in grpc_server_handled_total; status details are bounded on the unary, the
 * server-streaming and the bidirectional paths; and no client can add series by what it names
 * (a model or a method that does not exist, a token).
 */

const TOKEN = "the-one-token";
const MAX_DETAIL_BYTES = 2048;

const bearer = (token: string): Metadata => {
  const metadata = new Metadata();
  metadata.set("authorization", `Bearer ${token}`);
  return metadata;
};

type Outcome = { code: number; details: string; replies: number };

describe("the gRPC call interceptor with bearer tokens on", function () {
  this.timeout(60_000);
  const files = new SecretFiles();
  before(() => files.write({ tokens: `${TOKEN}\n` }));
  after(() => files.remove());
  const serving = useServer({}, ["--auth-token-file", files.path("tokens")]);
  let server: ServerProcess;
  let inference: GRPCInferenceServiceClient;
  let extensions: InferenceExtensionsClient;
  before(() => {
    ({ server } = serving);
    inference = new GRPCInferenceServiceClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
    extensions = new InferenceExtensionsClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
  });
  after(() => {
    inference.close();
    extensions.close();
  });

  const unary = (request: ModelInferRequest, metadata: Metadata): Promise<Outcome> =>
    new Promise((resolve) =>
      inference.modelInfer(request, metadata, (error) =>
        resolve({ code: error?.code ?? status.OK, details: error?.details ?? "", replies: error ? 0 : 1 }),
      ),
    );
  const serverStreaming = (request: ModelInferRequest, metadata: Metadata): Promise<Outcome> =>
    new Promise((resolve) => {
      let replies = 0;
      const call = extensions.modelInferStream(request, metadata);
      call.on("data", () => replies++);
      call.on("error", (error: ServiceError) => resolve({ code: error.code, details: error.details, replies }));
      call.on("end", () => resolve({ code: status.OK, details: "", replies }));
    });
  /** ModelStreamInfer with one request; `errors` the error_message replies. */
  const bidi = (request: ModelInferRequest, metadata: Metadata): Promise<Outcome & { errors: string[] }> =>
    new Promise((resolve) => {
      let replies = 0;
      const errors: string[] = [];
      const call = inference.modelStreamInfer(metadata);
      call.on("data", (reply: { errorMessage: string }) => {
        replies++;
        if (reply.errorMessage !== "") errors.push(reply.errorMessage);
      });
      call.on("error", (error: ServiceError) => resolve({ code: error.code, details: error.details, replies, errors }));
      call.on("end", () => resolve({ code: status.OK, details: "", replies, errors }));
      call.write(request);
      call.end();
    });
  const metricsText = async (): Promise<string> =>
    (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
  const handled = (samples: readonly Sample[], method: string, code: string): number =>
    valueOf(samples, "grpc_server_handled_total", { grpc_method: method, grpc_code: code });

  it("refuses unary, server-streaming and bidirectional calls before their handler, each counted once; health needs no token", async () => {
    const refusals: Outcome[] = [];
    for (const metadata of [new Metadata(), bearer("bogus-1"), bearer("bogus-2"), bearer("bogus-3")]) {
      refusals.push(await unary(identityRequest(), metadata));
      refusals.push(await serverStreaming(identityRequest(), metadata));
      refusals.push(await bidi(identityRequest(), metadata));
    }
    for (const refusal of refusals) {
      assert.equal(refusal.code, status.UNAUTHENTICATED, refusal.details);
      assert.equal(refusal.replies, 0);
    }
    const health = new HealthTestClient(`127.0.0.1:${server.grpcPort}`);
    try {
      assert.equal(await health.check("inference.GRPCInferenceService"), "SERVING");
    } finally {
      health.close();
    }
    const text = await metricsText();
    const samples = parseMetrics(text);
    for (const method of ["ModelInfer", "ModelInferStream", "ModelStreamInfer"]) {
      assert.equal(handled(samples, method, "UNAUTHENTICATED"), 4, method);
      assert.equal(valueOf(samples, "grpc_server_started_total", { grpc_method: method }), 4, method);
      // Nothing reached the handler: no request received nor reply sent.
      assert.equal(valueOf(samples, "grpc_server_msg_sent_total", { grpc_method: method }), 0, method);
    }
    assert.equal(handled(samples, "Check", "OK"), 1);
    // No request reached the model.
    assert.equal(valueOf(samples, "nv_inference_request_failure", { model: "identity_fp32" }), 0);
    assert.equal(valueOf(samples, "nv_inference_request_success", { model: "identity_fp32" }), 0);
    assert.doesNotMatch(text, /bogus/);
  });

  it("bounds the details of a failure on every kind of call, and adds no series for a model or a method that does not exist", async () => {
    const longName = `no_such_model_${"x".repeat(100_000)}`;
    const named = identityRequest({ model: longName });
    const outcomes = [await unary(named, bearer(TOKEN)), await serverStreaming(named, bearer(TOKEN))];
    for (const outcome of outcomes) {
      assert.equal(outcome.code, status.NOT_FOUND, outcome.details.slice(0, 200));
      assert.ok(Buffer.byteLength(outcome.details) <= MAX_DETAIL_BYTES, `${Buffer.byteLength(outcome.details)} bytes`);
    }
    const streamed = await bidi(named, bearer(TOKEN));
    assert.equal(streamed.code, status.OK);
    assert.equal(streamed.errors.length, 1);
    assert.ok(
      Buffer.byteLength(streamed.errors[0]!) <= MAX_DETAIL_BYTES,
      `${Buffer.byteLength(streamed.errors[0]!)} bytes`,
    );
    for (const path of ["/inference.GRPCInferenceService/NoSuchMethod", "/no.such.Service/Thing"]) {
      const code = await new Promise<number>((resolve) =>
        inference.makeUnaryRequest(
          path,
          (value: Buffer) => value,
          (value: Buffer) => value,
          Buffer.alloc(0),
          bearer(TOKEN),
          (error) => resolve(error?.code ?? status.OK),
        ),
      );
      assert.equal(code, status.UNIMPLEMENTED, path);
    }
    const text = await metricsText();
    assert.doesNotMatch(text, /no_such_model|NoSuchMethod|no\.such/);
  });
});

import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import {
  scriptedRequest,
  startScriptedUpstream,
  type Script,
  type ScriptedUpstream,
} from "../../dataplane/test/fixtures/scripted-upstream.js";
import type { ModelInferResponse } from "../../proto/gen/ts/grpc_service.js";
import { POD, until, useActivators, type TestActivator } from "./fixtures.js";

/**
 * The gRPC relay against a scripted KServe peer as the pod: what crosses it (metadata both
 * ways, trailers, the client's token and deadline), what is sent again (a pod that refused the
 * call unread) and what is not (a pod that died after its reply started).
 */
describe("activator: the gRPC relay's transparency and faults (scripted pod)", function () {
  this.timeout(30_000);
  const activators = useActivators();
  let upstream: ScriptedUpstream;
  before(async () => (upstream = await startScriptedUpstream()));
  after(() => upstream.close());

  const start = (holdTimeoutMs = 10_000): Promise<TestActivator> =>
    activators.start(undefined, { upstreamGrpcPort: upstream.port, holdTimeoutMs });
  const infer = (t: TestActivator, script: Script, metadata = new Metadata()) =>
    new Promise<{ reply?: ModelInferResponse; error?: ServiceError; headers?: Metadata; trailers?: Metadata }>(
      (resolve) => {
        const seen: { headers?: Metadata; trailers?: Metadata } = {};
        const call = t.client.modelInfer(
          scriptedRequest("scripted", script),
          metadata,
          { deadline: new Date(Date.now() + 20_000) },
          // grpc-js emits "status" (the trailers) after the callback: the result waits for both.
          (error, reply) => void ended.then(() => resolve(error === null ? { reply, ...seen } : { error, ...seen })),
        );
        call.on("metadata", (headers) => (seen.headers = headers));
        const ended = new Promise<void>((done) =>
          call.on("status", (end) => {
            seen.trailers = end.metadata;
            done();
          }),
        );
      },
    );

  it("passes custom metadata both ways, trailers, the client's token and what is left of its deadline", async () => {
    const t = await start();
    t.pods.set([POD]);
    const metadata = new Metadata();
    metadata.set("authorization", "Bearer for-the-pod");
    metadata.set("x-request-id", "r-1");
    const before = upstream.streams.length;
    const result = await infer(t, { metadata: { "x-from-pod": "hello" }, trailers: { "x-trailer": "bye" } }, metadata);
    assert.equal(result.error, undefined);
    assert.deepEqual(result.headers?.get("x-from-pod"), ["hello"]);
    assert.deepEqual(result.trailers?.get("x-trailer"), ["bye"]);
    const arrived = upstream.streams[before]!.headers;
    assert.equal(arrived["authorization"], "Bearer for-the-pod", "the pods check the same tokens");
    assert.equal(arrived["x-request-id"], "r-1");
    assert.match(String(arrived["grpc-timeout"]), /^\d+[mSMH]$/);
  });

  it("passes a pod's error status and message as they came", async () => {
    const t = await start();
    t.pods.set([POD]);
    const result = await infer(t, { status: status.INVALID_ARGUMENT, details: "bad input 100%", trailersOnly: true });
    assert.equal(result.error?.code, status.INVALID_ARGUMENT);
    assert.equal(result.error?.details, "bad input 100%");
  });

  it("sends a call the pod refused unread (REFUSED_STREAM) again, and answers UNAVAILABLE when the hold ends", async () => {
    const t = await start(1_000);
    const before = upstream.streams.length;
    const held = infer(t, { rst: 7 });
    await until(() => t.activator.holding.held === 1, "the call is held");
    t.pods.set([POD]);
    const result = await held;
    assert.equal(result.error?.code, status.UNAVAILABLE);
    assert.ok(upstream.streams.length - before >= 2, `sent ${upstream.streams.length - before} times`);
  });

  it("does not send a call again once the pod's reply started: the pod dying then is UNAVAILABLE, once", async () => {
    const t = await start();
    t.pods.set([POD]);
    const before = upstream.streams.length;
    const result = await infer(t, { hang: true, metadata: { "x-started": "1" }, dropConnectionAfterMs: 200 });
    assert.equal(result.error?.code, status.UNAVAILABLE);
    assert.equal(upstream.streams.length - before, 1, "never retried");
  });
});

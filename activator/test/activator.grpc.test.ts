import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { connect } from "node:http2";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scrape, valueOf } from "../../e2e/support/prometheus.js";
import { identityRequest } from "../../dataplane/test/fixtures/requests.js";
import { inferRequest, streamAll } from "../../dataplane/test/fixtures/server.js";
import { useServer } from "../../dataplane/test/fixtures/serving.js";
import { frameHeader } from "../../lib/grpc/frames.js";
import { ModelInferRequest, type ModelInferResponse } from "../../proto/gen/ts/grpc_service.js";
import type { IsActiveResponse } from "../../proto/gen/ts/keda/externalscaler.js";
import { POD, rawGrpcCall, until, useActivators, type TestActivator } from "./fixtures.js";

/**
 * The activator in front of a real data plane (the "pod"), its pod watch scripted: gRPC calls
 * that arrive while no pod is ready are held and succeed once one is; deadlines, bounds, tokens,
 * a refusing pod and a stop while holding; KEDA's external scaler as KEDA calls it.
 */
describe("activator: gRPC held until a pod is ready, then relayed", function () {
  this.timeout(60_000);
  const serving = useServer();
  const activators = useActivators();

  const withDeadline = (ms: number): { deadline: Date } => ({ deadline: new Date(Date.now() + ms) });
  const modelInfer = (t: TestActivator, request: ModelInferRequest, ms = 60_000, metadata = new Metadata()) =>
    new Promise<ModelInferResponse>((resolve, reject) =>
      t.client.modelInfer(request, metadata, withDeadline(ms), (error, reply) =>
        error === null ? resolve(reply) : reject(error),
      ),
    );
  const failure = async (promise: Promise<unknown>): Promise<ServiceError> => {
    try {
      await promise;
    } catch (error) {
      return error as ServiceError;
    }
    throw new Error("the call succeeded but should have failed");
  };

  it("holds a ModelInfer (60 s deadline) and a ModelStreamInfer stream while no pod is ready, tells KEDA at once, then relays both to the pod that turns ready", async () => {
    const t = await activators.start(serving.server);
    const pushed: boolean[] = [];
    const activity = t.scaler.streamIsActive({ name: "m", namespace: "ns", scalerMetadata: {} });
    activity.on("data", (reply: IsActiveResponse) => pushed.push(reply.result));
    activity.on("error", () => undefined);
    await until(() => pushed.length === 1, "StreamIsActive sends the current state");
    assert.deepEqual(pushed, [false]);

    const unary = modelInfer(t, identityRequest({ width: 4 }));
    const stream = streamAll(t.client, [
      inferRequest({
        modelName: "repeat_int32",
        inputs: [
          {
            name: "IN",
            datatype: "INT32",
            shape: [3n],
            parameters: {},
            contents: {
              intContents: [7, 8, 9],
              int64Contents: [],
              uintContents: [],
              uint64Contents: [],
              fp32Contents: [],
              fp64Contents: [],
              boolContents: [],
              bytesContents: [],
            },
          },
        ],
      }),
    ]);
    await until(() => t.activator.holding.held === 2, "both calls are held");
    await until(() => pushed.at(-1) === true, "KEDA hears that a request is held");
    assert.deepEqual(pushed, [false, true], "pushed once, the moment the first call was held");
    const metrics = await scrape(`http://127.0.0.1:${t.activator.metricsPort}/metrics`);
    assert.equal(valueOf(metrics, "dynamo_activator_held_requests"), 2);
    const active = await new Promise<boolean>((resolve, reject) =>
      t.scaler.isActive({ name: "m", namespace: "ns", scalerMetadata: {} }, (error, reply) =>
        error === null ? resolve(reply.result) : reject(error),
      ),
    );
    assert.equal(active, true);

    t.pods.set([POD]);
    const reply = await unary;
    assert.equal(reply.modelName, "identity_fp32");
    assert.equal(reply.outputs[0]?.name, "OUTPUT0");
    const replies = await stream;
    assert.deepEqual(
      replies.map((one) => one.errorMessage),
      ["", "", ""],
    );
    await until(() => pushed.at(-1) === false, "KEDA hears that nothing is held");
    activity.cancel();
    const after = await scrape(`http://127.0.0.1:${t.activator.metricsPort}/metrics`);
    assert.equal(valueOf(after, "dynamo_activator_held_requests"), 0);
    assert.equal(valueOf(after, "dynamo_activator_held_requests_total", { outcome: "relayed" }), 2);
    assert.equal(valueOf(after, "dynamo_activator_cold_start_seconds_count"), 1);
  });

  it("answers DEADLINE_EXCEEDED saying the model is scaled to zero when the hold timeout (or the call's deadline) ends first", async () => {
    const under = await activators.start(serving.server, { holdTimeoutMs: 300 });
    const held = await failure(modelInfer(under, identityRequest(), 60_000));
    assert.equal(held.code, status.DEADLINE_EXCEEDED);
    assert.match(held.details, /scaled to zero.*no pod became ready within 0\.3 s/);
    const counted = await scrape(`http://127.0.0.1:${under.activator.metricsPort}/metrics`);
    assert.equal(valueOf(counted, "dynamo_activator_held_requests_total", { outcome: "deadline" }), 1);
    const t = await activators.start(serving.server);
    // The client's own deadline: grpc-js may end the call first; either way DEADLINE_EXCEEDED, and the hold ends.
    const short = await failure(modelInfer(t, identityRequest(), 300));
    assert.equal(short.code, status.DEADLINE_EXCEEDED);
    await until(() => t.activator.holding.held === 0, "the held call is let go");
  });

  it("refuses calls past --max-held-requests with RESOURCE_EXHAUSTED; the held one still succeeds", async () => {
    const t = await activators.start(serving.server, { maxHeldRequests: 1 });
    const first = modelInfer(t, identityRequest());
    await until(() => t.activator.holding.held === 1, "one call is held");
    const second = await failure(modelInfer(t, identityRequest()));
    assert.equal(second.code, status.RESOURCE_EXHAUSTED);
    assert.match(second.details, /too many requests already wait/);
    t.pods.set([POD]);
    assert.equal((await first).modelName, "identity_fp32");
  });

  it("refuses a call without a valid token (UNAUTHENTICATED) before holding it, and follows the token file as it changes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "activator-tokens-"));
    const file = join(dir, "tokens");
    writeFileSync(file, "first\n");
    try {
      const t = await activators.start(serving.server, { authTokenFile: file });
      const bare = await failure(modelInfer(t, identityRequest()));
      assert.equal(bare.code, status.UNAUTHENTICATED);
      assert.match(bare.details, /missing credentials/);
      const wrong = new Metadata();
      wrong.set("authorization", "Bearer second");
      assert.equal((await failure(modelInfer(t, identityRequest(), 60_000, wrong))).code, status.UNAUTHENTICATED);
      assert.equal(t.activator.holding.held, 0, "nothing was held");
      writeFileSync(file, "second\n");
      await new Promise((resolve) => setTimeout(resolve, 500));
      const held = modelInfer(t, identityRequest(), 60_000, wrong);
      await until(() => t.activator.holding.held === 1, "the authenticated call is held");
      t.pods.set([POD]);
      assert.equal((await held).modelName, "identity_fp32");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("sends a call again to the next ready pod when the first refuses it unread (connection refused)", async () => {
    const t = await activators.start(serving.server);
    const held = modelInfer(t, identityRequest({ width: 16 }));
    await until(() => t.activator.holding.held === 1, "the call is held");
    // Nothing listens on 127.0.0.3: the pod "died" between Ready and the call.
    t.pods.set([{ name: "dead-0", ip: "127.0.0.3" }]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    t.pods.set([POD]);
    assert.equal((await held).outputs[0]?.name, "OUTPUT0");
  });

  it("answers UNAVAILABLE when the only ready pod keeps refusing until the hold ends", async () => {
    const under = await activators.start(serving.server, { holdTimeoutMs: 1_000 });
    under.pods.set([{ name: "dead-0", ip: "127.0.0.3" }]);
    const refused = await failure(modelInfer(under, identityRequest()));
    assert.equal(refused.code, status.UNAVAILABLE);
    assert.match(refused.details, /dead-0 refused/);
  });

  it("on stop, refuses new connections but keeps a held call until a pod is ready, then ends", async () => {
    const t = await activators.start(serving.server);
    const held = modelInfer(t, identityRequest());
    await until(() => t.activator.holding.held === 1, "the call is held");
    const stopped = t.activator.stop();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const refused = await new Promise<string | undefined>((resolve) => {
      const late = connect(`http://127.0.0.1:${t.activator.grpcPort}`);
      late.once("connect", () => resolve(undefined));
      late.once("error", (error: NodeJS.ErrnoException) => resolve(error.code));
    });
    assert.equal(refused, "ECONNREFUSED", "a new connection is refused once stopping");
    t.pods.set([POD]);
    assert.equal((await held).modelName, "identity_fp32");
    await stopped;
    t.client.close();
    t.scaler.close();
    activators.stopped();
  });

  it("sends GOAWAY to client connections once a pod is ready and nothing is held", async () => {
    const t = await activators.start(serving.server);
    const session = connect(`http://127.0.0.1:${t.activator.grpcPort}`);
    const goaway = new Promise<void>((resolve) => session.once("goaway", () => resolve()));
    session.on("error", () => undefined);
    const stream = rawGrpcCall(session, "/inference.GRPCInferenceService/ModelInfer");
    const body = Buffer.from(ModelInferRequest.encode(identityRequest()).finish());
    stream.end(Buffer.concat([frameHeader(body.length), body]));
    const trailers = new Promise<Record<string, unknown>>((resolve) => stream.once("trailers", resolve));
    stream.resume();
    await until(() => t.activator.holding.held === 1, "the call is held");
    t.pods.set([POD]);
    assert.equal((await trailers)["grpc-status"], "0");
    await goaway;
    session.close();
  });

  it("keeps serving another client's held call while a hostile client opens 10,000 streams and pushes a huge body", async () => {
    const t = await activators.start(serving.server, { maxHeldRequests: 200, maxConcurrentStreams: 100 });
    const hostile = connect(`http://127.0.0.1:${t.activator.grpcPort}`);
    hostile.on("error", () => undefined);
    const headers = {
      ":method": "POST",
      ":path": "/inference.GRPCInferenceService/ModelInfer",
      "content-type": "application/grpc",
    };
    const huge = hostile.request(headers);
    huge.on("error", () => undefined);
    // 64 MiB queued at once, back-pressure ignored: a chunk's write completes once it has left
    // the client, which HTTP/2 flow control allows only as far as the activator reads.
    let sent = 0;
    for (let i = 0; i < 64; i++) huge.write(Buffer.alloc(1024 * 1024), () => (sent += 1024 * 1024));
    for (let i = 0; i < 10_000; i++) {
      const stream = hostile.request(headers);
      stream.on("error", () => undefined);
    }
    const started = performance.now();
    const other = modelInfer(t, identityRequest());
    await until(() => t.activator.holding.held >= 2, "the other client's call is held too");
    await new Promise((resolve) => setTimeout(resolve, 300));
    const sentWhileHeld = sent;
    t.pods.set([POD]);
    assert.equal((await other).modelName, "identity_fp32");
    const latency = performance.now() - started;
    console.log(
      `      the other client's held call: ${latency.toFixed(0)} ms; the hostile body got ${sentWhileHeld / 1024 / 1024} MiB in of 64 MiB while held`,
    );
    assert.ok(
      sentWhileHeld < 16 * 1024 * 1024,
      `flow control held the hostile body back (${sentWhileHeld} bytes left the client)`,
    );
    hostile.destroy();
  });
});

describe("activator: KEDA's external scaler", function () {
  this.timeout(30_000);
  const activators = useActivators();

  it("gives one metric, the held requests, with the target from scalerMetadata.targetHeldRequests (default 1); refuses a bad target naming the key; StreamMetricSpec UNIMPLEMENTED", async () => {
    const t = await activators.start(undefined);
    const spec = (metadata: Record<string, string>) =>
      new Promise((resolve, reject) =>
        t.scaler.getMetricSpec({ name: "m", namespace: "ns", scalerMetadata: metadata }, (error, reply) =>
          error === null ? resolve(reply) : reject(error),
        ),
      );
    assert.deepEqual(await spec({}), {
      metricSpecs: [{ metricName: "held-requests", targetSize: 1n, targetSizeFloat: 1 }],
    });
    assert.deepEqual(await spec({ targetHeldRequests: "5" }), {
      metricSpecs: [{ metricName: "held-requests", targetSize: 5n, targetSizeFloat: 5 }],
    });
    const bad = await spec({ targetHeldRequests: "lots" }).catch((error: ServiceError) => error);
    assert.equal((bad as ServiceError).code, status.INVALID_ARGUMENT);
    assert.match((bad as ServiceError).details, /scalerMetadata\.targetHeldRequests/);
    const metrics = await new Promise((resolve, reject) =>
      t.scaler.getMetrics(
        { scaledObjectRef: { name: "m", namespace: "ns", scalerMetadata: {} }, metricName: "held-requests" },
        (error, reply) => (error === null ? resolve(reply) : reject(error)),
      ),
    );
    assert.deepEqual(metrics, {
      metricValues: [{ metricName: "held-requests", metricValue: 0n, metricValueFloat: 0 }],
    });
    const streamed = t.scaler.streamMetricSpec({ name: "m", namespace: "ns", scalerMetadata: {} });
    const error = await new Promise<ServiceError>((resolve) => streamed.on("error", resolve));
    assert.equal(error.code, status.UNIMPLEMENTED);
    assert.match(error.details, /GetMetricSpec/);
  });

  it("answers /readyz 200 only while the watch has synced and no pod is ready", async () => {
    const under = await activators.start(undefined);
    const readyz = async () => (await fetch(`http://127.0.0.1:${under.activator.metricsPort}/readyz`)).status;
    assert.equal(await readyz(), 200);
    under.pods.set([POD]);
    assert.equal(await readyz(), 503);
    under.pods.set([]);
    assert.equal(await readyz(), 200);
    assert.equal((await fetch(`http://127.0.0.1:${under.activator.metricsPort}/healthz`)).status, 200);
  });
});

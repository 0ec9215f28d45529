import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { connect as connectH2 } from "node:http2";
import { connect as connectTcp, type Socket } from "node:net";
import {
  scriptedRequest,
  startScriptedUpstream,
  type ScriptedUpstream,
} from "../../dataplane/test/fixtures/scripted-upstream.js";
import { ScaledObjectRef } from "../../proto/gen/ts/keda/externalscaler.js";
import { blackHole, POD, rawGrpcCall, until, useActivators, type TestActivator } from "./fixtures.js";

/**
 * Hostile clients and a hurried shutdown: connections that never become calls are not kept
 * forever, and a held request that a shutdown cannot wait for any longer is told why.
 */
describe("activator: hostile connections and a shutdown shorter than the hold", function () {
  this.timeout(30_000);
  const activators = useActivators();
  let upstream: ScriptedUpstream;
  before(async () => (upstream = await startScriptedUpstream()));
  after(() => upstream.close());

  const infer = (t: TestActivator) =>
    new Promise<ServiceError | null>((resolve) =>
      t.client.modelInfer(
        scriptedRequest("scripted", {}),
        new Metadata(),
        { deadline: new Date(Date.now() + 20_000) },
        (error) => resolve(error),
      ),
    );

  it("closes gRPC connections that open no stream (no preface, a preface alone, a session left idle), not one whose call is held", async () => {
    const t = await activators.start(undefined, { upstreamGrpcPort: upstream.port, idleSessionMs: 500 });
    const started = performance.now();
    const held = infer(t);
    await until(() => t.activator.holding.held === 1, "the other client's call is held");
    const opened = (preface: string): Socket => {
      const socket = connectTcp(t.activator.grpcPort, "127.0.0.1");
      socket.on("error", () => undefined);
      // Read what comes, or the socket never sees the activator's end.
      socket.resume();
      if (preface !== "") socket.write(preface);
      return socket;
    };
    const silent = Array.from({ length: 50 }, () => opened(""));
    const prefaceOnly = Array.from({ length: 50 }, () => opened("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    const idle = connectH2(`http://127.0.0.1:${t.activator.grpcPort}`);
    idle.on("error", () => undefined);
    const idleClosed = new Promise<void>((resolve) => idle.once("close", () => resolve()));
    const closed = (socket: Socket) =>
      socket.destroyed || socket.readyState === "closed"
        ? Promise.resolve()
        : new Promise((r) => socket.once("close", r));
    await Promise.all([...silent, ...prefaceOnly].map(closed));
    await idleClosed;
    assert.equal(t.activator.holding.held, 1, "the held call outlives the idle bound (it has a stream open)");
    t.pods.set([POD]);
    assert.equal(await held, null);
    console.log(
      `        the other client's held call: answered ${Math.round(performance.now() - started)} ms after it was sent`,
    );
  });

  it("refuses a call whose metadata exceeds --max-header-bytes (RESOURCE_EXHAUSTED, naming the bound) without holding it, even sent before SETTINGS are acknowledged", async () => {
    const t = await activators.start(undefined, { upstreamGrpcPort: upstream.port, maxHeaderBytes: 16 * 1024 });
    let held = 0;
    t.activator.holding.onHeld((count) => (held = Math.max(held, count)));
    // Sent at once, before the activator's SETTINGS (and so its advertised header bound) are acknowledged.
    const session = connectH2(`http://127.0.0.1:${t.activator.grpcPort}`);
    session.on("error", () => undefined);
    const stream = rawGrpcCall(
      session,
      "/inference.GRPCInferenceService/ModelInfer",
      { "x-big": "a".repeat(20_000) },
      { endStream: true },
    );
    const reply = await new Promise<Record<string, unknown>>((resolve, reject) => {
      stream.once("response", (headers) => resolve(headers));
      stream.once("close", () =>
        reject(new Error(`no reply (RST ${stream.rstCode}); held ${t.activator.holding.held}`)),
      );
    }).finally(() => session.destroy());
    assert.equal(reply["grpc-status"], String(status.RESOURCE_EXHAUSTED), String(reply["grpc-message"]));
    assert.match(String(reply["grpc-message"]), /16384 bytes.*--max-header-bytes/);
    assert.equal(held, 0, "never held, never woke KEDA");
  });

  it("sends a call on to the next ready pod when one black-holes connections (never accepts), within the connect bound", async () => {
    const t = await activators.start(undefined, { upstreamGrpcPort: upstream.port, upstreamConnectTimeoutMs: 500 });
    const removeHole = await blackHole("127.0.0.2", upstream.port);
    try {
      // Round-robin gives the first call the second pod: the black hole.
      t.pods.set([POD, { name: "black-hole-0", ip: "127.0.0.2" }]);
      const started = performance.now();
      assert.equal(await infer(t), null);
      console.log(`        relayed past the black-holed pod in ${Math.round(performance.now() - started)} ms`);
    } finally {
      removeHole();
    }
  });

  it("does not queue every activity change for a StreamIsActive client that does not read: it gets the latest state once it reads", async () => {
    const t = await activators.start(undefined, { upstreamGrpcPort: upstream.port });
    const ref = ScaledObjectRef.encode({ name: "m", namespace: "ns", scalerMetadata: {} }).finish();
    const message = Buffer.concat([Buffer.from([0, 0, 0, 0, ref.length]), ref]);
    const session = connectH2(`http://127.0.0.1:${t.activator.scalerPort}`, { settings: { initialWindowSize: 1024 } });
    session.on("error", () => undefined);
    const stream = rawGrpcCall(session, "/externalscaler.ExternalScaler/StreamIsActive");
    stream.end(message);
    await new Promise((resolve) => stream.once("response", resolve));
    stream.pause();
    // 2,000 holds that end at once (no pod): 4,000 changes of activity.
    for (let i = 0; i < 2_000; i++) await t.activator.holding.acquire(0, new AbortController().signal);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const received: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => received.push(chunk));
    stream.resume();
    await new Promise((resolve) => setTimeout(resolve, 500));
    session.destroy();
    const bytes = Buffer.concat(received);
    const messages = bytes.length / message.length;
    // Each IsActiveResponse is 5 bytes of framing and 2 (true) or 0 (false) of body.
    assert.ok(bytes.length < 2_000, `${bytes.length} bytes were queued for a client that did not read`);
    assert.deepEqual([...bytes.subarray(-5)], [0, 0, 0, 0, 0], `the last state pushed is inactive (${messages})`);
  });

  it("answers what is still held when the shutdown grace ends: UNAVAILABLE / 503 saying the activator is shutting down", async () => {
    const t = await activators.start(undefined, { upstreamGrpcPort: upstream.port, shutdownGraceMs: 300 });
    const grpcHeld = infer(t);
    const httpHeld = new Promise<{ status?: number; body: string; error?: string }>((resolve) => {
      const request = httpRequest({ host: "127.0.0.1", port: t.activator.httpPort, path: "/v2/health/ready" });
      request.once("response", (response) => {
        let body = "";
        response.on("data", (chunk: Buffer) => (body += chunk.toString()));
        response.once("end", () => resolve({ status: response.statusCode, body }));
      });
      request.once("error", (error) => resolve({ body: "", error: error.message }));
      request.end();
    });
    await until(() => t.activator.holding.held === 2, "both requests are held");
    await t.activator.stop();
    activators.stopped();
    t.client.close();
    t.scaler.close();
    const grpcError = await grpcHeld;
    assert.equal(grpcError?.code, status.UNAVAILABLE);
    assert.match(grpcError.details, /shutting down/);
    const http = await httpHeld;
    assert.equal(http.status, 503, http.error);
    assert.match(JSON.parse(http.body).error, /shutting down/);
  });
});

import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { createServer } from "node:http2";
import { createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { ModelInferRequest, ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { ForwardMetadataEntry } from "../../src/engines/engine.js";
import { frameHeader } from "../../../lib/grpc/frames.js";
import { H2Upstream, type UpstreamEnd } from "../../src/engines/kserve-grpc/h2-upstream.js";
import type { KserveGrpcEngine } from "../../src/engines/kserve-grpc/kserve-grpc.js";
import { eventually } from "../fixtures/server.js";
import {
  forwardingEngine,
  forwardThrough,
  scriptedRequest,
  startScriptedUpstream,
  type Script,
  type ScriptedUpstream,
} from "../fixtures/scripted-upstream.js";
import { freePort } from "../../../e2e/support/ports.js";

/**
 * The kserve-grpc engine's upstream transport (h2-upstream.ts) called through forward(),
 * the lean path's seam, against scripted grpc-js peers: what leaves for the upstream, what
 * comes back, how failures map, when a request is retried elsewhere, and recovery.
 */

/** A peer that answers every call with messages of the given bytes (one, or as many as given), status OK: replies no KServe server would send. */
async function startRawUpstream(
  reply: Uint8Array | readonly Uint8Array[],
): Promise<{ address: string; close(): Promise<void> }> {
  const replies = reply instanceof Uint8Array ? [reply] : reply;
  const server = createServer();
  server.on("stream", (stream) => {
    stream.on("data", () => undefined);
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(Buffer.concat(replies.flatMap((one) => [frameHeader(one.byteLength), one])));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const ask = (engine: KserveGrpcEngine, script: Script, options: Parameters<typeof forwardThrough>[2] = {}) =>
  forwardThrough(engine, scriptedRequest("m", script), options);

describe("kserve-grpc upstream transport: one upstream, scripted", function () {
  this.timeout(30_000);
  let upstream: ScriptedUpstream;
  let engine: KserveGrpcEngine;

  before(async () => {
    upstream = await startScriptedUpstream();
    engine = await forwardingEngine("m", { upstream: upstream.address });
  });
  after(async () => {
    await engine?.close();
    await upstream?.close();
  });

  it("sends the gRPC headers, the deadline as grpc-timeout, trace context and the client's metadata, never authorization or grpc-*", async () => {
    const deadline = Date.now() + 5000;
    const result = await ask(
      engine,
      {},
      {
        deadline,
        traceHeaders: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
        metadata: [
          ["x-tag", "one"],
          ["x-raw-bin", Uint8Array.of(1, 2, 3)],
          ["authorization", "Bearer client-secret"],
          ["grpc-timeout", "99H"],
          ["traceparent", "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01"],
        ],
      },
    );
    assert.equal(result.status.code, status.OK, result.status.details);
    const { headers } = upstream.streams.at(-1)!;
    assert.equal(headers[":path"], "/inference.GRPCInferenceService/ModelInfer");
    assert.equal(headers["te"], "trailers");
    assert.equal(headers["content-type"], "application/grpc");
    assert.equal(headers["grpc-accept-encoding"], "identity");
    assert.equal(headers["authorization"], undefined, "a client's token never goes upstream");
    assert.equal(headers["x-tag"], "one");
    assert.equal(headers["x-raw-bin"], Buffer.from([1, 2, 3]).toString("base64"));
    assert.equal(
      headers["traceparent"],
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      "the span's context wins",
    );
    const timeout = String(headers["grpc-timeout"]);
    assert.match(timeout, /^\d{1,8}m$/);
    assert.ok(Number(timeout.slice(0, -1)) <= 5000, timeout);
    const reply = ModelInferResponse.decode(result.messages[0]!);
    assert.equal(reply.modelName, "m");
    assert.deepEqual([...new Float32Array(Uint8Array.from(reply.rawOutputContents[0]!).buffer)], [1, 2, 3]);
  });

  it("passes back custom headers and trailers (-bin ones as bytes), the status, its message decoded and grpc-status-details-bin", async () => {
    const details = "bad input: 100% wrong\nline two, café ✓";
    const result = await ask(engine, {
      metadata: { "x-initial": "i", "x-initial-bin": Buffer.from([9, 8]).toString("base64") },
      trailers: { "x-trailer": "t", "x-trailer-bin": Buffer.from([7]).toString("base64") },
      status: status.INVALID_ARGUMENT,
      details,
      statusDetailsBin: Buffer.from([1, 2, 3, 4]).toString("base64"),
    });
    assert.deepEqual(result.metadata, [
      [
        ["x-initial", "i"],
        ["x-initial-bin", Buffer.from([9, 8])],
      ],
    ]);
    assert.equal(result.status.code, status.INVALID_ARGUMENT);
    assert.equal(result.status.details, details);
    assert.deepEqual(
      new Map(result.status.metadata.map(([name, value]) => [name, value])),
      new Map<string, string | Buffer>([
        ["x-trailer", "t"],
        ["x-trailer-bin", Buffer.from([7])],
        ["grpc-status-details-bin", Buffer.from([1, 2, 3, 4])],
      ]),
    );
    const ok = await ask(engine, { trailers: { "x-after": "ok" } });
    assert.equal(ok.status.code, status.OK);
    assert.deepEqual(ok.status.metadata, [["x-after", "ok"]]);
    assert.equal(ok.messages.length, 1);
  });

  it("passes a Trailers-Only error on as it came (no metadata, no message)", async () => {
    const result = await ask(engine, { status: status.NOT_FOUND, details: "no such model", trailersOnly: true });
    assert.deepEqual([result.status.code, result.status.details], [status.NOT_FOUND, "no such model"]);
    assert.equal(result.messages.length, 0);
  });

  it("maps an upstream's RST_STREAM by the spec's table", async () => {
    const table: [number, status][] = [
      [8, status.CANCELLED],
      [11, status.RESOURCE_EXHAUSTED],
      [12, status.PERMISSION_DENIED],
      [2, status.INTERNAL],
    ];
    for (const [code, expected] of table) {
      const result = await ask(engine, { rst: code });
      assert.equal(result.status.code, expected, `RST_STREAM ${code}: ${result.status.details}`);
    }
  });

  it("refuses a reply over --max-message-size from its length prefix, and resets the upstream stream", async () => {
    const small = await forwardingEngine("m", { upstream: upstream.address }, { maxMessageSize: 4096 });
    try {
      const before = upstream.clientResets().length;
      const result = await ask(small, { replyBytes: 100_000 });
      assert.equal(result.status.code, status.RESOURCE_EXHAUSTED);
      assert.match(result.status.details, /larger than max \(\d+ vs\. 4096\)/);
      await eventually(() => assert.deepEqual(upstream.clientResets().slice(before), [8]));
    } finally {
      await small.close();
    }
  });

  it("resets the upstream stream with CANCEL when the client gives up, and ends CANCELLED", async () => {
    const before = upstream.clientResets().length;
    const controller = new AbortController();
    const pending = ask(engine, { hang: true }, { signal: controller.signal });
    await eventually(() => assert.equal(upstream.streams.at(-1)?.closed, false));
    controller.abort();
    const result = await pending;
    assert.equal(result.status.code, status.CANCELLED);
    await eventually(() => assert.deepEqual(upstream.clientResets().slice(before), [8]));
  });

  it("renames the model only where the upstream's differs, requests and stream replies alike", async () => {
    const renamed = await forwardingEngine("local", { upstream: upstream.address, upstream_model: "m" });
    const decoupled = await forwardingEngine(
      "local",
      { upstream: upstream.address, upstream_model: "m" },
      { decoupled: true },
    );
    try {
      const unary = await forwardThrough(renamed, scriptedRequest("local", {}));
      assert.equal(upstream.requests.at(-1)!.modelName, "m", "the upstream sees its own name");
      assert.equal(ModelInferResponse.decode(unary.messages[0]!).modelName, "local", "the client sees ours");
      const streamed = await forwardThrough(
        decoupled,
        scriptedRequest("local", { streamReplies: [null, "oops", null] }),
        {
          stream: true,
        },
      );
      assert.equal(streamed.status.code, status.OK, streamed.status.details);
      const replies = streamed.messages.map((bytes) => ModelStreamInferResponse.decode(bytes));
      assert.deepEqual(
        replies.map((reply) => [reply.errorMessage, reply.inferResponse?.modelName]),
        [
          ["", "local"],
          ["oops", undefined],
          ["", "local"],
        ],
      );
      assert.equal(upstream.streams.at(-1)!.path, "/inference.GRPCInferenceService/ModelStreamInfer");
    } finally {
      await renamed.close();
      await decoupled.close();
    }
  });

  it("answers INTERNAL naming the upstream when a reply to rename is not a message (and keeps serving)", async () => {
    const raw = await startRawUpstream(Uint8Array.of(0x0a, 5, 0x61));
    const renamed = await forwardingEngine("local", { upstream: raw.address, upstream_model: "m" });
    try {
      const result = await forwardThrough(renamed, scriptedRequest("local"));
      assert.equal(result.status.code, status.INTERNAL);
      assert.match(result.status.details, new RegExp(`upstream ${raw.address}: malformed protobuf message`));
    } finally {
      await renamed.close();
      await raw.close();
    }
  });

  it("opens another connection when the upstream's limit on concurrent streams is reached", async () => {
    const limited = await startScriptedUpstream({ serverOptions: { "grpc.max_concurrent_streams": 2 } });
    const over = await forwardingEngine("m", { upstream: limited.address });
    try {
      // One first, so the peer's SETTINGS (its limit) are known before the burst.
      assert.equal((await ask(over, {})).status.code, status.OK);
      const results = await Promise.all(Array.from({ length: 6 }, () => ask(over, { delayMs: 200 })));
      assert.deepEqual(
        results.map((result) => result.status.code),
        results.map(() => status.OK),
      );
      assert.ok(limited.connections() >= 3, `${limited.connections()} connections for 6 calls at 2 streams each`);
    } finally {
      await over.close();
      await limited.close();
    }
  });

  it("keeps to a few connections when the upstream allows one stream each: the rest wait for a free stream, none fails", async () => {
    const single = await startScriptedUpstream({ serverOptions: { "grpc.max_concurrent_streams": 1 } });
    const engine = await forwardingEngine("m", { upstream: single.address });
    try {
      assert.equal((await ask(engine, {})).status.code, status.OK);
      const results = await Promise.all(Array.from({ length: 40 }, () => ask(engine, { delayMs: 50 })));
      assert.deepEqual(
        results.filter((result) => result.status.code !== status.OK).map((result) => result.status.details),
        [],
      );
      assert.ok(single.connections() <= 8, `${single.connections()} connections for 40 calls`);
    } finally {
      await engine.close();
      await single.close();
    }
  });

  it("forwards several 16 MiB requests at once, every byte intact", async () => {
    const unbounded = await startScriptedUpstream({
      serverOptions: { "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 },
    });
    const large = await forwardingEngine("m", { upstream: unbounded.address });
    try {
      const tensors = [0, 1, 2, 3].map((seed) =>
        Uint8Array.from({ length: 16 * 1024 * 1024 + 3 }, (_, i) => (i + seed) & 0xff),
      );
      const results = await Promise.all(
        tensors.map((tensor) =>
          forwardThrough(
            large,
            scriptedRequest(
              "m",
              {},
              {
                inputs: [
                  {
                    name: "INPUT0",
                    datatype: "UINT8",
                    shape: [BigInt(tensor.byteLength)],
                    parameters: {},
                    contents: undefined,
                  },
                ],
                rawInputContents: [tensor],
              },
            ),
          ),
        ),
      );
      results.forEach((result, i) => {
        assert.equal(result.status.code, status.OK, result.status.details);
        const reply = ModelInferResponse.decode(result.messages[0]!);
        assert.ok(Buffer.from(reply.rawOutputContents[0]!).equals(tensors[i]!), `request ${i} echoed intact`);
      });
    } finally {
      await large.close();
      await unbounded.close();
    }
  });

  it("answers a malformed sequence parameter with INVALID_ARGUMENT, sending nothing", async () => {
    const before = upstream.streams.length;
    const result = await forwardThrough(
      engine,
      scriptedRequest(
        "m",
        {},
        { parameters: { sequence_id: { parameterChoice: { $case: "boolParam", value: true } } } },
      ),
    );
    assert.equal(result.status.code, status.INVALID_ARGUMENT);
    assert.equal(upstream.streams.length, before);
  });
});

describe("kserve-grpc upstream transport: several upstreams, retry and recovery", function () {
  this.timeout(60_000);
  let first: ScriptedUpstream;
  let second: ScriptedUpstream;

  beforeEach(async () => {
    [first, second] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
  });
  afterEach(async () => {
    await Promise.all([first?.close(), second?.close()]);
  });

  const pair = (extra: Record<string, string> = {}, options: { decoupled?: boolean } = {}) =>
    forwardingEngine("m", { upstream: `${first.address},${second.address}`, ...extra }, options);

  /** How many inference calls reached `upstream` (answered or not). */
  const servedBy = (upstream: ScriptedUpstream) =>
    upstream.streams.filter((stream) => stream.path.endsWith("Infer")).length;

  it("retries on the other upstream when the first refuses before answering: GOAWAY below the stream, REFUSED_STREAM, Trailers-Only UNAVAILABLE", async () => {
    for (const script of [
      { goaway: "refuse" },
      { rst: 7 },
      { status: status.UNAVAILABLE, details: "draining", trailersOnly: true },
    ] satisfies Script[]) {
      const engine = await pair();
      try {
        // Round robin: the first request goes to the first upstream, which refuses it.
        const result = await ask(engine, { ...script, onPort: first.port });
        assert.equal(result.status.code, status.OK, `${JSON.stringify(script)}: ${result.status.details}`);
        assert.equal(second.requests.length, 1, JSON.stringify(script));
      } finally {
        await engine.close();
        second.requests.length = 0;
      }
    }
  });

  it("never retries once the upstream answered headers, nor a stream", async () => {
    const engine = await pair();
    const decoupled = await pair({}, { decoupled: true });
    try {
      const answered = await ask(engine, { status: status.UNAVAILABLE, details: "after headers" });
      assert.deepEqual([answered.status.code, answered.status.details], [status.UNAVAILABLE, "after headers"]);
      assert.equal(servedBy(first) + servedBy(second), 1, "one upstream saw it, once");
      const streamed = await ask(decoupled, { rst: 7 }, { stream: true });
      assert.equal(streamed.status.code, status.UNAVAILABLE);
      assert.equal(servedBy(first) + servedBy(second), 2, "the stream was not sent again");
    } finally {
      await engine.close();
      await decoupled.close();
    }
  });

  it("answers UNAVAILABLE naming the upstream, without a retry, when it dies after answering headers", async () => {
    const engine = await pair();
    try {
      const result = await ask(engine, {
        onPort: first.port,
        metadata: { "x-started": "yes" },
        hang: true,
        dropConnectionAfterMs: 100,
      });
      assert.deepEqual(result.metadata, [[["x-started", "yes"]]]);
      assert.equal(result.status.code, status.UNAVAILABLE);
      assert.match(result.status.details, new RegExp(`model 'm': upstream ${first.address} is unavailable`));
      assert.equal(servedBy(second), 0, "not sent again once the upstream had answered");
    } finally {
      await engine.close();
    }
  });

  it("keeps a sequence on its upstream, and never retries it elsewhere", async () => {
    const engine = await pair();
    try {
      const sequence = (script: Script, flags: Record<string, boolean> = {}) =>
        forwardThrough(
          engine,
          scriptedRequest("m", script, {
            parameters: {
              sequence_id: { parameterChoice: { $case: "int64Param", value: 42n } },
              ...Object.fromEntries(
                Object.entries(flags).map(([key, value]) => [key, { parameterChoice: { $case: "boolParam", value } }]),
              ),
            },
          }),
        );
      await sequence({}, { sequence_start: true });
      const holder = servedBy(first) === 1 ? first : second;
      for (let i = 0; i < 4; i++) assert.equal((await sequence({})).status.code, status.OK);
      assert.equal(servedBy(holder), 5, "every request of the sequence on one upstream");
      const refused = await sequence({ rst: 7 });
      assert.equal(refused.status.code, status.UNAVAILABLE, "a sequence's refused request is not moved");
      assert.equal(servedBy(first) + servedBy(second), 6);
    } finally {
      await engine.close();
    }
  });

  it("answers UNAVAILABLE naming the upstream when it is down, and uses it again once it is back", async () => {
    const port = await freePort();
    let restarted: ScriptedUpstream | undefined;
    const engine = await forwardingEngine("m", { upstream: `127.0.0.1:${port}` });
    try {
      const down = await ask(engine, {});
      assert.equal(down.status.code, status.UNAVAILABLE);
      assert.match(down.status.details, new RegExp(`model 'm': upstream 127\\.0\\.0\\.1:${port} is unavailable`));
      assert.equal(engine.ready(), false);
      restarted = await startScriptedUpstream({ port });
      await eventually(() => assert.equal(engine.ready(), true), 5000);
      assert.equal((await ask(engine, {})).status.code, status.OK);
    } finally {
      await engine.close();
      await restarted?.close();
    }
  });

  it("fails over when one upstream stops, and takes it back after it restarts on its port", async () => {
    const engine = await pair();
    try {
      for (let i = 0; i < 4; i++) assert.equal((await ask(engine, {})).status.code, status.OK);
      const port = first.port;
      await first.close();
      // The first call to the stopped one is retried on the other (connection refused before any answer).
      for (let i = 0; i < 6; i++) {
        const result = await ask(engine, {});
        assert.equal(result.status.code, status.OK, result.status.details);
      }
      first = await startScriptedUpstream({ port });
      await eventually(async () => {
        await ask(engine, {});
        assert.ok(servedBy(first) > 0, "the restarted upstream takes requests again");
      }, 5000);
    } finally {
      await engine.close();
    }
  });

  it("loses no request when an upstream sends GOAWAY under load (open streams finish, new ones go on a new connection)", async () => {
    const engine = await pair();
    try {
      const calls = Array.from({ length: 200 }, (_, i) => {
        if (i === 50) setImmediate(() => (first.goawayAll(), second.goawayAll()));
        return ask(engine, { delayMs: i % 7 });
      });
      const results = await Promise.all(calls);
      const failed = results.filter((result) => result.status.code !== status.OK);
      assert.deepEqual(
        failed.map((result) => result.status.details),
        [],
      );
      assert.ok(first.connections() + second.connections() >= 3, "a new connection after the GOAWAY");
    } finally {
      await engine.close();
    }
  });
});

describe("kserve-grpc: request bytes", () => {
  it("sends the client's bytes as they came when the names match (no copy)", async () => {
    const upstream = await startScriptedUpstream();
    const engine = await forwardingEngine("m", { upstream: upstream.address });
    try {
      const request = scriptedRequest("m", {}, { id: "keep-me" });
      await forwardThrough(engine, request);
      assert.deepEqual(
        Buffer.from(ModelInferRequest.encode(upstream.requests.at(-1)!).finish()),
        Buffer.from(ModelInferRequest.encode(request).finish()),
      );
    } finally {
      await engine.close();
      await upstream.close();
    }
  });
});

describe("kserve-grpc upstream transport: hostile peers", function () {
  this.timeout(30_000);

  /** Calls `upstream` once (no deadline: only the transport's own bounds end it) and gives how it ended. */
  const callOnce = (upstream: H2Upstream, metadata: readonly ForwardMetadataEntry[] = []) =>
    new Promise<UpstreamEnd>((resolve) =>
      upstream.call(
        { path: "/p", message: new Uint8Array(0), unary: true, deadline: Infinity, metadata, traceHeaders: {} },
        { metadata: () => undefined, message: () => undefined, end: resolve },
      ),
    );

  it("answers UNKNOWN naming the upstream when its trailers carry no grpc-status (or one that is not a number)", async () => {
    for (const trailers of [{ "x-other": "1" }, { "grpc-status": "fourteen" }]) {
      const peer = createServer();
      peer.on("stream", (stream) => {
        stream.on("data", () => undefined);
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers(trailers));
        stream.end();
      });
      await new Promise<void>((resolve) => peer.listen(0, "127.0.0.1", resolve));
      const address = `127.0.0.1:${(peer.address() as AddressInfo).port}`;
      const upstream = new H2Upstream({ address, maxMessageSize: 1024 });
      try {
        const end = await callOnce(upstream);
        assert.equal(end.code, status.UNKNOWN, JSON.stringify(trailers));
        assert.match(end.details, new RegExp(`upstream ${address} sent no valid grpc-status`));
      } finally {
        upstream.close();
        await new Promise<void>((resolve) => peer.close(() => resolve()));
      }
    }
  });

  it("holds a ModelInfer to one reply: a second, or none with OK, ends INTERNAL naming the upstream (a stream takes any number)", async () => {
    const reply = ModelInferResponse.encode({ ...ModelInferResponse.create(), modelName: "m" }).finish();
    const twice = await startRawUpstream([reply, reply]);
    const never = await startRawUpstream([]);
    const toTwice = await forwardingEngine("m", { upstream: twice.address });
    const toNever = await forwardingEngine("m", { upstream: never.address });
    try {
      const unary = await forwardThrough(toTwice, scriptedRequest("m"));
      assert.equal(unary.status.code, status.INTERNAL, unary.status.details);
      assert.match(unary.status.details, new RegExp(`upstream ${twice.address} sent more than one reply`));
      assert.ok(unary.messages.length <= 1);
      const stream = await forwardThrough(toTwice, scriptedRequest("m"), { stream: true });
      assert.equal(stream.status.code, status.OK, stream.status.details);
      assert.equal(stream.messages.length, 2);
      const none = await forwardThrough(toNever, scriptedRequest("m"));
      assert.equal(none.status.code, status.INTERNAL, none.status.details);
      assert.match(none.status.details, new RegExp(`upstream ${never.address} sent no reply`));
    } finally {
      await Promise.all([toTwice.close(), toNever.close()]);
      await Promise.all([twice.close(), never.close()]);
    }
  });

  it("refuses client metadata HTTP/2 cannot carry (a second value of a single-value header) as the client's fault: the upstream stays healthy", async () => {
    const upstream = await startScriptedUpstream();
    const engine = await forwardingEngine("m", { upstream: upstream.address });
    try {
      const result = await ask(
        engine,
        {},
        {
          metadata: [
            ["etag", "one"],
            ["etag", "two"],
          ],
        },
      );
      assert.equal(result.status.code, status.INVALID_ARGUMENT, result.status.details);
      assert.match(result.status.details, /etag/);
      assert.equal(engine.ready(), true, "one client's metadata took the upstream out");
      assert.equal((await ask(engine, {})).status.code, status.OK);
      // A header node takes from a client but will not send (HTTP/1's h2c upgrade): dropped as the hop header it is.
      const hop = await ask(engine, {}, { metadata: [["http2-settings", "AAMAAABkAAQAoAAAAAIAAAAA"]] });
      assert.equal(hop.status.code, status.OK, hop.status.details);
      assert.equal(upstream.streams.at(-1)!.headers["http2-settings"], undefined);
    } finally {
      await engine.close();
      await upstream.close();
    }
  });

  it("moves to a new connection before a session's stream ids run out, losing no call", async () => {
    const upstream = await startScriptedUpstream();
    // Five streams a session here; 10^9 by default (client stream ids stop at 2^31, ~2^30 streams).
    const h2 = new H2Upstream({ address: upstream.address, maxMessageSize: 1 << 20, streamsPerSession: 5 });
    const request = ModelInferRequest.encode(scriptedRequest("m")).finish();
    const callEcho = () =>
      new Promise<UpstreamEnd>((resolve) =>
        h2.call(
          {
            path: "/inference.GRPCInferenceService/ModelInfer",
            message: request,
            unary: true,
            deadline: Infinity,
            metadata: [],
            traceHeaders: {},
          },
          { metadata: () => undefined, message: () => undefined, end: resolve },
        ),
      );
    try {
      const ends = [];
      for (let i = 0; i < 4; i++) ends.push(...(await Promise.all([callEcho(), callEcho(), callEcho()])));
      assert.deepEqual(
        ends.filter((end) => end.code !== status.OK).map((end) => end.details),
        [],
      );
      assert.ok(upstream.connections() >= 3, `${upstream.connections()} connections for 12 calls at 5 streams each`);
    } finally {
      h2.close();
      await upstream.close();
    }
  });

  it("gives up on a peer that takes the connection but never sends its SETTINGS (UNAVAILABLE, refused: another may take it)", async () => {
    const sockets: Socket[] = [];
    const silent = createNetServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const upstream = new H2Upstream({
      address: `127.0.0.1:${(silent.address() as AddressInfo).port}`,
      maxMessageSize: 1024,
      connectTimeoutMs: 300,
    });
    try {
      const end = await callOnce(upstream);
      assert.equal(end.code, status.UNAVAILABLE, end.details);
      assert.ok(end.refused && end.transport, JSON.stringify(end));
    } finally {
      upstream.close();
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});

import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import type { OutgoingHttpHeaders } from "node:http2";
import {
  addMetadataHeaders,
  decodeGrpcMessage,
  FrameError,
  frameHeader,
  grpcTimeout,
  isForwardableHeader,
  MessageReader,
  metadataOf,
  statusOfHttp,
  statusOfReset,
  writeMessage,
} from "../../../lib/grpc/frames.js";

const framed = (...bodies: Uint8Array[]): Buffer =>
  Buffer.concat(bodies.flatMap((body) => [frameHeader(body.byteLength), Buffer.from(body)]));

const bytes = (length: number, seed: number): Uint8Array =>
  Uint8Array.from({ length }, (_, i) => (i * 7 + seed) & 0xff);

function readAll(chunks: readonly Uint8Array[], maxSize = 1 << 20): Uint8Array[] {
  const messages: Uint8Array[] = [];
  const reader = new MessageReader(maxSize, (message) => messages.push(Uint8Array.from(message)));
  for (const chunk of chunks) reader.push(chunk);
  assert.equal(reader.midMessage, false, "every message was finished");
  return messages;
}

describe("gRPC message framing (grpc-frames.ts)", () => {
  const bodies = [bytes(0, 0), bytes(1, 1), bytes(13, 2), bytes(300, 3)];
  const stream = framed(...bodies);

  it("reads the same messages however the bytes are cut into DATA chunks (every split point, in two and in three)", () => {
    for (let cut = 0; cut <= stream.length; cut++) {
      assert.deepEqual(readAll([stream.subarray(0, cut), stream.subarray(cut)]), bodies, `cut at ${cut}`);
    }
    for (let first = 0; first <= stream.length; first += 3) {
      for (let second = first; second <= stream.length; second += 5) {
        const chunks = [stream.subarray(0, first), stream.subarray(first, second), stream.subarray(second)];
        assert.deepEqual(readAll(chunks), bodies, `cuts at ${first}, ${second}`);
      }
    }
    assert.deepEqual(readAll([...stream].map((byte) => Uint8Array.of(byte))), bodies, "one byte at a time");
  });

  it("gives a message that lies inside one chunk as a view of that chunk (no copy)", () => {
    const chunk = framed(bytes(10, 9));
    let seen: Uint8Array | undefined;
    new MessageReader(100, (message) => (seen = message)).push(chunk);
    assert.equal(seen!.buffer, chunk.buffer);
    assert.equal(seen!.byteOffset, chunk.byteOffset + 5);
  });

  it("refuses a message over the bound from its length prefix alone, before any of its bytes is buffered", () => {
    const reader = new MessageReader(100, () => assert.fail("no message"));
    // Only the prefix arrives (split too): the size is known and refused with nothing held.
    reader.push(frameHeader(101).subarray(0, 2));
    assert.throws(
      () => reader.push(frameHeader(101).subarray(2)),
      (error: unknown) =>
        error instanceof FrameError &&
        error.code === status.RESOURCE_EXHAUSTED &&
        error.message === "Received message larger than max (101 vs. 100)",
    );
    assert.throws(() => new MessageReader(100, () => undefined).push(frameHeader(0xffffffff)), FrameError);
    assert.deepEqual(readAll([framed(bytes(100, 0))], 100), [bytes(100, 0)], "exactly at the bound is accepted");
  });

  it("refuses a compressed message (identity was asked for) and an unknown flag", () => {
    const compressed = framed(bytes(3, 0));
    compressed[0] = 1;
    assert.throws(() => new MessageReader(100, () => undefined).push(compressed), /compressed/);
    compressed[0] = 2;
    assert.throws(() => new MessageReader(100, () => undefined).push(compressed), /flag 2/);
  });

  it("knows when the stream stopped in the middle of a message", () => {
    const reader = new MessageReader(100, () => undefined);
    reader.push(framed(bytes(10, 0)).subarray(0, 8));
    assert.equal(reader.midMessage, true);
    const inHeader = new MessageReader(100, () => undefined);
    inHeader.push(Uint8Array.of(0, 0));
    assert.equal(inHeader.midMessage, true);
  });

  it("writes prefix and body corked together, the body as it is", () => {
    const written: Uint8Array[] = [];
    const calls: string[] = [];
    const body = bytes(7, 5);
    writeMessage(
      {
        cork: () => calls.push("cork"),
        uncork: () => calls.push("uncork"),
        write: (chunk) => (calls.push("write"), written.push(chunk), true),
      },
      body,
    );
    assert.deepEqual(calls, ["cork", "write", "write", "uncork"]);
    assert.deepEqual([...written[0]!], [0, 0, 0, 0, 7]);
    assert.equal(written[1], body, "the body itself, not a copy");
  });
});

describe("grpc-timeout", () => {
  it("sends whole milliseconds rounded up, never 0, at most 8 digits, then coarser units rounded up", () => {
    assert.equal(grpcTimeout(0.2), "1m");
    assert.equal(grpcTimeout(0), "1m");
    assert.equal(grpcTimeout(-5), "1m", "a deadline already passed still sends a valid value");
    assert.equal(grpcTimeout(1), "1m");
    assert.equal(grpcTimeout(1.001), "2m");
    assert.equal(grpcTimeout(99_999_999), "99999999m");
    assert.equal(grpcTimeout(99_999_999.5), "100000S");
    assert.equal(grpcTimeout(100_000_000), "100000S");
    assert.equal(grpcTimeout(100_000_001), "100001S");
    assert.equal(grpcTimeout(99_999_999_000), "99999999S");
    assert.equal(grpcTimeout(99_999_999_001), "1666667M");
    assert.equal(grpcTimeout(1e13), "2777778H");
    assert.equal(grpcTimeout(1e30), "99999999H");
  });
});

describe("grpc-message decoding", () => {
  it("percent-decodes UTF-8 and keeps a % that is not followed by two hex digits", () => {
    assert.equal(decodeGrpcMessage("plain text"), "plain text");
    assert.equal(decodeGrpcMessage("100%25 sure%0Aline"), "100% sure\nline");
    assert.equal(decodeGrpcMessage("caf%C3%A9 %E2%9C%93"), "café ✓");
    assert.equal(decodeGrpcMessage("50% off, %zz, %4"), "50% off, %zz, %4");
    assert.equal(decodeGrpcMessage("%"), "%");
    assert.equal(decodeGrpcMessage("%e2%9c%93"), "✓", "lowercase hex too");
  });
});

describe("status tables (PROTOCOL-HTTP2.md, HTTP to gRPC status mapping)", () => {
  it("maps an HTTP/2 reset to its gRPC status", () => {
    const table: [number, status][] = [
      [0, status.INTERNAL],
      [1, status.INTERNAL],
      [2, status.INTERNAL],
      [3, status.INTERNAL],
      [4, status.INTERNAL],
      [6, status.INTERNAL],
      [7, status.UNAVAILABLE],
      [8, status.CANCELLED],
      [9, status.INTERNAL],
      [10, status.INTERNAL],
      [11, status.RESOURCE_EXHAUSTED],
      [12, status.PERMISSION_DENIED],
      [13, status.INTERNAL],
    ];
    for (const [code, expected] of table) assert.equal(statusOfReset(code), expected, `RST_STREAM ${code}`);
  });

  it("maps an HTTP status to its gRPC status", () => {
    const table: [number, status][] = [
      [400, status.INTERNAL],
      [401, status.UNAUTHENTICATED],
      [403, status.PERMISSION_DENIED],
      [404, status.UNIMPLEMENTED],
      [429, status.UNAVAILABLE],
      [502, status.UNAVAILABLE],
      [503, status.UNAVAILABLE],
      [504, status.UNAVAILABLE],
      [500, status.UNKNOWN],
      [302, status.UNKNOWN],
      [200, status.UNKNOWN],
    ];
    for (const [code, expected] of table) assert.equal(statusOfHttp(code), expected, `HTTP ${code}`);
  });
});

describe("headers that cross a forwarding hop", () => {
  it("never forwards authorization, connection headers, pseudo-headers or gRPC's own", () => {
    for (const name of [
      "authorization",
      "proxy-authorization",
      "connection",
      "keep-alive",
      "proxy-connection",
      "transfer-encoding",
      "upgrade",
      "http2-settings",
      "host",
      "te",
      "content-type",
      "content-length",
      "content-encoding",
      "user-agent",
      ":path",
      ":authority",
      ":status",
      "grpc-timeout",
      "grpc-encoding",
      "grpc-accept-encoding",
      "grpc-status",
      "grpc-message",
      "grpc-previous-rpc-attempts",
    ]) {
      assert.equal(isForwardableHeader(name), false, name);
    }
    for (const name of [
      "x-request-tag",
      "traceparent",
      "tracestate",
      "grpc-trace-bin",
      "grpc-status-details-bin",
      "a-bin",
    ]) {
      assert.equal(isForwardableHeader(name), true, name);
    }
  });

  it("reads metadata from a header block (-bin values decoded, each of several) and writes it back", () => {
    const entries = metadataOf({
      ":status": "200",
      "content-type": "application/grpc",
      "x-text": "one",
      "x-many": ["a", "b"],
      "x-raw-bin": `${Buffer.from([1, 2]).toString("base64")}, ${Buffer.from([3]).toString("base64")}`,
      authorization: "Bearer secret",
    });
    assert.deepEqual(entries, [
      ["x-text", "one"],
      ["x-many", "a"],
      ["x-many", "b"],
      ["x-raw-bin", Buffer.from([1, 2])],
      ["x-raw-bin", Buffer.from([3])],
    ]);
    const headers: OutgoingHttpHeaders = {};
    addMetadataHeaders(headers, [...entries, ["authorization", "Bearer secret"], ["grpc-timeout", "1S"]]);
    assert.deepEqual(headers, { "x-text": "one", "x-many": ["a", "b"], "x-raw-bin": ["AQI=", "Aw=="] });
  });

  it("judges a name in any case as HTTP/2 sends it (lowercased): Authorization, Host, Grpc-Timeout never go, X-Tag goes as x-tag", () => {
    const headers: OutgoingHttpHeaders = { "grpc-timeout": "5S" };
    addMetadataHeaders(headers, [
      ["Authorization", "Bearer secret"],
      ["Host", "elsewhere.example"],
      ["Grpc-Timeout", "99H"],
      [":Authority", "elsewhere.example"],
      ["TE", "trailers"],
      ["X-Tag", "one"],
      ["x-tag", "two"],
    ]);
    assert.deepEqual(headers, { "grpc-timeout": "5S", "x-tag": ["one", "two"] });
  });
});

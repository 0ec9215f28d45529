import assert from "node:assert/strict";
import { frameHeader, MessageReader } from "../../../lib/grpc/frames.js";

/**
 * What the upstream reader allocates ahead of the bytes (grpc-frames.ts, MessageReader): a
 * hostile or broken upstream announces replies of --max-message-size on every call in flight
 * and sends a few bytes of each. Allocated at the prefix, each would reserve 64 MiB that V8
 * counts as in use (and collects after) for the few bytes sent.
 */

const MIB = 1024 * 1024;
const MAX_MESSAGE_BYTES = 64 * MIB;

describe("gRPC message framing: memory ahead of the bytes (grpc-frames.ts)", () => {
  it("a reply that stalls holds about what has arrived of it, not what its prefix announces", () => {
    const calls = 100;
    const sent = 100;
    const before = process.memoryUsage().arrayBuffers;
    const readers = Array.from({ length: calls }, () => {
      const reader = new MessageReader(MAX_MESSAGE_BYTES, () => assert.fail("no message is whole"));
      reader.push(Buffer.concat([frameHeader(MAX_MESSAGE_BYTES), Buffer.alloc(sent, 1)]));
      return reader;
    });
    const grown = process.memoryUsage().arrayBuffers - before;
    assert.ok(readers.every((reader) => reader.midMessage));
    assert.ok(grown < 4 * MIB, `${calls} replies of ${sent} bytes each grew ArrayBuffers by ${grown} bytes`);
  });

  it("a reply in pieces is allocated once half of it has come (never more ahead than has come), and is whole", () => {
    const body = Buffer.from(Uint8Array.from({ length: 8 * MIB }, (_, i) => (i * 31) & 0xff));
    const stream = Buffer.concat([frameHeader(body.length), body]);
    const pieces: Buffer[] = [];
    for (let start = 0; start < stream.length; start += MIB / 4)
      pieces.push(Buffer.from(stream.subarray(start, start + MIB / 4)));
    const messages: Uint8Array[] = [];
    const reader = new MessageReader(MAX_MESSAGE_BYTES, (message) => messages.push(message));
    const before = process.memoryUsage().arrayBuffers;
    let arrived = 0;
    for (const piece of pieces) {
      reader.push(piece);
      arrived += piece.length;
      // The pieces were allocated beforehand: what grows is the reader's.
      const allocated = process.memoryUsage().arrayBuffers - before;
      assert.ok(allocated <= 2 * arrived, `after ${arrived} bytes, ${allocated} allocated`);
    }
    assert.equal(messages.length, 1);
    assert.ok(Buffer.from(messages[0]!).equals(body));
  });
});

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { connect as http2Connect, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { ModelInferRequest, ModelInferResponse, ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { DEFAULT_MAX_MESSAGE_SIZE } from "../../../lib/contract/dataplane.js";
import { IDENTITY_ALL_TYPES } from "../fixtures/repository.js";
import { infer, inferRequest, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

/**
 * Requests as they arrive in pieces (patches/@grpc+grpc-js+1.14.7.patch, the StreamDecoder
 * part): the patched grpc-js allocates a message once half of it has arrived and copies each
 * later DATA chunk into it; a message inside one chunk is a view of that chunk.
 * A raw HTTP/2 client chooses the DATA frames (each write waits for the one before it to
 * leave, so each is a frame of its own): frame headers across chunks, a message inside one
 * chunk, several messages in one chunk; every reply must be the request's bytes.
 */

const FRAME_HEADER_BYTES = 5;
const MIB = 1024 * 1024;

/** grpc-js's decoder of length-prefixed messages, as the server uses it (not a public export). */
interface StreamDecoder {
  write(chunk: Buffer): Buffer[];
}
const { StreamDecoder } = createRequire(import.meta.url)("@grpc/grpc-js/build/src/stream-decoder.js") as {
  StreamDecoder: new (maxMessageBytes: number) => StreamDecoder;
};

/** Bytes that differ from call to call and from offset to offset (a mix-up shows). */
function distinctBytes(length: number, seed: number): Buffer {
  const bytes = Buffer.allocUnsafe(length);
  let state = (seed * 2654435761) >>> 0 || 1;
  for (let offset = 0; offset < length; offset += 4) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    bytes.writeUInt32LE(state, offset);
  }
  return bytes;
}

/** A message as gRPC frames it: compression flag 0, its length (big-endian), its bytes. */
function framed(message: Uint8Array): Buffer {
  const header = Buffer.alloc(FRAME_HEADER_BYTES);
  header.writeUInt32BE(message.byteLength, 1);
  return Buffer.concat([header, message]);
}

/** Cuts `bytes` at the given offsets (ascending), the rest in pieces of `rest` bytes. */
function cutAt(bytes: Buffer, offsets: readonly number[], rest: number): Buffer[] {
  const pieces: Buffer[] = [];
  let start = 0;
  for (const offset of offsets) {
    pieces.push(bytes.subarray(start, offset));
    start = offset;
  }
  for (; start < bytes.length; start += rest) pieces.push(bytes.subarray(start, Math.min(bytes.length, start + rest)));
  return pieces;
}

/** An identity_all request whose UINT8 input is `payload`. */
function identityRequest(payload: Buffer, id = ""): ModelInferRequest {
  return inferRequest({
    modelName: "identity_all",
    id,
    inputs: [
      { name: "IN_UINT8", datatype: "UINT8", shape: [BigInt(payload.length)], parameters: {}, contents: undefined },
    ],
    rawInputContents: [payload],
  });
}
const encodedRequest = (payload: Buffer, id = ""): Buffer =>
  Buffer.from(ModelInferRequest.encode(identityRequest(payload, id)).finish());

interface RawReply {
  readonly status: number | undefined;
  readonly details: string;
  /** The reply's messages, unframed. */
  readonly messages: Buffer[];
}

/** The messages of a reply's DATA, unframed. */
function unframe(data: Buffer): Buffer[] {
  const messages: Buffer[] = [];
  for (let offset = 0; offset < data.length;) {
    const length = data.readUInt32BE(offset + 1);
    messages.push(data.subarray(offset + FRAME_HEADER_BYTES, offset + FRAME_HEADER_BYTES + length));
    offset += FRAME_HEADER_BYTES + length;
  }
  return messages;
}

/**
 * Calls `method` on a bare HTTP/2 session, writing `chunks` one DATA frame each (a chunk
 * larger than a frame leaves in frames of the peer's size), then half-closes unless
 * `halfClose` is false; resolves with the status and the reply's messages.
 */
async function rawCall(
  session: ClientHttp2Session,
  method: string,
  chunks: readonly Buffer[],
  halfClose = true,
): Promise<RawReply> {
  const stream: ClientHttp2Stream = session.request({
    ":method": "POST",
    ":path": `/inference.GRPCInferenceService/${method}`,
    "content-type": "application/grpc",
    te: "trailers",
  });
  const received: Buffer[] = [];
  const ended = new Promise<RawReply>((resolve, reject) => {
    let status: number | undefined;
    let details = "";
    const statusFrom = (headers: Record<string, unknown>) => {
      if (headers["grpc-status"] === undefined) return;
      status = Number(headers["grpc-status"]);
      details = decodeURIComponent(String(headers["grpc-message"] ?? ""));
      // A call ended by the server before the client half-closed: nothing more to say.
      if (!halfClose) stream.close();
    };
    stream.on("response", statusFrom);
    stream.on("trailers", statusFrom);
    stream.on("data", (chunk: Buffer) => received.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => resolve({ status, details, messages: unframe(Buffer.concat(received)) }));
  });
  for (const chunk of chunks) {
    if (stream.closed) break;
    await new Promise<void>((resolve) => stream.write(chunk, () => resolve()));
  }
  if (halfClose) stream.end();
  return ended;
}

async function connected(server: ServerProcess): Promise<ClientHttp2Session> {
  const session = http2Connect(`http://127.0.0.1:${server.grpcPort}`);
  await new Promise<void>((resolve, reject) => {
    session.once("connect", () => resolve());
    session.once("error", reject);
  });
  return session;
}

/** The UINT8 output of an identity_all reply. */
function echoed(reply: Buffer): Buffer {
  const response = ModelInferResponse.decode(reply);
  assert.deepEqual(
    response.outputs.map((output) => output.name),
    ["OUT_UINT8"],
  );
  return Buffer.from(response.rawOutputContents[0]!);
}

describe("large requests (the patched grpc-js StreamDecoder)", () => {
  describe("the decoder", () => {
    it("a message inside one chunk is a view of that chunk, not a copy", () => {
      const chunk = Buffer.concat([framed(Buffer.from("first")), framed(Buffer.from("second"))]);
      const messages = new StreamDecoder(-1).write(chunk);
      assert.deepEqual(
        messages.map((message) => message.subarray(FRAME_HEADER_BYTES).toString()),
        ["first", "second"],
      );
      // A view sees the chunk change; a copy would not.
      chunk.write("FIRST", FRAME_HEADER_BYTES);
      chunk.write("SECOND", 2 * FRAME_HEADER_BYTES + "first".length);
      assert.deepEqual(
        messages.map((message) => message.subarray(FRAME_HEADER_BYTES).toString()),
        ["FIRST", "SECOND"],
      );
    });

    it("a message in pieces is one buffer of its own, whatever the cuts", () => {
      const message = framed(distinctBytes(70_000, 1));
      for (const offsets of [[1], [3, 4], [5], [6, 65_536], [69_000]]) {
        const decoder = new StreamDecoder(-1);
        const pieces = cutAt(message, offsets, 16_381);
        const out = pieces.flatMap((piece) => decoder.write(Buffer.from(piece)));
        assert.equal(out.length, 1, `cut at ${offsets.join(", ")}`);
        assert.ok(out[0]!.equals(message), `cut at ${offsets.join(", ")}`);
      }
    });

    it("a message that stalls holds about what has arrived of it, not what its header announces", () => {
      // A hostile client opens calls that each announce --max-message-size and send a few
      // bytes. Allocated at the header, each would reserve 64 MiB that V8 counts (and collects
      // as if in use) for 105 bytes sent: 100 calls, 6.4 GB for 10 KiB.
      const calls = 100;
      const sent = 100;
      const before = process.memoryUsage().arrayBuffers;
      const decoders = Array.from({ length: calls }, () => {
        const decoder = new StreamDecoder(DEFAULT_MAX_MESSAGE_SIZE);
        const start = Buffer.alloc(FRAME_HEADER_BYTES + sent);
        start.writeUInt32BE(DEFAULT_MAX_MESSAGE_SIZE, 1);
        assert.deepEqual(decoder.write(start), []);
        return decoder;
      });
      const grown = process.memoryUsage().arrayBuffers - before;
      assert.equal(decoders.length, calls);
      assert.ok(grown < 4 * MIB, `${calls} calls of ${sent} bytes each grew ArrayBuffers by ${grown} bytes`);
    });

    it("a message in pieces is allocated once half of it has come, never before", () => {
      const message = framed(distinctBytes(8 * MIB, 2));
      const decoder = new StreamDecoder(-1);
      const pieces = cutAt(message, [], MIB / 4).map((piece) => Buffer.from(piece));
      const before = process.memoryUsage().arrayBuffers;
      const out: Buffer[] = [];
      let arrived = 0;
      for (const piece of pieces) {
        out.push(...decoder.write(piece));
        arrived += piece.length;
        // The pieces were allocated beforehand: what grows is the decoder's, the message
        // once half of it is in (twice what has come at most), nothing before.
        const allocated = process.memoryUsage().arrayBuffers - before;
        assert.ok(allocated <= 2 * arrived, `after ${arrived} bytes, ${allocated} allocated`);
        if (2 * arrived < message.length) assert.ok(allocated < 64 * 1024, `${allocated} allocated before half`);
      }
      assert.equal(out.length, 1);
      assert.ok(out[0]!.equals(message));
    });

    it("a length over the limit is refused once the header is whole, and stays refused", () => {
      const decoder = new StreamDecoder(1000);
      assert.deepEqual(decoder.write(Buffer.from([0, 0, 0])), [], "the length is not whole yet");
      assert.throws(() => decoder.write(Buffer.from([0x03, 0xe9])), /larger than max \(1001 vs 1000\)/);
      assert.throws(() => decoder.write(Buffer.alloc(10)), /larger than max \(1001 vs 1000\)/);
    });
  });

  describe("through the data plane, DATA frames chosen by a raw HTTP/2 client", function () {
    this.timeout(120_000);
    const serving = useServer({ identity_all: IDENTITY_ALL_TYPES });
    let server: ServerProcess;
    let session: ClientHttp2Session;
    before(async () => {
      ({ server } = serving);
      session = await connected(server);
    });
    after(() => session?.destroy());

    /** ModelInfer of `payload` written as `cut` decides; asserts the echo. */
    async function echoesIntact(payload: Buffer, cut: (message: Buffer) => Buffer[]): Promise<void> {
      const reply = await rawCall(session, "ModelInfer", cut(framed(encodedRequest(payload))));
      assert.equal(reply.status, 0, reply.details);
      assert.equal(reply.messages.length, 1);
      assert.ok(echoed(reply.messages[0]!).equals(payload), "the reply's tensor is the request's");
    }

    it("1 MiB: the frame header cut after each of its bytes, then odd pieces", async () => {
      for (let cut = 1; cut <= FRAME_HEADER_BYTES; cut++) {
        await echoesIntact(distinctBytes(MIB, cut), (message) => cutAt(message, [cut], 9973));
      }
    });

    it("1 MiB: one byte at a time around the header, a header with the first bytes of the message", async () => {
      await echoesIntact(distinctBytes(MIB, 10), (message) => cutAt(message, [1, 2, 3, 4, 5, 6, 7, 16], 16_384));
      await echoesIntact(distinctBytes(MIB, 11), (message) => cutAt(message, [FRAME_HEADER_BYTES + 1], 16_383));
    });

    it("16 MiB: the header across two chunks, the rest as the client frames it", async () => {
      await echoesIntact(distinctBytes(16 * MIB, 12), (message) => cutAt(message, [2, 1000], 4 * MIB));
    });

    it("a small message inside one chunk, the chunk ending with it", async () => {
      await echoesIntact(distinctBytes(1000, 13), (message) => [message]);
    });

    it("ModelStreamInfer: several messages in one chunk, one cut across chunks, a large one after", async () => {
      const payloads = [100, 2000, 300, 5000, MIB].map((size, index) => distinctBytes(size, 20 + index));
      const messages = payloads.map((payload, index) => framed(encodedRequest(payload, `r${index}`)));
      const together = Buffer.concat(messages.slice(0, 3));
      const [fourth, large] = [messages[3]!, messages[4]!];
      const chunks = [
        Buffer.concat([together, fourth.subarray(0, 3)]),
        fourth.subarray(3, 1000),
        Buffer.concat([fourth.subarray(1000), large.subarray(0, 2)]),
        large.subarray(2),
      ];
      const reply = await rawCall(session, "ModelStreamInfer", chunks);
      assert.equal(reply.status, 0, reply.details);
      const byId = new Map(
        reply.messages.map((message) => {
          const response = ModelStreamInferResponse.decode(message);
          assert.equal(response.errorMessage, "");
          return [response.inferResponse!.id, Buffer.from(response.inferResponse!.rawOutputContents[0]!)];
        }),
      );
      assert.equal(byId.size, payloads.length);
      payloads.forEach((payload, index) => assert.ok(byId.get(`r${index}`)?.equals(payload), `reply r${index}`));
    });

    it("a length prefix over --max-message-size is refused from the header alone (nothing else is sent)", async () => {
      const header = Buffer.alloc(FRAME_HEADER_BYTES);
      header.writeUInt32BE(DEFAULT_MAX_MESSAGE_SIZE + 1, 1);
      // The stream stays open and no byte of the message comes: a server that buffered before
      // checking the length would wait here until the test's timeout.
      const reply = await rawCall(session, "ModelInfer", [header], false);
      assert.equal(reply.status, 8, "RESOURCE_EXHAUSTED");
      assert.match(reply.details, new RegExp(`larger than max \\(${DEFAULT_MAX_MESSAGE_SIZE + 1} vs`));
    });

    it("1,000 calls of 1 MiB with distinct contents, 8 at a time: every reply is its own request's", async function () {
      this.timeout(300_000);
      const calls = 1000;
      const concurrency = 8;
      let next = 0;
      const mismatched: number[] = [];
      const worker = async () => {
        for (let index = next++; index < calls; index = next++) {
          const payload = distinctBytes(MIB, 1000 + index);
          const reply = await infer(server.client, identityRequest(payload, `c${index}`));
          const output = Buffer.from(reply.rawOutputContents[0]!);
          if (reply.id !== `c${index}` || !output.equals(payload)) mismatched.push(index);
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      assert.deepEqual(mismatched, []);
    });
  });
});

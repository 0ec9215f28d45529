import {
  Client,
  credentials,
  Server,
  ServerCredentials,
  status,
  type ServerUnaryCall,
  type ServerWritableStream,
  type sendUnaryData,
  type ServiceError,
} from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { IDENTITY_ALL_TYPES } from "../fixtures/repository.js";
import { call, infer, inferRequest, streamAll, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

/**
 * Replies written by scatter-gather (patches/@grpc+grpc-js+1.14.7.patch): the patched
 * grpc-js server takes a message as an array of parts and writes them behind one frame
 * header, uncopied. Checked on a bare grpc-js server (what the patch promises) and through
 * the data plane, whose large output tensors go out as views (reply-encoding.ts).
 */

const asIs = (bytes: Buffer): Buffer => bytes;
/** A serializer returning parts, as the data plane's do (grpc-js types it as one Buffer). */
const inParts = (parts: Buffer[]): Buffer => parts as unknown as Buffer;

const method = (name: string, responseStream: boolean) => ({
  path: `/test.Parts/${name}`,
  requestStream: false,
  responseStream,
  requestSerialize: asIs,
  requestDeserialize: asIs,
  responseSerialize: asIs,
  responseDeserialize: asIs,
});

/** Parts of every kind: empty, a few bytes, a megabyte, views into one shared buffer. */
function partsOf(seed: number): Buffer[] {
  const shared = randomBytes(256 * 1024);
  return [
    Buffer.of(seed),
    Buffer.alloc(0),
    randomBytes(1024 * 1024),
    shared.subarray(10, 100_000),
    Buffer.from("tail"),
    shared.subarray(200_000),
  ];
}

const SEND_LIMIT = 4 * 1024 * 1024;

describe("replies in parts (the patched grpc-js server)", () => {
  let server: Server;
  let client: Client;
  const unaryParts = partsOf(1);
  const streamedParts = [partsOf(2), partsOf(3), partsOf(4)];
  // Over the server's send limit in all, each of its parts under it.
  const oversized = [randomBytes(3 * 1024 * 1024), randomBytes(3 * 1024 * 1024)];

  before(async () => {
    server = new Server({ "grpc.max_send_message_length": SEND_LIMIT });
    server.addService(
      { unary: method("Unary", false), oversized: method("Oversized", false), streamed: method("Streamed", true) },
      {
        unary: (_call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => done(null, inParts(unaryParts)),
        oversized: (_call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) =>
          done(null, inParts(oversized)),
        streamed: (call: ServerWritableStream<Buffer, Buffer>) => {
          for (const parts of streamedParts) call.write(inParts(parts));
          call.end();
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    client = new Client(`127.0.0.1:${port}`, credentials.createInsecure(), {
      "grpc.max_receive_message_length": -1,
    });
  });
  after(() => {
    client?.close();
    server?.forceShutdown();
  });

  const unary = (name: string): Promise<{ error: ServiceError | null; reply: Buffer | undefined }> =>
    new Promise((resolve) =>
      client.makeUnaryRequest(`/test.Parts/${name}`, asIs, asIs, Buffer.alloc(0), (error, reply) =>
        resolve({ error, reply }),
      ),
    );

  it("a unary reply arrives as one message: the parts joined, in order", async () => {
    const { error, reply } = await unary("Unary");
    assert.equal(error, null);
    assert.ok(reply?.equals(Buffer.concat(unaryParts)));
  });

  it("each streamed message is its own parts joined", async () => {
    const call = client.makeServerStreamRequest("/test.Parts/Streamed", asIs, asIs, Buffer.alloc(0));
    const received: Buffer[] = [];
    for await (const message of call) received.push(message as Buffer);
    assert.deepEqual(
      received.map((message) => message.length),
      streamedParts.map((parts) => Buffer.concat(parts).length),
    );
    received.forEach((message, index) => assert.ok(message.equals(Buffer.concat(streamedParts[index]!))));
  });

  it("a message in parts over the send limit is RESOURCE_EXHAUSTED, counted by all its parts", async () => {
    const { error } = await unary("Oversized");
    assert.equal(error?.code, status.RESOURCE_EXHAUSTED);
    assert.match(error?.details ?? "", /Sent message larger than max \(6291461 vs\. 4194304\)/);
  });
});

describe("large replies through the data plane", () => {
  const serving = useServer({ identity_all: IDENTITY_ALL_TYPES });
  let server: ServerProcess;
  before(() => ({ server } = serving));

  /** Inputs of several sizes around the size from which outputs go out as views. */
  const sizes = [4, 32 * 1024 - 4, 32 * 1024, 3 * 1024 * 1024 + 8];
  const request = (): ModelInferRequest => {
    const types = ["FP32", "INT32", "UINT8", "INT64"] as const;
    const raw = sizes.map((size) => randomBytes(size));
    return inferRequest({
      modelName: "identity_all",
      inputs: types.map((datatype, index) => ({
        name: `IN_${datatype}`,
        datatype,
        shape: [BigInt(sizes[index]! / (datatype === "UINT8" ? 1 : datatype === "INT64" ? 8 : 4))],
        parameters: {},
        contents: undefined,
      })),
      rawInputContents: raw,
    });
  };

  it("ModelInfer: small and large outputs come back byte for byte", async () => {
    const sent = request();
    const reply = await infer(server.client, sent);
    assert.deepEqual(
      reply.outputs.map((output) => output.name),
      sent.inputs.map((input) => input.name.replace("IN_", "OUT_")),
    );
    reply.rawOutputContents.forEach((bytes, index) =>
      assert.ok(Buffer.from(bytes).equals(Buffer.from(sent.rawInputContents[index]!)), `output ${index}`),
    );
  });

  it("ModelStreamInfer: the same, for several requests on one stream", async () => {
    const sent = [request(), request(), request()].map((message, index) => ({ ...message, id: `r${index}` }));
    const replies = await streamAll(server.client, sent);
    assert.equal(replies.length, sent.length);
    for (const reply of replies) {
      assert.equal(reply.errorMessage, "");
      const index = Number(reply.inferResponse!.id.slice(1));
      reply.inferResponse!.rawOutputContents.forEach((bytes, output) =>
        assert.ok(Buffer.from(bytes).equals(Buffer.from(sent[index]!.rawInputContents[output]!))),
      );
    }
  });

  it("a small call's reply is not held behind the large replies on its connection", async function () {
    this.timeout(120_000);
    const { small, large } = await smallCallsAmidLargeReplies(server);
    // One stream's DATA after another (Node 24's nghttp2), a small reply waits for every
    // large reply ahead of it, about as long as a large call takes (a ratio near 1); sent in
    // slices (grpc.ts), it waits for a slice of each.
    const ratio = median(small) / median(large);
    assert.ok(
      ratio < MAX_SMALL_TO_LARGE,
      `ServerLive took ${Math.round(median(small))} ms (median), a ${LARGE_REPLY_MIB} MiB ModelInfer ${Math.round(median(large))} ms: ` +
        `${ratio.toFixed(2)} of it, not under ${MAX_SMALL_TO_LARGE} (ServerLive: ${small.map(Math.round).join(", ")} ms)`,
    );
  });
});

const LARGE_CALLS = 4;
const LARGE_REPLY_MIB = 8;
const SMALL_CALLS = 12;
/** Measured on 2 shared cores: 0.8-1.0 with whole replies, 0.05-0.2 with slices. */
const MAX_SMALL_TO_LARGE = 0.4;

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

/**
 * ServerLive's latencies (ms) on the connection (the fixture's client: grpc-js's 64 KiB
 * receive windows) that carries LARGE_CALLS ModelInfer calls with large replies, one after
 * another each, and the large calls' own latencies meanwhile.
 */
async function smallCallsAmidLargeReplies(server: ServerProcess): Promise<{ small: number[]; large: number[] }> {
  const bytes = LARGE_REPLY_MIB * 1024 * 1024;
  const request = inferRequest({
    modelName: "identity_all",
    inputs: [{ name: "IN_UINT8", datatype: "UINT8", shape: [BigInt(bytes)], parameters: {}, contents: undefined }],
    rawInputContents: [randomBytes(bytes)],
  });
  const small: number[] = [];
  const large: number[] = [];
  let running = true;
  const load = Array.from({ length: LARGE_CALLS }, async () => {
    while (running) large.push(await timed(() => infer(server.client, request)));
  });
  try {
    while (large.length < LARGE_CALLS) await pause(10);
    for (let index = 0; index < SMALL_CALLS; index++) {
      await pause(50);
      small.push(await timed(() => call(server.client, "serverLive", {})));
    }
  } finally {
    running = false;
    await Promise.all(load);
  }
  return { small, large };
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

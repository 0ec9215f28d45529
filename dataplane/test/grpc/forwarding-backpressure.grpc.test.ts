import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { connect, type ClientHttp2Session } from "node:http2";
import { ModelInferRequest, type ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { InferenceExtensionsClient } from "../../../proto/gen/ts/extensions.js";
import { forwardedConfig, useScriptedForwarding } from "../fixtures/forwarding.js";
import { rssOf } from "../fixtures/python-models.js";
import { scriptedRequest, type Script } from "../fixtures/scripted-upstream.js";
import { eventually, streamAll, type ServerProcess } from "../fixtures/server.js";

/**
 * Flow control through the lean forwarding path: a client that never reads the replies of a
 * fast decoupled upstream holds that upstream back (the data plane does not take the
 * upstream's replies into memory), and other clients of the same model are served meanwhile.
 * The scripted upstream writes every reply at once: what the data plane does not take stays
 * unsent on the upstream's side, in this process. The data plane's RSS growth is logged
 * (measured, not asserted: garbage and GC timing move it by tens of MiB).
 */

const MiB = 1024 * 1024;
/** Replies per request and their size: each stalled request is 48 MiB the upstream would send. */
const REPLIES = 48;
const INPUT_BYTES = MiB;

/** A request echoed REPLIES times, each reply carrying the 1 MiB input back. */
function bigRequest(model: string, id: string): ModelInferRequest {
  const script: Script = { streamReplies: Array.from({ length: REPLIES }, () => null) };
  return scriptedRequest(model, script, {
    id,
    inputs: [{ name: "INPUT0", datatype: "UINT8", shape: [BigInt(INPUT_BYTES)], parameters: {}, contents: undefined }],
    rawInputContents: [new Uint8Array(INPUT_BYTES).fill(7)],
  });
}

/** A length-prefixed gRPC message (PROTOCOL-HTTP2.md: compressed flag, 4-byte length). */
function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.byteLength);
  frame.writeUInt32BE(message.byteLength, 1);
  frame.set(message, 5);
  return frame;
}

/** A raw HTTP/2 call that sends `requests` and never reads a byte of the replies. */
function stalledCall(session: ClientHttp2Session, path: string, requests: ModelInferRequest[], halfClose: boolean) {
  const stream = session.request({
    ":method": "POST",
    ":path": path,
    "content-type": "application/grpc",
    te: "trailers",
  });
  stream.pause();
  for (const request of requests) stream.write(grpcFrame(ModelInferRequest.encode(request).finish()));
  if (halfClose) stream.end();
  return stream;
}

const settle = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe("the lean forwarding path under a client that never reads", function () {
  this.timeout(120_000);
  const forwarding = useScriptedForwarding((upstream) => ({
    fast: forwardedConfig("fast", upstream, "model_transaction_policy { decoupled: true }"),
  }));
  let server: ServerProcess;
  before(() => ({ server } = forwarding));

  /** The data plane's resident memory growth while `stall` holds its replies unread, and another client served meanwhile. */
  async function holdsUpstreamBack(stalled: string, stall: (session: ClientHttp2Session) => unknown): Promise<void> {
    // Warm up the path (buffers, code) with a read request of the same size.
    await streamAll(server.client, [bigRequest("fast", "warm")]);
    const before = await rssOf(server.process.pid!);
    const sentBefore = forwarding.upstream.streamRepliesSent();
    const session = connect(`http://127.0.0.1:${server.grpcPort}`);
    try {
      stall(session);
      // The stalled requests reached the upstream, which answered them at once.
      await eventually(() =>
        assert.equal(forwarding.upstream.requests.filter((request) => request.id.startsWith(stalled)).length, 4),
      );
      // Long enough for the upstream's 4 x 48 MiB to have reached the data plane, were it taken.
      await settle(3_000);
      const grown = (await rssOf(server.process.pid!)) - before;
      // What the upstream could send: the data plane's flow-control windows (8 MiB a call) and a reply or so each.
      const sent = forwarding.upstream.streamRepliesSent() - sentBefore;
      // Another client of the same model is served meanwhile, on both streaming RPCs.
      const replies = await streamAll(server.client, [scriptedRequest("fast", { streamReplies: [null, null] })]);
      assert.equal(replies.length, 2);
      const extensions = new InferenceExtensionsClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
      try {
        const streamed = await inferStream(extensions, scriptedRequest("fast", { streamReplies: [null, null, null] }));
        assert.equal(streamed.length, 3);
      } finally {
        extensions.close();
      }
      console.log(
        `      upstream sent ${sent} of ${4 * REPLIES} 1 MiB replies; data plane RSS grew ${(grown / MiB).toFixed(1)} MiB`,
      );
      assert.ok(sent <= 40, `the upstream sent ${sent} replies: the data plane took them`);
    } finally {
      session.destroy();
    }
  }

  it("ModelStreamInfer: four requests of a stream whose client never reads", () =>
    holdsUpstreamBack("stream-", (session) =>
      stalledCall(
        session,
        "/inference.GRPCInferenceService/ModelStreamInfer",
        [0, 1, 2, 3].map((index) => bigRequest("fast", `stream-${index}`)),
        false,
      ),
    ));

  it("ModelInferStream: four calls whose client never reads", () =>
    holdsUpstreamBack("calls-", (session) => {
      for (const index of [0, 1, 2, 3])
        stalledCall(
          session,
          "/dynamokserve.v1.InferenceExtensions/ModelInferStream",
          [bigRequest("fast", `calls-${index}`)],
          true,
        );
    }));
});

function inferStream(client: InferenceExtensionsClient, request: ModelInferRequest): Promise<ModelInferResponse[]> {
  return new Promise((resolve, reject) => {
    const replies: ModelInferResponse[] = [];
    const stream = client.modelInferStream(request, new Metadata());
    stream.on("data", (reply: ModelInferResponse) => replies.push(reply));
    stream.on("error", (error: ServiceError) => reject(error));
    stream.on("end", () => resolve(replies));
  });
}

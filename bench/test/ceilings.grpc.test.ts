import assert from "node:assert/strict";
import { constants } from "node:http2";
import { Client, credentials, Metadata, status, type ServiceError, type StatusObject } from "@grpc/grpc-js";
import { GRPCInferenceServiceService, ModelInferRequest, ModelInferResponse } from "../../proto/gen/ts/grpc_service.js";
import {
  scriptedRequest,
  startScriptedUpstream,
  type Script,
  type ScriptedUpstream,
} from "../../dataplane/test/fixtures/scripted-upstream.js";
import { startBenchServer, type BenchServer } from "../harness/servers.js";

/**
 * The forwarding ceilings (bench/ceilings/h2-proxy.ts, grpcjs-proxy.ts) are only fair if they
 * forward correctly: each, started as the bench starts it, relays a reply with its initial
 * metadata and trailers, a status with its details and trailers, the upstream's reset and the
 * client's cancel, to and from the scripted KServe peer of the forwarding tests.
 */

const INFER = GRPCInferenceServiceService.modelInfer.path;
const asIs = (bytes: Buffer): Buffer => bytes;
const TRAILER_BIN = Buffer.from([0, 1, 2, 255]);

interface Outcome {
  readonly error: ServiceError | null;
  readonly reply: Buffer | undefined;
  readonly initial: Metadata | undefined;
  readonly status: StatusObject;
}

for (const id of ["h2-proxy", "grpcjs-proxy"] as const) {
  describe(`forwarding ceiling ${id} relays what its upstream says`, function () {
    this.timeout(30_000);
    let upstream: ScriptedUpstream;
    let proxy: BenchServer;
    let client: Client;

    before(async () => {
      upstream = await startScriptedUpstream();
      proxy = await startBenchServer(id, { cpus: undefined, ceilingSizes: [], upstream: upstream.address });
      client = new Client(proxy.address, credentials.createInsecure());
    });
    after(async () => {
      client?.close();
      await proxy?.stop();
      await upstream?.close();
    });

    /** One ModelInfer through the proxy, scripted for the upstream, with custom metadata and a deadline. */
    const call = (script: Script) => {
      const metadata = new Metadata();
      metadata.set("x-client", "mine");
      let initial: Metadata | undefined;
      let error: ServiceError | null = null;
      let reply: Buffer | undefined;
      let done: (outcome: Outcome) => void = () => undefined;
      const outcome = new Promise<Outcome>((resolve) => (done = resolve));
      const request = Buffer.from(ModelInferRequest.encode(scriptedRequest("identity_fp32", script)).finish());
      const running = client.makeUnaryRequest(
        INFER,
        asIs,
        asIs,
        request,
        metadata,
        { deadline: Date.now() + 20_000 },
        (failed, received) => ((error = failed), (reply = received)),
      );
      running.on("metadata", (received) => (initial = received));
      running.on("status", (received) => done({ error, reply, initial, status: received }));
      return { running, outcome };
    };

    it("a reply: its bytes, initial metadata and trailers (text and -bin) come back; metadata and the deadline go up", async () => {
      const {
        error,
        reply,
        initial,
        status: ended,
      } = await call({
        metadata: { "x-initial": "hello" },
        trailers: { "x-trailer": "bye", "x-trailer-bin": TRAILER_BIN.toString("base64") },
      }).outcome;
      assert.equal(error, null);
      const decoded = ModelInferResponse.decode(reply!);
      assert.deepEqual(Buffer.from(decoded.rawOutputContents[0]!), Buffer.from(Float32Array.of(1, 2, 3).buffer));
      assert.deepEqual(initial?.get("x-initial"), ["hello"]);
      assert.equal(ended.code, status.OK);
      assert.deepEqual(ended.metadata.get("x-trailer"), ["bye"]);
      assert.deepEqual(ended.metadata.get("x-trailer-bin"), [TRAILER_BIN]);
      const { headers } = upstream.streams.at(-1)!;
      assert.equal(headers["x-client"], "mine");
      assert.match(String(headers["grpc-timeout"]), /^\d+[HMSmun]$/);
      assert.equal(headers[":path"], INFER);
    });

    it("a status: its code, details and trailers come back", async () => {
      const { error, status: ended } = await call({
        status: status.FAILED_PRECONDITION,
        details: "not now",
        trailersOnly: true,
        trailers: { "x-why": "busy" },
      }).outcome;
      assert.equal(error?.code, status.FAILED_PRECONDITION);
      assert.equal(ended.details, "not now");
      assert.deepEqual(ended.metadata.get("x-why"), ["busy"]);
    });

    it("the upstream's reset (RST_STREAM CANCEL) ends the call CANCELLED", async () => {
      const { error } = await call({ rst: constants.NGHTTP2_CANCEL }).outcome;
      assert.equal(error?.code, status.CANCELLED, error?.message);
    });

    it("the client's cancel resets the upstream stream (RST_STREAM CANCEL)", async () => {
      const arrived = upstream.streams.length;
      const { running, outcome } = call({ hang: true });
      await until(() => upstream.streams.length > arrived);
      running.cancel();
      assert.equal((await outcome).status.code, status.CANCELLED);
      const held = upstream.streams.at(-1)!;
      await until(() => held.closed);
      assert.equal(held.resetCode, constants.NGHTTP2_CANCEL);
      assert.equal(held.resetHere, false);
    });
  });
}

async function until(condition: () => boolean): Promise<void> {
  for (let waited = 0; !condition(); waited += 20) {
    if (waited > 10_000) throw new Error("the upstream never saw it");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

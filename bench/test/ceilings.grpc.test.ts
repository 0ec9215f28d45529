import assert from "node:assert/strict";
import { once } from "node:events";
import { constants, createServer, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { Client, credentials, Metadata, status, type ServiceError, type StatusObject } from "@grpc/grpc-js";
import { GRPCInferenceServiceService } from "../../proto/gen/ts/grpc_service.js";
import { startBenchServer, type BenchServer } from "../harness/servers.js";

/**
 * The forwarding ceilings (bench/ceilings/h2-proxy.ts, grpcjs-proxy.ts) are only fair if they
 * forward correctly: each relays a reply with its initial metadata and trailers, a status with
 * its details and trailers, the upstream's reset, and the client's cancel, to and from a
 * scripted HTTP/2 upstream, started as the bench starts them.
 */

const INFER = GRPCInferenceServiceService.modelInfer.path;
const asIs = (bytes: Buffer): Buffer => bytes;
const TRAILER_BIN = Buffer.from([0, 1, 2, 255]);

/** A gRPC upstream at the HTTP/2 level, doing what each request's `x-script` says. */
async function scriptedUpstream() {
  const seen: IncomingHttpHeaders[] = [];
  let heldOpen: (stream: ServerHttp2Stream) => void = () => undefined;
  // The stream it answers never ("hold"), once it has the whole request.
  const held = new Promise<ServerHttp2Stream>((resolve) => (heldOpen = resolve));
  const script = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, message: Buffer) => {
    switch (headers["x-script"]) {
      case "status":
        // Trailers-Only: the status and its metadata in the response headers.
        return stream.respond(
          {
            ":status": 200,
            "content-type": "application/grpc",
            "grpc-status": "9",
            "grpc-message": "not%20now",
            "x-why": "busy",
          },
          { endStream: true },
        );
      case "reset":
        return stream.close(constants.NGHTTP2_CANCEL);
      case "hold":
        return heldOpen(stream);
      default:
        stream.respond(
          { ":status": 200, "content-type": "application/grpc", "x-initial": "hello" },
          { waitForTrailers: true },
        );
        stream.on("wantTrailers", () =>
          stream.sendTrailers({
            "grpc-status": "0",
            "x-trailer": "bye",
            "x-trailer-bin": TRAILER_BIN.toString("base64"),
          }),
        );
        // The request's length-prefixed message, echoed as it came.
        return stream.end(message);
    }
  };
  const server = createServer();
  server.on("stream", (stream, headers) => {
    seen.push(headers);
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => script(stream, headers, Buffer.concat(chunks)));
    stream.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    held,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

interface Outcome {
  readonly error: ServiceError | null;
  readonly reply: Buffer | undefined;
  readonly initial: Metadata | undefined;
  readonly status: StatusObject;
}

for (const id of ["h2-proxy", "grpcjs-proxy"] as const) {
  describe(`forwarding ceiling ${id} relays what its upstream says`, function () {
    this.timeout(30_000);
    let upstream: Awaited<ReturnType<typeof scriptedUpstream>>;
    let proxy: BenchServer;
    let client: Client;

    before(async () => {
      upstream = await scriptedUpstream();
      proxy = await startBenchServer(id, { cpus: undefined, ceilingSizes: [], upstream: upstream.address });
      client = new Client(proxy.address, credentials.createInsecure());
    });
    after(async () => {
      client?.close();
      await proxy?.stop();
      await upstream?.close();
    });

    const call = (script: string, message = Buffer.from([0, 0, 0, 0, 3, 1, 2, 3])) => {
      const metadata = new Metadata();
      metadata.set("x-script", script);
      metadata.set("x-client", "mine");
      let initial: Metadata | undefined;
      let done: (outcome: Outcome) => void = () => undefined;
      const outcome = new Promise<Outcome>((resolve) => (done = resolve));
      let error: ServiceError | null = null;
      let reply: Buffer | undefined;
      // The message without its length prefix: grpc-js frames it.
      const running = client.makeUnaryRequest(
        INFER,
        asIs,
        asIs,
        message.subarray(5),
        metadata,
        { deadline: Date.now() + 20_000 },
        (failed, received) => ((error = failed), (reply = received)),
      );
      running.on("metadata", (received) => (initial = received));
      running.on("status", (received) => done({ error, reply, initial, status: received }));
      return { running, outcome };
    };

    it("a reply: its bytes, initial metadata and trailers (text and -bin) come back; metadata and the deadline go up", async () => {
      const { outcome } = call("echo");
      const { error, reply, initial, status: ended } = await outcome;
      assert.equal(error, null);
      assert.deepEqual(reply, Buffer.from([1, 2, 3]));
      assert.deepEqual(initial?.get("x-initial"), ["hello"]);
      assert.equal(ended.code, status.OK);
      assert.deepEqual(ended.metadata.get("x-trailer"), ["bye"]);
      assert.deepEqual(ended.metadata.get("x-trailer-bin"), [TRAILER_BIN]);
      const headers = upstream.seen.at(-1)!;
      assert.equal(headers["x-client"], "mine");
      assert.match(String(headers["grpc-timeout"]), /^\d+[HMSmun]$/);
      assert.equal(headers[":path"], INFER);
    });

    it("a status: its code, details and trailers come back", async () => {
      const { error, status: ended } = await call("status").outcome;
      assert.equal(error?.code, status.FAILED_PRECONDITION);
      assert.equal(ended.details, "not now");
      assert.deepEqual(ended.metadata.get("x-why"), ["busy"]);
    });

    it("the upstream's reset (RST_STREAM CANCEL) ends the call CANCELLED", async () => {
      const { error } = await call("reset").outcome;
      assert.equal(error?.code, status.CANCELLED, error?.message);
    });

    it("the client's cancel resets the upstream stream (RST_STREAM CANCEL)", async () => {
      const { running, outcome } = call("hold");
      const held = await upstream.held;
      const closed = held.closed ? Promise.resolve() : once(held, "close");
      running.cancel();
      assert.equal((await outcome).status.code, status.CANCELLED);
      await closed;
      assert.equal(held.rstCode, constants.NGHTTP2_CANCEL);
    });
  });
}

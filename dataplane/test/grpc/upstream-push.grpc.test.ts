import assert from "node:assert/strict";
import { createServer, type Http2Server, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { frameHeader } from "../../../lib/grpc/frames.js";
import { H2Upstream, type UpstreamEnd } from "../../src/engines/kserve-grpc/h2-upstream.js";

/**
 * A hostile or broken upstream that pushes streams (PUSH_PROMISE) at the data plane's upstream
 * client. gRPC never pushes; node's client accepts pushes unless told not to, and buffers
 * what comes on them whether anyone reads it or not (measured: 200 pushes of 1 MiB, 200 MiB
 * held, the session's receive window no bound). The client must advertise
 * SETTINGS_ENABLE_PUSH 0, so that the upstream cannot push at all.
 */

const MIB = 1024 * 1024;
const PUSHES = 16;

/** Answers every call with one empty message and OK, after trying to push PUSHES streams of 1 MiB each. */
function pushingUpstream(refused: Error[], accepted: ServerHttp2Stream[]): Http2Server {
  const server = createServer();
  server.on("stream", (stream) => {
    stream.on("error", () => undefined);
    let tried = 0;
    const answer = (): void => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(frameHeader(0));
    };
    const pushNext = (): void => {
      if (tried++ === PUSHES) return answer();
      try {
        stream.pushStream({ ":path": `/pushed/${tried}` }, (error, pushed) => {
          if (error) refused.push(error);
          else {
            accepted.push(pushed);
            pushed.on("error", () => undefined);
            pushed.respond({ ":status": 200 });
            pushed.write(Buffer.alloc(MIB, 1));
          }
          pushNext();
        });
      } catch (error) {
        refused.push(error as Error);
        pushNext();
      }
    };
    pushNext();
  });
  return server;
}

describe("the upstream client refuses server push (h2-upstream.ts)", () => {
  it("an upstream cannot push streams at the data plane: every push is refused, the call still ends OK", async () => {
    const refused: Error[] = [];
    const accepted: ServerHttp2Stream[] = [];
    const server = pushingUpstream(refused, accepted);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const upstream = new H2Upstream({
      address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
      maxMessageSize: 64 * MIB,
      flowControlWindow: 8 * MIB,
    });
    try {
      const end = await new Promise<UpstreamEnd>((resolve) =>
        upstream.call(
          {
            path: "/t.S/M",
            message: new Uint8Array(0),
            unary: true,
            deadline: Infinity,
            metadata: [],
            traceHeaders: {},
          },
          { metadata: () => undefined, message: () => undefined, end: resolve },
        ),
      );
      assert.equal(end.code, 0, end.details);
      assert.equal(accepted.length, 0, `${accepted.length} pushed streams of 1 MiB were accepted`);
      assert.equal(refused.length, PUSHES);
    } finally {
      upstream.close();
      server.close();
    }
  });
});

import assert from "node:assert/strict";
import { createServer, request as httpRequest } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { blackHole, POD, useActivators } from "./fixtures.js";

/** Sends `bytes` on a connection of its own and resolves with all the activator wrote before it closed. */
function exchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket: Socket = connect(port, "127.0.0.1");
    let received = "";
    socket.on("data", (chunk: Buffer) => (received += chunk.toString()));
    socket.on("error", () => undefined);
    socket.once("close", () => resolve(received));
    socket.write(bytes);
  });
}

/**
 * Malformed and oversized HTTP/1.1 requests: refused before anything is held, and told why (in
 * KServe v2's error shape), not met with a silently cut connection. And a pod that never
 * answers a connection is passed over.
 */
describe("activator: malformed HTTP/1.1 requests, and a black-holed pod", function () {
  this.timeout(30_000);
  const activators = useActivators();

  it("answers 431 to a header block over --max-header-bytes and 400 to a smuggling attempt (Transfer-Encoding with Content-Length, obs-fold, a space in a name), holding none", async () => {
    const t = await activators.start(undefined, { maxHeaderBytes: 16 * 1024 });
    let held = 0;
    t.activator.holding.onHeld((count) => (held = Math.max(held, count)));
    const tooBig = await exchange(
      t.activator.httpPort,
      `POST /v2/models/m/infer HTTP/1.1\r\nhost: m\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`,
    );
    assert.match(tooBig, /^HTTP\/1\.1 431 /);
    assert.match(tooBig, /"error":"[^"]*16384 bytes[^"]*--max-header-bytes/);
    for (const smuggled of [
      "POST /v2/models/m/infer HTTP/1.1\r\nhost: m\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n",
      "GET /v2/health/ready HTTP/1.1\r\nhost: m\r\nx-a: a\r\n b\r\n\r\n",
      "GET /v2/health/ready HTTP/1.1\r\nhost: m\r\nx a: a\r\n\r\n",
    ]) {
      const reply = await exchange(t.activator.httpPort, smuggled);
      assert.match(reply, /^HTTP\/1\.1 400 /, JSON.stringify(smuggled));
      assert.match(reply, /connection: close/i);
      assert.match(reply, /"error":"the request is not valid HTTP\/1\.1: /);
    }
    assert.equal(held, 0, "nothing was held, KEDA never heard of them");
  });

  it("sends a request on to the next ready pod when one black-holes connections (never accepts), within the connect bound", async () => {
    const pod = createServer((request, response) => {
      request.resume();
      request.once("end", () => response.end("from the pod"));
    });
    await new Promise<void>((resolve) => pod.listen(0, "127.0.0.1", resolve));
    const port = (pod.address() as AddressInfo).port;
    const removeHole = await blackHole("127.0.0.2", port);
    try {
      const t = await activators.start(undefined, { upstreamHttpPort: port, upstreamConnectTimeoutMs: 500 });
      // Round-robin gives the first request the second pod: the black hole.
      t.pods.set([POD, { name: "black-hole-0", ip: "127.0.0.2" }]);
      const started = performance.now();
      const reply = await new Promise<{ status?: number; body: string }>((resolve, reject) => {
        const request = httpRequest({ host: "127.0.0.1", port: t.activator.httpPort, path: "/v2/health/ready" });
        request.once("response", (response) => {
          let body = "";
          response.on("data", (chunk: Buffer) => (body += chunk.toString()));
          response.once("end", () => resolve({ status: response.statusCode, body }));
        });
        request.once("error", reject);
        request.setTimeout(10_000, () => request.destroy(new Error("no reply within 10 s")));
        request.end();
      });
      assert.deepEqual(reply, { status: 200, body: "from the pod" });
      console.log(`        relayed past the black-holed pod in ${Math.round(performance.now() - started)} ms`);
    } finally {
      removeHole();
      pod.close();
    }
  });
});

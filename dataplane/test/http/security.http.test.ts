import assert from "node:assert/strict";
import { connect as tlsConnect } from "node:tls";
import { Agent, fetch as undiciFetch } from "undici";
import { createTestCa, type TestCa } from "../../../e2e/support/certificates.js";
import { SecretFiles, tlsArgs } from "../fixtures/secret-files.js";
import { eventually, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * The front door under the data plane's TLS and bearer tokens: HTTPS with the same
 * certificate (and its rotation) as gRPC, 401 without a known token, probes open.
 */

const SERVER_NAMES = { dns: ["localhost"], ips: ["127.0.0.1"] };
const MAX_BODY = 64 * 1024;

describe("HTTP front door security: TLS, certificate rotation, bearer tokens", function () {
  this.timeout(30_000);
  const files = new SecretFiles();
  let ca: TestCa;
  let otherCa: TestCa;
  let server: ServerProcess;

  before(async () => {
    [ca, otherCa] = await Promise.all([createTestCa("test CA"), createTestCa("another CA")]);
    files.writeIdentity(await ca.issue("data plane", SERVER_NAMES));
    files.write({ tokens: "http-secret-token\n" });
    server = await startServer([
      ...tlsArgs(files),
      ...["--auth-token-file", files.path("tokens"), "--max-message-size", String(MAX_BODY)],
    ]);
  });
  after(async () => {
    await server?.stop();
    files.remove();
  });

  /** A GET over a new TLS connection trusting `trusted`. */
  const get = async (trusted: TestCa, path: string, token?: string) => {
    const dispatcher = new Agent({ connect: { ca: trusted.certificate } });
    try {
      const reply = await undiciFetch(`https://localhost:${server.httpPort}${path}`, {
        dispatcher,
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      });
      return { status: reply.status, headers: reply.headers, body: await reply.text() };
    } finally {
      await dispatcher.close();
    }
  };

  it("serves HTTPS to clients that trust its CA, and refuses plaintext", async () => {
    assert.equal((await get(ca, "/v2/models/identity_fp32", "http-secret-token")).status, 200);
    await assert.rejects(get(otherCa, "/v2/health/live"));
    await assert.rejects(fetch(`http://127.0.0.1:${server.httpPort}/v2/health/live`));
  });

  it("answers 401 without a known bearer token, naming the header; probes need none", async () => {
    const missing = await get(ca, "/v2/models/identity_fp32");
    assert.equal(missing.status, 401);
    assert.equal(missing.headers.get("www-authenticate"), 'Bearer realm="dynamo-kserve"');
    assert.match(JSON.parse(missing.body).error, /missing credentials: send header 'authorization: Bearer <token>'/);
    const wrong = await get(ca, "/v1/models", "not-the-token");
    assert.equal(wrong.status, 401);
    assert.match(JSON.parse(wrong.body).error.message, /the bearer token is not valid/);
    assert.equal((await get(ca, "/v2/health/ready")).status, 200);
  });

  it("answers an oversized body 413 over TLS too, to a client that writes the whole body before reading", async () => {
    // As tritonclient.http and requests do: the body in full, then the reply. Closing the
    // TLS connection without reading the rest made theirs an SSL EOF instead of the 413.
    for (const size of [4 * MAX_BODY, 64 * MAX_BODY]) {
      const reply = await writeAllThenRead(size);
      assert.match(reply, /^HTTP\/1\.1 413 /, reply.slice(0, 200));
      assert.match(reply, new RegExp(`limit of ${MAX_BODY} bytes`));
    }
  });

  /** A POST of `size` bytes over TLS, written whole before reading the reply (as Python's clients do); the reply's text. */
  const writeAllThenRead = (size: number): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = tlsConnect({
        host: "127.0.0.1",
        port: server.httpPort,
        servername: "localhost",
        ca: ca.certificate,
      });
      const parts: Buffer[] = [];
      socket.pause();
      socket.on("error", reject);
      socket.on("secureConnect", () => {
        const head =
          `POST /v2/models/identity_fp32/infer HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n` +
          `authorization: Bearer http-secret-token\r\ncontent-length: ${size}\r\n\r\n`;
        socket.write(head);
        socket.write(Buffer.alloc(size, 0x20), () => {
          socket.on("data", (part: Buffer) => parts.push(part));
          socket.on("end", () => resolve(Buffer.concat(parts).toString()));
          socket.resume();
        });
      });
    });

  it("follows a certificate rotation for new connections", async () => {
    files.writeIdentity(await otherCa.issue("data plane", SERVER_NAMES));
    await eventually(async () => assert.equal((await get(otherCa, "/v2/health/live")).status, 200));
    await assert.rejects(get(ca, "/v2/health/live"));
  });
});

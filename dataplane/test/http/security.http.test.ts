import assert from "node:assert/strict";
import { Agent, fetch as undiciFetch } from "undici";
import { createTestCa, type TestCa } from "../../../e2e/support/certificates.js";
import { SecretFiles, tlsArgs } from "../fixtures/secret-files.js";
import { eventually, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * The front door under the data plane's TLS and bearer tokens: HTTPS with the same
 * certificate (and its rotation) as gRPC, 401 without a known token, probes open.
 */

const SERVER_NAMES = { dns: ["localhost"], ips: ["127.0.0.1"] };

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
    server = await startServer([...tlsArgs(files), "--auth-token-file", files.path("tokens")]);
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

  it("follows a certificate rotation for new connections", async () => {
    files.writeIdentity(await otherCa.issue("data plane", SERVER_NAMES));
    await eventually(async () => assert.equal((await get(otherCa, "/v2/health/live")).status, 200));
    await assert.rejects(get(ca, "/v2/health/live"));
  });
});

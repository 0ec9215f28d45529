import { ServerCredentials, status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { createTestCa, type Pem, type TestCa } from "../../../e2e/support/certificates.js";
import type { KserveGrpcEngine } from "../../src/engines/kserve-grpc/kserve-grpc.js";
import {
  forwardingEngine,
  forwardThrough,
  scriptedRequest,
  startScriptedUpstream,
  type ScriptedUpstream,
} from "../fixtures/scripted-upstream.js";
import { SecretFiles } from "../fixtures/secret-files.js";

/**
 * TLS from the kserve-grpc engine to its upstreams (upstream_tls, upstream_ca_file,
 * upstream_cert_file, upstream_key_file, upstream_server_name), against grpc-js peers
 * with certificates from a test CA: requests (node:http2) and describe calls (grpc-js).
 */
describe("kserve-grpc: TLS to the upstreams", function () {
  this.timeout(60_000);
  let ca: TestCa;
  let otherCa: TestCa;
  let files: SecretFiles;
  let tlsUpstream: ScriptedUpstream;
  let mtlsUpstream: ScriptedUpstream;
  let namedUpstream: ScriptedUpstream;
  let localhostUpstream: ScriptedUpstream;

  const serverCredentials = (pem: Pem, clientCa?: string) =>
    ServerCredentials.createSsl(
      clientCa === undefined ? null : Buffer.from(clientCa),
      [{ private_key: Buffer.from(pem.privateKey), cert_chain: Buffer.from(pem.certificate) }],
      clientCa !== undefined,
    );

  before(async () => {
    [ca, otherCa] = await Promise.all([createTestCa("upstream test CA"), createTestCa("another CA")]);
    const [server, client, named, localhost] = await Promise.all([
      ca.issue("127.0.0.1", { ips: ["127.0.0.1"] }),
      ca.issue("forwarder", { client: true }),
      ca.issue("upstream.test", { dns: ["upstream.test"] }),
      ca.issue("localhost", { dns: ["localhost"] }),
    ]);
    files = new SecretFiles();
    files.write({
      "ca.crt": ca.certificate,
      "other-ca.crt": otherCa.certificate,
      "client.crt": client.certificate,
      "client.key": client.privateKey,
    });
    [tlsUpstream, mtlsUpstream, namedUpstream, localhostUpstream] = await Promise.all([
      startScriptedUpstream({ credentials: serverCredentials(server) }),
      startScriptedUpstream({ credentials: serverCredentials(server, ca.certificate) }),
      startScriptedUpstream({ credentials: serverCredentials(named) }),
      startScriptedUpstream({ credentials: serverCredentials(localhost) }),
    ]);
  });

  after(async () => {
    await Promise.all([
      tlsUpstream?.close(),
      mtlsUpstream?.close(),
      namedUpstream?.close(),
      localhostUpstream?.close(),
    ]);
    files?.remove();
  });

  const engines: KserveGrpcEngine[] = [];
  afterEach(async () => {
    await Promise.all(engines.splice(0).map((engine) => engine.close()));
  });
  const engineTo = async (upstream: ScriptedUpstream, parameters: Record<string, string>) => {
    const engine = await forwardingEngine("m", { upstream: upstream.address, upstream_tls: "true", ...parameters });
    engines.push(engine);
    return engine;
  };
  const ask = (engine: KserveGrpcEngine) => forwardThrough(engine, scriptedRequest("m"));

  it("forwards over TLS to an upstream whose certificate the CA signed, describe calls too", async () => {
    const engine = await engineTo(tlsUpstream, { upstream_ca_file: files.path("ca.crt") });
    const result = await ask(engine);
    assert.equal(result.status.code, status.OK, result.status.details);
    assert.equal(result.messages.length, 1);
    assert.equal(tlsUpstream.streams.at(-1)!.headers[":scheme"], "https");
    assert.equal(await engine.modelReady(), true, "ModelReady over the describe client's TLS");
  });

  it("refuses an upstream whose certificate another CA signed: UNAVAILABLE naming the upstream", async () => {
    const engine = await engineTo(tlsUpstream, { upstream_ca_file: files.path("other-ca.crt") });
    const result = await ask(engine);
    assert.equal(result.status.code, status.UNAVAILABLE);
    assert.match(result.status.details, new RegExp(`model 'm': upstream ${tlsUpstream.address} is unavailable: .+`));
  });

  it("presents a client certificate when the upstream asks for one (mTLS), and is refused without it", async () => {
    const withCertificate = await engineTo(mtlsUpstream, {
      upstream_ca_file: files.path("ca.crt"),
      upstream_cert_file: files.path("client.crt"),
      upstream_key_file: files.path("client.key"),
    });
    const accepted = await ask(withCertificate);
    assert.equal(accepted.status.code, status.OK, accepted.status.details);
    const without = await engineTo(mtlsUpstream, { upstream_ca_file: files.path("ca.crt") });
    const refused = await ask(without);
    assert.equal(refused.status.code, status.UNAVAILABLE);
    assert.match(refused.status.details, new RegExp(`upstream ${mtlsUpstream.address} is unavailable`));
  });

  it("checks the certificate for upstream_server_name (and sends it as :authority) when the address is an IP", async () => {
    const named = await engineTo(namedUpstream, {
      upstream_ca_file: files.path("ca.crt"),
      upstream_server_name: "upstream.test",
    });
    const result = await ask(named);
    assert.equal(result.status.code, status.OK, result.status.details);
    assert.equal(namedUpstream.streams.at(-1)!.headers[":authority"], "upstream.test");
    const unnamed = await engineTo(namedUpstream, { upstream_ca_file: files.path("ca.crt") });
    assert.equal((await ask(unnamed)).status.code, status.UNAVAILABLE, "the certificate does not name 127.0.0.1");
  });

  it("checks the certificate for the DNS name in `upstream` (not the address it resolves to), and sends it as :authority", async () => {
    const port = localhostUpstream.address.split(":").at(-1)!;
    const engine = await engineTo(localhostUpstream, {
      upstream: `localhost:${port}`,
      upstream_ca_file: files.path("ca.crt"),
    });
    const result = await ask(engine);
    assert.equal(result.status.code, status.OK, result.status.details);
    assert.equal(localhostUpstream.streams.at(-1)!.headers[":authority"], `localhost:${port}`);
    assert.equal(await engine.modelReady(), true, "ModelReady over the describe client's TLS");
  });

  it("does not load when a TLS file cannot be read, naming it", async () => {
    await assert.rejects(
      engineTo(tlsUpstream, { upstream_ca_file: files.path("missing.crt") }),
      (error: Error) => error.message.includes("upstream TLS") && error.message.includes("missing.crt"),
    );
  });
});

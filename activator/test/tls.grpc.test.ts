import { credentials, Metadata, status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { request as httpsRequest } from "node:https";
import { createTestCa, type TestCa } from "../../e2e/support/certificates.js";
import { EXAMPLES } from "../../dataplane/test/fixtures/paths.js";
import { identityRequest } from "../../dataplane/test/fixtures/requests.js";
import { SecretFiles, tlsArgs } from "../../dataplane/test/fixtures/secret-files.js";
import { startServer, type ServerProcess } from "../../dataplane/test/fixtures/server.js";
import { GRPCInferenceServiceClient, type ModelInferResponse } from "../../proto/gen/ts/grpc_service.js";
import { POD, until, useActivators, type TestActivator } from "./fixtures.js";

/** The pods' certificate names their Service, not their IP: the activator checks that name. */
const POD_NAME = "model.ns.svc";

describe("activator: TLS on both ports, and to the pods", function () {
  this.timeout(60_000);
  let ca: TestCa;
  const files = new SecretFiles();
  let pod: ServerProcess;
  const activators = useActivators();
  before(async () => {
    ca = await createTestCa("activator test CA");
    const podFiles = new SecretFiles();
    podFiles.writeIdentity(await ca.issue("pod", { dns: [POD_NAME] }));
    files.writeIdentity(await ca.issue("activator", { dns: ["localhost"], ips: ["127.0.0.1"] }));
    files.write({ "ca.crt": ca.certificate });
    pod = await startServer(["--model-repository", EXAMPLES, ...tlsArgs(podFiles)]);
    podFiles.remove();
  });
  after(async () => {
    await pod?.stop();
    files.remove();
  });

  const start = (serverName: string): Promise<TestActivator> =>
    activators.start(pod, {
      tlsCertFile: files.path("tls.crt"),
      tlsKeyFile: files.path("tls.key"),
      upstreamCaFile: files.path("ca.crt"),
      upstreamServerName: serverName,
      holdTimeoutMs: 2_000,
    });
  const client = (t: TestActivator, trust: ChannelCredentials) =>
    // The certificate's DNS name, not the IP: SNI carries no IP.
    new GRPCInferenceServiceClient(`127.0.0.1:${t.activator.grpcPort}`, trust, {
      "grpc.ssl_target_name_override": "localhost",
    });
  const infer = (c: GRPCInferenceServiceClient) =>
    new Promise<ModelInferResponse | ServiceError>((resolve) =>
      c.modelInfer(identityRequest(), new Metadata(), { deadline: new Date(Date.now() + 20_000) }, (error, reply) =>
        resolve(error ?? reply),
      ),
    );

  it("serves TLS to clients that trust the model's CA and relays to the pods over TLS, checking their name", async () => {
    const t = await start(POD_NAME);
    const trusted = client(t, credentials.createSsl(Buffer.from(ca.certificate)));
    try {
      const held = infer(trusted);
      const https = new Promise<number>((resolve, reject) => {
        const request = httpsRequest(
          {
            host: "127.0.0.1",
            port: t.activator.httpPort,
            path: "/v2/models/identity_fp32/infer",
            method: "POST",
            ca: ca.certificate,
            servername: "localhost",
          },
          (response) => {
            response.resume();
            response.on("end", () => resolve(response.statusCode!));
          },
        );
        request.on("error", reject);
        request.end(JSON.stringify({ inputs: [{ name: "INPUT0", datatype: "FP32", shape: [1, 1], data: [1] }] }));
      });
      await until(() => t.activator.holding.held === 2, "both requests are held");
      t.pods.set([POD]);
      const reply = await held;
      assert.ok(!(reply instanceof Error), String(reply));
      assert.equal((reply as ModelInferResponse).modelName, "identity_fp32");
      assert.equal(await https, 200);
      const plaintext = client(t, credentials.createInsecure());
      assert.equal(((await infer(plaintext)) as ServiceError).code, status.UNAVAILABLE);
      plaintext.close();
    } finally {
      trusted.close();
    }
  });

  it("does not relay to a pod whose certificate does not carry the expected name", async () => {
    const t = await start("someone-else.ns.svc");
    const trusted = client(t, credentials.createSsl(Buffer.from(ca.certificate)));
    try {
      t.pods.set([POD]);
      const reply = (await infer(trusted)) as ServiceError;
      assert.equal(reply.code, status.UNAVAILABLE);
    } finally {
      trusted.close();
    }
  });
});

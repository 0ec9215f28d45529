import { credentials, Metadata, status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { GRPCInferenceServiceClient } from "../../../proto/gen/ts/grpc_service.js";
import { createTestCa, type Pem, type TestCa } from "../../../e2e/support/certificates.js";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { HealthTestClient } from "../fixtures/health.js";
import { SecretFiles, tlsArgs } from "../fixtures/secret-files.js";
import { dataPlaneFailing, eventually, inferRequest, startServer, type ServerProcess } from "../fixtures/server.js";
import { request as httpRequest } from "node:http";

const trusting = (ca: Pem, client?: Pem): ChannelCredentials =>
  credentials.createSsl(
    Buffer.from(ca.certificate),
    client === undefined ? null : Buffer.from(client.privateKey),
    client === undefined ? null : Buffer.from(client.certificate),
  );

/** ServerLive over a new channel (so a new TLS handshake); resolves with the error, if any. */
async function serverLive(
  port: number,
  channelCredentials: ChannelCredentials,
  metadata = new Metadata(),
): Promise<ServiceError | null> {
  const client = new GRPCInferenceServiceClient(`localhost:${port}`, channelCredentials);
  try {
    return await new Promise((resolve) =>
      client.serverLive({}, metadata, { deadline: Date.now() + 5000 }, (error) => resolve(error)),
    );
  } finally {
    client.close();
  }
}

const SERVER_NAMES = { dns: ["localhost"], ips: ["127.0.0.1"] };

describe("data plane security: TLS, mTLS, certificate rotation, bearer tokens, message size", function () {
  this.timeout(30_000);
  let ca: TestCa;
  let otherCa: TestCa;
  before(async () => {
    [ca, otherCa] = await Promise.all([createTestCa("test CA"), createTestCa("another CA")]);
  });

  describe("TLS", () => {
    const files = new SecretFiles();
    let server: ServerProcess;
    before(async () => {
      files.writeIdentity(await ca.issue("data plane", SERVER_NAMES));
      server = await startServer(tlsArgs(files));
    });
    after(async () => {
      await server?.stop();
      files.remove();
    });

    it("serves clients that trust its CA and refuses plaintext", async () => {
      assert.equal(await serverLive(server.grpcPort, trusting(ca)), null);
      const plaintext = await serverLive(server.grpcPort, credentials.createInsecure());
      assert.equal(plaintext?.code, status.UNAVAILABLE);
      const distrustful = await serverLive(server.grpcPort, trusting(otherCa));
      assert.equal(distrustful?.code, status.UNAVAILABLE);
    });

    it("rotates its certificate under live traffic without a failed request, and ignores a broken rotation", async () => {
      const steady = new GRPCInferenceServiceClient(`localhost:${server.grpcPort}`, trusting(ca));
      let ok = 0;
      const failures: string[] = [];
      let running = true;
      const traffic = (async () => {
        while (running) {
          await new Promise<void>((resolve) =>
            steady.serverLive({}, (error) => {
              if (error) failures.push(error.message);
              else ok++;
              resolve();
            }),
          );
        }
      })();
      try {
        // Rotate to a certificate from another CA: new handshakes must show it.
        files.writeIdentity(await otherCa.issue("data plane", SERVER_NAMES));
        await eventually(
          async () => assert.equal(await serverLive(server.grpcPort, trusting(otherCa)), null),
          5000,
          100,
        );
        assert.notEqual(await serverLive(server.grpcPort, trusting(ca)), null, "the old certificate is gone");
        // A key that does not match the certificate is refused; the last good pair stays.
        const mismatched = await otherCa.issue("data plane", SERVER_NAMES);
        files.write({ "tls.key": mismatched.privateKey });
        await eventually(() =>
          assert.ok(
            server.logs.some((entry) => String(entry["err"]).includes("is not the private key of the certificate")),
          ),
        );
        assert.equal(await serverLive(server.grpcPort, trusting(otherCa)), null);
      } finally {
        running = false;
        await traffic;
        steady.close();
      }
      assert.deepEqual(failures, []);
      assert.ok(ok > 20, `${ok} requests during the rotation`);
    });
  });

  describe("mTLS", () => {
    const files = new SecretFiles();
    let server: ServerProcess;
    before(async () => {
      files.writeIdentity(await ca.issue("data plane", SERVER_NAMES));
      files.write({ "ca.crt": ca.certificate });
      server = await startServer([...tlsArgs(files), "--client-ca-file", files.path("ca.crt")]);
    });
    after(async () => {
      await server?.stop();
      files.remove();
    });

    it("serves clients with a certificate from its client CA and refuses the others", async () => {
      const client = await ca.issue("client", { client: true });
      assert.equal(await serverLive(server.grpcPort, trusting(ca, client)), null);
      assert.equal(
        (await serverLive(server.grpcPort, trusting(ca)))?.code,
        status.UNAVAILABLE,
        "no client certificate",
      );
      const stranger = await otherCa.issue("stranger", { client: true });
      assert.equal((await serverLive(server.grpcPort, trusting(ca, stranger)))?.code, status.UNAVAILABLE);
    });
  });

  describe("bearer tokens", () => {
    const files = new SecretFiles();
    let server: ServerProcess;
    const bearer = (token: string): Metadata => {
      const metadata = new Metadata();
      metadata.set("authorization", `Bearer ${token}`);
      return metadata;
    };
    before(async () => {
      files.write({ tokens: "# one per line\nfirst-secret-token\n\nsecond-secret-token\n" });
      server = await startServer(["--auth-token-file", files.path("tokens"), "--credentials-reload-secs", "0.2"]);
    });
    after(async () => {
      await server?.stop();
      files.remove();
    });

    it("refuses calls without a valid token with UNAUTHENTICATED, and accepts every listed token", async () => {
      const insecure = credentials.createInsecure();
      const missing = await serverLive(server.grpcPort, insecure);
      assert.equal(missing?.code, status.UNAUTHENTICATED);
      assert.match(missing?.details ?? "", /authorization: Bearer <token>/);
      const wrong = await serverLive(server.grpcPort, insecure, bearer("guess"));
      assert.equal(wrong?.code, status.UNAUTHENTICATED);
      assert.match(wrong?.details ?? "", /not valid/);
      const malformed = new Metadata();
      malformed.set("authorization", "Basic Zm9vOmJhcg==");
      assert.equal((await serverLive(server.grpcPort, insecure, malformed))?.code, status.UNAUTHENTICATED);
      assert.equal(await serverLive(server.grpcPort, insecure, bearer("first-secret-token")), null);
      assert.equal(await serverLive(server.grpcPort, insecure, bearer("second-secret-token")), null);
      const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
      assert.equal(
        valueOf(samples, "grpc_server_handled_total", { grpc_method: "ServerLive", grpc_code: "UNAUTHENTICATED" }),
        3,
      );
    });

    it("lets health checks through without a token", async () => {
      const health = new HealthTestClient(`127.0.0.1:${server.grpcPort}`);
      try {
        assert.equal(await health.check("inference.GRPCInferenceService"), "SERVING");
      } finally {
        health.close();
      }
    });

    it("follows the token file when it rotates, and never logs a token", async () => {
      files.write({ tokens: "rotated-secret-token\n" });
      const insecure = credentials.createInsecure();
      await eventually(async () =>
        assert.equal(await serverLive(server.grpcPort, insecure, bearer("rotated-secret-token")), null),
      );
      assert.equal(
        (await serverLive(server.grpcPort, insecure, bearer("first-secret-token")))?.code,
        status.UNAUTHENTICATED,
      );
      files.write({ tokens: "\n# nothing\n" });
      await eventually(() => assert.ok(server.logs.some((entry) => String(entry["err"]).includes("holds no token"))));
      assert.equal(
        await serverLive(server.grpcPort, insecure, bearer("rotated-secret-token")),
        null,
        "last good tokens kept",
      );
      const logged = JSON.stringify(server.logs);
      for (const token of ["first-secret-token", "second-secret-token", "rotated-secret-token", "guess"]) {
        assert.equal(logged.includes(token), false, `${token} appears in the logs`);
      }
    });
  });

  describe("model control's own tokens (--model-control-token-file)", () => {
    const files = new SecretFiles();
    let server: ServerProcess;
    const withToken = (token?: string): Metadata => {
      const metadata = new Metadata();
      if (token !== undefined) metadata.set("authorization", `Bearer ${token}`);
      return metadata;
    };
    const load = (
      client: GRPCInferenceServiceClient,
      rpc: "repositoryModelLoad" | "repositoryModelUnload",
      token?: string,
    ) =>
      new Promise<ServiceError | null>((resolve) =>
        client[rpc]({ repositoryName: "", modelName: "identity_fp32", parameters: {} }, withToken(token), (error) =>
          resolve(error),
        ),
      );
    const http = (path: string, token?: string) =>
      fetch(`http://127.0.0.1:${server.httpPort}${path}`, {
        method: "POST",
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      });
    before(async () => {
      files.write({ inference: "inference-token\n", control: "control-token\n" });
      server = await startServer([
        "--model-control-mode",
        "explicit",
        "--load-model",
        "*",
        "--auth-token-file",
        files.path("inference"),
        "--model-control-token-file",
        files.path("control"),
      ]);
    });
    after(async () => {
      await server?.stop();
      files.remove();
    });

    it("loads and unloads only with a model-control token; an inference token does not do (gRPC and HTTP)", async () => {
      const { client } = server;
      for (const rpc of ["repositoryModelLoad", "repositoryModelUnload"] as const) {
        for (const token of [undefined, "inference-token", "guess"]) {
          const error = await load(client, rpc, token);
          assert.equal(error?.code, status.UNAUTHENTICATED, `${rpc} with ${token}`);
          assert.match(error?.details ?? "", /model control/);
        }
      }
      for (const action of ["load", "unload"]) {
        assert.equal((await http(`/v2/repository/models/identity_fp32/${action}`, "inference-token")).status, 401);
      }
      assert.equal(await load(client, "repositoryModelUnload", "control-token"), null);
      assert.equal(await load(client, "repositoryModelLoad", "control-token"), null);
      assert.equal((await http("/v2/repository/models/identity_fp32/unload", "control-token")).status, 200);
      assert.equal((await http("/v2/repository/models/identity_fp32/load", "control-token")).status, 200);
    });

    it("decides by the route a request reaches, not by how its path is spelled (escapes, a fragment, an absolute URL)", async () => {
      const post = (path: string, token: string) =>
        new Promise<number>((resolve, reject) => {
          const request = httpRequest(
            {
              host: "127.0.0.1",
              port: server.httpPort,
              method: "POST",
              path,
              headers: { authorization: `Bearer ${token}` },
            },
            (response) => {
              response.resume();
              resolve(response.statusCode!);
            },
          );
          request.on("error", reject).end();
        });
      for (const path of [
        "/v2/repository/models/identity_fp32/%75nload",
        "/v2/repository/models/identity_fp32/%6coad",
        "/v2/repository/models/identity_fp32/unload#x",
        "http://h/v2/repository/models/identity_fp32/unload",
      ]) {
        assert.equal(await post(path, "inference-token"), 401, path);
      }
      const ready = await fetch(`http://127.0.0.1:${server.httpPort}/v2/models/identity_fp32/ready`, {
        headers: { authorization: "Bearer inference-token" },
      });
      assert.equal(ready.status, 200, "the model was unloaded");
    });

    it("keeps inference on the inference tokens: a model-control token is not one", async () => {
      const insecure = credentials.createInsecure();
      assert.equal(await serverLive(server.grpcPort, insecure, withToken("inference-token")), null);
      assert.equal(
        (await serverLive(server.grpcPort, insecure, withToken("control-token")))?.code,
        status.UNAUTHENTICATED,
      );
    });
  });

  describe("message size", () => {
    let server: ServerProcess;
    before(async () => (server = await startServer(["--max-message-size", String(64 * 1024)])));
    after(async () => server?.stop());

    it("answers RESOURCE_EXHAUSTED for a request larger than --max-message-size", async () => {
      const big = inferRequest({
        modelName: "identity_fp32",
        inputs: [{ name: "INPUT0", datatype: "FP32", shape: [1n, 32768n], parameters: {}, contents: undefined }],
        rawInputContents: [new Uint8Array(4 * 32768)],
      });
      const error = await new Promise<ServiceError | null>((resolve) =>
        server.client.modelInfer(big, (failure) => resolve(failure)),
      );
      assert.equal(error?.code, status.RESOURCE_EXHAUSTED);
      assert.match(error?.details ?? "", /larger than max/);
    });
  });

  describe("start-up checks", () => {
    const files = new SecretFiles();
    before(async () => {
      const pem = await ca.issue("data plane", SERVER_NAMES);
      const stranger = await otherCa.issue("data plane", SERVER_NAMES);
      files.write({ "tls.crt": pem.certificate, "tls.key": stranger.privateKey, empty: "" });
    });
    after(() => files.remove());

    it("refuses to start with a key that does not match, a certificate without its key, or an empty token file", async () => {
      const mismatch = await dataPlaneFailing(tlsArgs(files));
      assert.equal(mismatch.code, 1);
      assert.match(mismatch.stderr, /TLS: .*tls\.key is not the private key of the certificate in .*tls\.crt/);
      const noKeyFile = await dataPlaneFailing(["--cert-file", files.path("tls.crt")]);
      assert.match(noKeyFile.stderr, /--cert-file \(DYNAMO_TLS_CERT\) needs --key-file \(DYNAMO_TLS_KEY\)/);
      const caAlone = await dataPlaneFailing(["--client-ca-file", files.path("tls.crt")]);
      assert.match(caAlone.stderr, /--client-ca-file \(DYNAMO_TLS_CLIENT_CA\) needs --cert-file and --key-file/);
      const tlsAlone = await dataPlaneFailing(["--use-tls"]);
      assert.match(tlsAlone.stderr, /--use-tls needs --cert-file and --key-file/);
      const empty = await dataPlaneFailing(["--auth-token-file", files.path("empty")]);
      assert.match(empty.stderr, /empty holds no token/);
    });
  });
});

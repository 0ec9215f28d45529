import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import type { V1Deployment, V1Secret, V1Service } from "@kubernetes/client-node";
import { GRPCInferenceServiceClient } from "../../../proto/gen/ts/grpc_service.js";
import { createTestCa } from "../../../e2e/support/certificates.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { startServer } from "../../../dataplane/test/fixtures/server.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject } from "../fixtures/kube.js";
import { useOperator } from "../fixtures/operator.js";
import { upstreamCrdFile, type TestCluster } from "../../../e2e/cluster/cluster.js";
import type { Certificate } from "../../src/resources/certificate-request.js";

const text = (secret: V1Secret, key: string): string => Buffer.from(secret.data![key]!, "base64").toString("utf8");
const secretOf = (namespace: string, name: string, type: string, data: Record<string, string>): V1Secret => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name, namespace },
  type,
  data: Object.fromEntries(Object.entries(data).map(([key, value]) => [key, Buffer.from(value).toString("base64")])),
});

describe("TLS and token Secrets (real API server, and a data plane serving the issued certificate)", function () {
  this.timeout(180_000);
  const suite = useOperator("tls", [
    // Short-lived certificates, so renewal happens while the test watches.
    "--self-signed-validity-secs",
    "40",
    "--self-signed-renew-before-secs",
    "32",
  ]);
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let namespace: string;
  before(() => ({ cluster, kube, namespace } = suite));

  const model = (name: string) =>
    kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, name);
  const secret = (name: string) => kube.read<V1Secret>("v1", "Secret", namespace, name);

  it("waits for the token Secret (CredentialsReady=False, not Ready), then issues a CA and a serving certificate", async () => {
    await kube.create(
      modelObject(namespace, "secure", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        tls: { mode: "SelfSigned" },
        auth: { tokenSecretRef: { name: "tokens" } },
      }),
    );
    await eventually(async () => {
      const live = await model("secure");
      assert.equal(conditionOf(live, "CredentialsReady")?.reason, "TokenSecretNotFound");
      assert.equal(conditionOf(live, "Ready")?.status, "False");
    }, 30_000);
    await kube.create(secretOf(namespace, "tokens", "Opaque", { tokens: "# serving tokens\nfirst-token\n" }));
    await eventually(
      async () => assert.equal(conditionOf(await model("secure"), "CredentialsReady")?.status, "True"),
      30_000,
    );
    const live = await model("secure");
    assert.equal(live.status?.tls?.secretName, "secure-tls");
    assert.ok(live.status?.tls?.notAfter);
    const tls = await secret("secure-tls");
    assert.equal(tls.type, "kubernetes.io/tls");
    assert.equal(text(tls, "ca.crt"), text(await secret("secure-ca"), "ca.crt"));
    const deployment = await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "secure");
    const pod = deployment.spec!.template.spec!;
    const container = pod.containers[0]!;
    for (const arg of [
      "--use-tls",
      "/etc/dynamo-kserve/tls/tls.crt",
      "/etc/dynamo-kserve/tls/tls.key",
      "/etc/dynamo-kserve/auth/tokens",
    ]) {
      assert.ok(container.args?.includes(arg), `${arg} in ${container.args?.join(" ")}`);
    }
    assert.deepEqual(
      { ...container.readinessProbe?.httpGet },
      { path: "/v2/health/ready", port: "metrics", scheme: "HTTP" },
    );
    assert.deepEqual(
      pod.volumes?.filter((volume) => volume.secret !== undefined).map((volume) => volume.secret?.secretName),
      ["secure-tls", "tokens"],
    );
    const service = await kube.read<V1Service>("v1", "Service", namespace, "secure");
    assert.equal(service.spec?.ports?.find((port) => port.name === "grpc")?.appProtocol, "https");
  });

  it("issues a certificate whose SANs are the Service's names: a data plane serving it passes a TLS handshake by that name", async () => {
    const tls = await secret("secure-tls");
    const dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-issued-"));
    writeFileSync(join(dir, "tls.crt"), text(tls, "tls.crt"));
    writeFileSync(join(dir, "tls.key"), text(tls, "tls.key"));
    writeFileSync(join(dir, "tokens"), text(await secret("tokens"), "tokens"));
    const server = await startServer([
      "--use-tls",
      "--cert-file",
      join(dir, "tls.crt"),
      "--key-file",
      join(dir, "tls.key"),
      "--auth-token-file",
      join(dir, "tokens"),
    ]);
    const live = (serverName: string): Promise<ServiceError | null> => {
      const client = new GRPCInferenceServiceClient(
        `127.0.0.1:${server.grpcPort}`,
        credentials.createSsl(Buffer.from(text(tls, "ca.crt"))),
        { "grpc.ssl_target_name_override": serverName, "grpc.default_authority": serverName },
      );
      const metadata = new Metadata();
      metadata.set("authorization", "Bearer first-token");
      return new Promise((resolve) =>
        client.serverLive({}, metadata, { deadline: Date.now() + 5000 }, (error) => {
          client.close();
          resolve(error);
        }),
      );
    };
    try {
      assert.equal(await live(`secure.${namespace}.svc`), null);
      assert.equal(await live(`secure.${namespace}.svc.cluster.local`), null);
      assert.notEqual(await live("somebody-else.example"), null, "a name not in the SANs is refused");
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("renews the serving certificate before it expires, with the same CA", async () => {
    const before = await secret("secure-tls");
    const ca = text(await secret("secure-ca"), "ca.crt");
    await eventually(
      async () => {
        const after = await secret("secure-tls");
        assert.notEqual(text(after, "tls.crt"), text(before, "tls.crt"));
        assert.equal(text(after, "ca.crt"), ca);
      },
      30_000,
      500,
    );
    assert.equal(text(await secret("secure-ca"), "ca.crt"), ca);
  });

  it("uses a user's kubernetes.io/tls Secret once it exists", async () => {
    await kube.create(
      modelObject(namespace, "byo", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        tls: { mode: "Secret", secretName: "byo-cert" },
      }),
    );
    await eventually(
      async () => assert.equal(conditionOf(await model("byo"), "CredentialsReady")?.reason, "SecretNotFound"),
      30_000,
    );
    const testCa = await createTestCa();
    const pem = await testCa.issue("byo", { dns: [`byo.${namespace}.svc`] });
    await kube.create(
      secretOf(namespace, "byo-cert", "kubernetes.io/tls", { "tls.crt": pem.certificate, "tls.key": pem.privateKey }),
    );
    await eventually(async () => {
      const live = await model("byo");
      assert.equal(conditionOf(live, "CredentialsReady")?.status, "True");
      assert.equal(live.status?.tls?.secretName, "byo-cert");
    }, 30_000);
  });

  it("says a user's TLS Secret needs ca.crt when the model scales to zero (the activator checks the pods' certificate against it)", async () => {
    const testCa = await createTestCa();
    const pem = await testCa.issue("byo-zero", { dns: [`byo-zero.${namespace}.svc`] });
    await kube.create(
      secretOf(namespace, "byo-zero-cert", "kubernetes.io/tls", {
        "tls.crt": pem.certificate,
        "tls.key": pem.privateKey,
      }),
    );
    await kube.create(
      modelObject(namespace, "byo-zero", {
        modelConfig: { inline: IDENTITY_CONFIG },
        monitoring: {},
        autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 2, targetWaitingRequests: 2 },
        tls: { mode: "Secret", secretName: "byo-zero-cert" },
      }),
    );
    await eventually(async () => {
      const condition = conditionOf(await model("byo-zero"), "CredentialsReady");
      assert.equal(condition?.reason, "SecretInvalid", JSON.stringify(condition));
      assert.match(condition?.message ?? "", /ca\.crt/);
      assert.match(condition?.message ?? "", /minReplicas 0/);
    }, 30_000);
  });

  it("tls.mode CertManager: waits for cert-manager, requests a Certificate for the Service names, uses the Secret it fills, and says it needs ca.crt when the model scales to zero; removes the Certificate when the mode changes", async () => {
    await kube.create(
      modelObject(namespace, "cm", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        tls: { mode: "CertManager", issuerRef: { name: "ca-issuer", kind: "ClusterIssuer" } },
      }),
    );
    await eventually(async () => {
      assert.equal(conditionOf(await model("cm"), "CredentialsReady")?.reason, "CertManagerNotInstalled");
    }, 30_000);
    await cluster.installCrdFile(upstreamCrdFile("certificates"));
    try {
      const certificate = await eventually(
        () => kube.read<Certificate>("cert-manager.io/v1", "Certificate", namespace, "cm-tls"),
        30_000,
      );
      assert.deepEqual(certificate.spec, {
        secretName: "cm-tls",
        dnsNames: ["cm", `cm.${namespace}`, `cm.${namespace}.svc`, `cm.${namespace}.svc.cluster.local`],
        issuerRef: { name: "ca-issuer", kind: "ClusterIssuer", group: "cert-manager.io" },
        privateKey: { algorithm: "ECDSA", size: 256, rotationPolicy: "Always" },
        usages: ["server auth", "digital signature"],
      });
      await eventually(async () => {
        assert.equal(conditionOf(await model("cm"), "CredentialsReady")?.reason, "CertificatePending");
      }, 30_000);
      // What cert-manager's controller would do (it does not run here): fill the Secret.
      const issuer = await createTestCa();
      const pem = await issuer.issue("cm", { dns: certificate.spec.dnsNames });
      await kube.create(
        secretOf(namespace, "cm-tls", "kubernetes.io/tls", { "tls.crt": pem.certificate, "tls.key": pem.privateKey }),
      );
      await eventually(async () => {
        const live = await model("cm");
        assert.equal(conditionOf(live, "CredentialsReady")?.status, "True");
        assert.equal(live.status?.tls?.secretName, "cm-tls");
      }, 30_000);
      // At zero the activator checks the pods' certificate against ca.crt, which some issuers
      // (ACME) leave out of the Secret: the model says so rather than run an activator that cannot start.
      const atZero = {
        ...modelObject(namespace, "cm", {} as DynamoKserveModel["spec"]),
        spec: {
          replicas: null,
          monitoring: {},
          autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 2, targetWaitingRequests: 2 },
        },
      };
      await kube.mergePatch(atZero);
      await eventually(async () => {
        const condition = conditionOf(await model("cm"), "CredentialsReady");
        assert.equal(condition?.reason, "SecretInvalid", JSON.stringify(condition));
        assert.match(condition?.message ?? "", /cm-tls needs the key ca\.crt/);
        assert.match(condition?.message ?? "", /issuer/);
      }, 30_000);
      await kube.mergePatch({
        ...secretOf(namespace, "cm-tls", "kubernetes.io/tls", {
          "tls.crt": pem.certificate,
          "tls.key": pem.privateKey,
          "ca.crt": issuer.certificate,
        }),
        metadata: { name: "cm-tls", namespace },
      });
      await eventually(async () => {
        assert.equal(conditionOf(await model("cm"), "CredentialsReady")?.status, "True");
      }, 30_000);
      // Moving away from CertManager: the Certificate the model no longer wants is pruned
      // (cert-manager would otherwise keep renewing it into the Secret).
      const withoutTls = { ...modelObject(namespace, "cm", {} as DynamoKserveModel["spec"]), spec: { tls: null } };
      await kube.mergePatch(withoutTls);
      await eventually(async () => {
        assert.equal(await kube.exists("cert-manager.io/v1", "Certificate", namespace, "cm-tls"), false);
        assert.equal(conditionOf(await model("cm"), "CredentialsReady"), undefined);
      }, 30_000);
    } finally {
      await cluster.deleteCrd("certificates.cert-manager.io");
    }
  });
});

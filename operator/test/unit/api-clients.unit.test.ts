import assert from "node:assert/strict";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { createTestCa } from "../../../e2e/support/certificates.js";
import { closeApiClients, makeApiClient, makeObjectsClient } from "../../src/kube/api-clients.js";

/** An HTTPS "API server" that answers every request with a Secret and counts TLS connections. */
async function fakeApiServer(pem: { certificate: string; privateKey: string }) {
  const seen = { connections: 0, authorizations: [] as (string | undefined)[], paths: [] as string[] };
  const server: Server = createServer({ cert: pem.certificate, key: pem.privateKey }, (request, response) => {
    seen.authorizations.push(request.headers.authorization);
    seen.paths.push(request.url ?? "");
    response.setHeader("content-type", "application/json");
    // The object client asks discovery once whether Secrets are namespaced.
    const body =
      request.url === "/api/v1"
        ? {
            kind: "APIResourceList",
            groupVersion: "v1",
            resources: [{ name: "secrets", kind: "Secret", namespaced: true }],
          }
        : { apiVersion: "v1", kind: "Secret", metadata: { name: "s", namespace: "ns" } };
    response.end(JSON.stringify(body));
  });
  server.on("secureConnection", () => seen.connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, seen, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function kubeConfigFor(url: string, caPem: string, namespace = "default"): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: "c", server: url, caData: Buffer.from(caPem).toString("base64") }],
    users: [{ name: "u", token: "the-token" }],
    contexts: [{ name: "x", cluster: "c", user: "u", namespace }],
    currentContext: "x",
  });
  return config;
}

describe("API clients: one pool of kept-alive connections per kubeconfig", () => {
  let ca: Awaited<ReturnType<typeof createTestCa>>;
  let api: Awaited<ReturnType<typeof fakeApiServer>>;

  before(async () => {
    ca = await createTestCa();
    api = await fakeApiServer(await ca.issue("apiserver", { ips: ["127.0.0.1"] }));
  });
  after(() => api.server.close());
  beforeEach(() => {
    api.seen.connections = 0;
    api.seen.authorizations = [];
    api.seen.paths = [];
  });

  it("sends 30 calls from three clients over one TLS connection, each with the user's token", async () => {
    const config = kubeConfigFor(api.url, ca.certificate);
    const core = makeApiClient(config, CoreV1Api);
    const objects = makeObjectsClient(config);
    try {
      for (let i = 0; i < 10; i++) {
        await core.readNamespacedSecret({ name: "s", namespace: "ns" });
        await makeApiClient(config, CoreV1Api).readNamespacedSecret({ name: "s", namespace: "ns" });
        await objects.read({ apiVersion: "v1", kind: "Secret", metadata: { name: "s", namespace: "ns" } });
      }
    } finally {
      closeApiClients(config);
    }
    const calls = api.seen.paths.filter((path) => path !== "/api/v1");
    assert.equal(calls.length, 30);
    assert.ok(api.seen.authorizations.every((header) => header === "Bearer the-token"));
    // client-node 1.x alone opens one connection (and TLS handshake) per call: 30 here.
    assert.equal(api.seen.connections, 1);
  });

  it("opens no more connections than calls in flight", async () => {
    const config = kubeConfigFor(api.url, ca.certificate);
    const core = makeApiClient(config, CoreV1Api);
    try {
      for (let round = 0; round < 3; round++) {
        await Promise.all(Array.from({ length: 4 }, () => core.readNamespacedSecret({ name: "s", namespace: "ns" })));
      }
    } finally {
      closeApiClients(config);
    }
    assert.equal(api.seen.authorizations.length, 12);
    assert.ok(api.seen.connections <= 4, `${api.seen.connections} connections`);
  });

  it("still verifies the API server against the kubeconfig's CA", async () => {
    const stranger = await createTestCa("another CA");
    const config = kubeConfigFor(api.url, stranger.certificate);
    try {
      await assert.rejects(makeApiClient(config, CoreV1Api).readNamespacedSecret({ name: "s", namespace: "ns" }));
    } finally {
      closeApiClients(config);
    }
    assert.equal(api.seen.authorizations.length, 0, "no request reached the server");
  });

  it("gives object clients the context's namespace as default", async () => {
    const config = kubeConfigFor(api.url, ca.certificate, "team-a");
    try {
      await makeObjectsClient(config).read({ apiVersion: "v1", kind: "Secret", metadata: { name: "s" } });
    } finally {
      closeApiClients(config);
    }
    assert.ok(
      api.seen.paths.some((path) => path.startsWith("/api/v1/namespaces/team-a/secrets/s")),
      api.seen.paths.join(", "),
    );
  });
});

import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { testCluster } from "../../e2e/cluster/mocha-global.js";
import { eventually } from "../../e2e/support/eventually.js";
import { startCli } from "../../e2e/support/process.js";
import { scrape, valueOf } from "../../e2e/support/prometheus.js";
import { CLI } from "../../dataplane/test/fixtures/paths.js";
import { KubeTestClient } from "../../operator/test/fixtures/kube.js";

const SELECTOR = { "dynamokserve.dev/model": "m" };

/** A pod bound to a node nobody runs (no kubelet, no kwok): its status is what the test writes. */
function pod(namespace: string, name: string, labels: Record<string, string>): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels },
    spec: { nodeName: "nobody-runs-this-node", containers: [{ name: "dataplane", image: "dynamo-kserve:test" }] },
  };
}

describe("activator: the pod watch against a real API server, and SIGTERM", function () {
  this.timeout(120_000);

  it("is ready only while no selected pod is Ready (with an IP, not deleted); on SIGTERM keeps a held request until its time is up, then exits 0", async function () {
    const cluster = testCluster(this);
    const kube = new KubeTestClient(cluster.adminConfig());
    const core = cluster.adminConfig().makeApiClient(CoreV1Api);
    const namespace = await kube.createNamespace("activator");
    const setReady = async (name: string, ready: boolean): Promise<void> => {
      const current = await core.readNamespacedPod({ name, namespace });
      current.status = {
        phase: "Running",
        podIP: "127.0.0.1",
        podIPs: [{ ip: "127.0.0.1" }],
        conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
      };
      await core.replaceNamespacedPodStatus({ name, namespace, body: current });
    };
    const activator = await startCli(
      CLI,
      [
        "activator",
        ...["--kubeconfig", cluster.adminKubeconfig, "--namespace", namespace],
        ...["--pod-selector", "dynamokserve.dev/model=m", "--host", "127.0.0.1"],
        ...["--grpc-port", "0", "--http-port", "0", "--metrics-port", "0", "--scaler-port", "0"],
        ...["--hold-timeout-secs", "3"],
      ],
      "activator listening",
    );
    try {
      const readyz = async (): Promise<number> =>
        (await fetch(`http://127.0.0.1:${activator.ready["metricsPort"] as number}/readyz`)).status;
      assert.equal(await readyz(), 200, "synced, no pod: the Service should route here");
      await kube.create(pod(namespace, "m-0", SELECTOR));
      await kube.create(pod(namespace, "other-0", { "dynamokserve.dev/model": "other" }));
      await setReady("other-0", true);
      await setReady("m-0", false);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(await readyz(), 200, "a pod that is not Ready, and another model's Ready pod, change nothing");
      await setReady("m-0", true);
      await eventually(async () => assert.equal(await readyz(), 503));
      await setReady("m-0", false);
      await eventually(async () => assert.equal(await readyz(), 200));
      await setReady("m-0", true);
      await eventually(async () => assert.equal(await readyz(), 503));
      await kube.delete(pod(namespace, "m-0", SELECTOR) as V1Pod & { metadata: { name: string } });
      await eventually(async () => assert.equal(await readyz(), 200));

      const held = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = httpRequest(
          {
            host: "127.0.0.1",
            port: activator.ready["httpPort"] as number,
            method: "POST",
            path: "/v2/models/m/infer",
          },
          (response) => {
            let body = "";
            response.on("data", (chunk: Buffer) => (body += chunk.toString()));
            response.on("end", () => resolve({ status: response.statusCode!, body }));
          },
        );
        request.on("error", reject);
        request.end("{}");
      });
      const metrics = `http://127.0.0.1:${activator.ready["metricsPort"] as number}/metrics`;
      await eventually(async () => assert.equal(valueOf(await scrape(metrics), "dynamo_activator_held_requests"), 1));
      const exited = activator.stop("SIGTERM");
      const reply = await held;
      assert.equal(reply.status, 504, reply.body);
      assert.match(reply.body, /scaled to zero/);
      assert.equal(await exited, 0);
    } finally {
      await activator.stop("SIGKILL");
    }
  });
});

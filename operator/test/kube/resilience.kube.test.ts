import assert from "node:assert/strict";
import type { V1Deployment } from "@kubernetes/client-node";
import { testCluster } from "../../../e2e/cluster/mocha-global.js";
import type { TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject } from "../fixtures/kube.js";
import { startOperatorProcess, type OperatorProcess } from "../fixtures/operator.js";

describe("operator resilience and scale (real API server)", function () {
  this.timeout(300_000);
  let cluster: TestCluster;
  let kube: KubeTestClient;

  before(function () {
    cluster = testCluster(this);
    kube = new KubeTestClient(cluster.adminConfig());
  });

  describe("an API server restart", () => {
    let namespace: string;
    let operator: OperatorProcess;

    before(async () => {
      namespace = await kube.createNamespace("restart");
      operator = await startOperatorProcess(cluster.operatorKubeconfig, ["--namespace", namespace]);
    });

    after(async () => {
      await operator?.stop();
    });

    it("reconciles changes made after the API server comes back, without an operator restart", async () => {
      await kube.create(modelObject(namespace, "a", { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG } }));
      await eventually(() => kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "a"));
      await cluster.stopApiServer();
      await new Promise((resolve) => setTimeout(resolve, 3000));
      await cluster.startApiServer();
      await kube.mergePatch(modelObject(namespace, "a", { replicas: 2, modelConfig: { inline: IDENTITY_CONFIG } }));
      await kube.create(modelObject(namespace, "b", { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG } }));
      await eventually(async () => {
        assert.equal((await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "a")).spec?.replicas, 2);
        const b = await kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "b");
        assert.equal(conditionOf(b, "Ready")?.status, "True");
      }, 60_000);
      assert.equal(operator.process.exitCode, null, "the operator kept running");
      assert.ok(
        operator.logs.some((entry) => entry["msg"] === "watch failed; restarting"),
        "the operator noticed the outage and restarted its watches",
      );
    });
  });

  describe("200 models", () => {
    const COUNT = Number(process.env["DYNAMO_KSERVE_SCALE_MODELS"] ?? 200);
    let namespace: string;
    let operator: OperatorProcess;

    before(async () => {
      namespace = await kube.createNamespace("scale");
      operator = await startOperatorProcess(cluster.operatorKubeconfig, [
        "--namespace",
        namespace,
        "--resync-secs",
        "2",
      ]);
    });

    after(async () => {
      await operator?.stop();
    });

    it("reconciles them all to Ready, then makes zero writes in the steady state (with resyncs)", async () => {
      const started = Date.now();
      const mark = cluster.auditMark();
      for (let i = 0; i < COUNT; i++) {
        await kube.create(modelObject(namespace, `m${i}`, { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG } }));
      }
      await eventually(
        async () => {
          const list = await kube.api.list<DynamoKserveModel>(
            "dynamokserve.dev/v1alpha1",
            "DynamoKserveModel",
            namespace,
          );
          const ready = list.items.filter((model) => conditionOf(model, "Ready")?.status === "True").length;
          assert.equal(ready, COUNT, `${ready}/${COUNT} ready`);
        },
        240_000,
        1000,
      );
      const writes = cluster.operatorWrites(mark).filter((event) => event.objectRef?.namespace === namespace);
      console.log(
        `      ${COUNT} models Ready in ${((Date.now() - started) / 1000).toFixed(1)} s; ` +
          `${(writes.length / COUNT).toFixed(2)} operator writes per model`,
      );
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const steady = cluster.auditMark();
      await new Promise((resolve) => setTimeout(resolve, 5000));
      assert.deepEqual(cluster.operatorWrites(steady), [], "writes in the steady state");
      const metrics = await (await fetch(`http://127.0.0.1:${operator.httpPort}/metrics`)).text();
      const reconciles = Number(
        /controller_runtime_reconcile_total\{controller="dynamokservemodel",result="success"\} (\d+)/.exec(
          metrics,
        )?.[1],
      );
      assert.ok(reconciles >= COUNT * 2, `resyncs reconciled every model again (${reconciles} reconciles)`);
    });
  });
});

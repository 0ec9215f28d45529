import assert from "node:assert/strict";
import type { V1ConfigMap, V1Deployment, V1Service } from "@kubernetes/client-node";
import { testCluster } from "../../../e2e/cluster/mocha-global.js";
import { eventually } from "../../../e2e/support/eventually.js";
import type { DynamoKserveModel, DynamoKserveRepository } from "../../src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject, repositoryObject } from "../fixtures/kube.js";
import { OperatorMetrics } from "../../src/kube/metrics.js";
import { KubeWriter } from "../../src/kube/writer.js";
import { useOperator } from "../fixtures/operator.js";

/**
 * A DynamoKserveModel and a DynamoKserveRepository of the same name in one namespace both
 * want a Deployment and a Service of that name. The one that made them keeps them; the
 * other says NameTaken and writes nothing to them: no object flaps between the two.
 */
describe("one name, two owners: a DynamoKserveModel and a DynamoKserveRepository (real API server)", function () {
  this.timeout(90_000);
  const suite = useOperator("ownership");
  const GROUP_VERSION = "dynamokserve.dev/v1alpha1";

  it("the first keeps its objects, the second is Ready=False NameTaken, and nothing flaps", async () => {
    const { kube, namespace } = suite;
    await kube.create(modelObject(namespace, "same", { modelConfig: { inline: IDENTITY_CONFIG } }));
    await eventually(async () => {
      const service = await kube.read<V1Service>("v1", "Service", namespace, "same");
      assert.equal(service.metadata?.ownerReferences?.[0]?.kind, "DynamoKserveModel");
    });
    await kube.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "repo-configs", namespace },
      data: { "identity.pbtxt": IDENTITY_CONFIG },
    });
    await kube.create(repositoryObject(namespace, "same", { configMapRef: { name: "repo-configs" } }));
    const repository = await eventually(async () => {
      const current = await kube.read<DynamoKserveRepository>(
        GROUP_VERSION,
        "DynamoKserveRepository",
        namespace,
        "same",
      );
      assert.equal(conditionOf(current, "Ready")?.reason, "NameTaken", JSON.stringify(current.status));
      return current;
    }, 30_000);
    assert.match(conditionOf(repository, "Ready")!.message, /named same .*DynamoKserveModel same/);

    // Settled: over several resyncs and repository probes, the operator writes neither object
    // again (from the audit log: the Deployment's resourceVersion also moves with its status,
    // which the controller manager writes as the rollout ends, late under load).
    const mark = suite.cluster.auditMark();
    await new Promise((resolve) => setTimeout(resolve, 6000));
    const rewritten = suite.cluster
      .operatorWrites(mark)
      .filter(({ objectRef }) => objectRef?.namespace === namespace && objectRef.name === "same")
      .filter(({ objectRef }) => objectRef?.resource === "services" || objectRef?.resource === "deployments");
    assert.deepEqual(rewritten, [], "the Service or Deployment was written again");
    const service = await kube.read<V1Service>("v1", "Service", namespace, "same");
    assert.deepEqual(service.spec?.selector, { "dynamokserve.dev/model": "same" });
    const deployment = await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "same");
    assert.equal(deployment.metadata?.ownerReferences?.[0]?.kind, "DynamoKserveModel");
    const model = await kube.read<DynamoKserveModel>(GROUP_VERSION, "DynamoKserveModel", namespace, "same");
    assert.equal(conditionOf(model, "ConfigValid")?.status, "True");
    assert.notEqual(conditionOf(model, "Ready")?.reason, "NameTaken");
  });
});

/**
 * The prune deletes what the cache showed it. A cache lags: the object it holds may have
 * been deleted and made again under the same name by somebody else meanwhile. The delete
 * must reach only the object that was seen (its uid), never the newcomer.
 */
describe("the prune's delete reaches only the object it saw (real API server)", function () {
  this.timeout(60_000);
  let kube: KubeTestClient;
  let namespace: string;
  before(async function () {
    kube = new KubeTestClient(testCluster(this).adminConfig());
    namespace = await kube.createNamespace("prune-uid");
  });

  it("leaves alone an object made again under the same name since it was cached", async () => {
    const configMap = (data: string): V1ConfigMap & { metadata: { name: string; namespace: string } } => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "seen", namespace },
      data: { who: data },
    });
    const stale = await kube.create(configMap("ours"));
    await kube.delete(stale);
    const newcomer = await kube.create(configMap("a user's"));
    const metrics = new OperatorMetrics();
    await new KubeWriter(kube.config, metrics).remove(stale);
    assert.ok(await kube.exists("v1", "ConfigMap", namespace, "seen"), "the newcomer was deleted");
    const live = await kube.read<V1ConfigMap>("v1", "ConfigMap", namespace, "seen");
    assert.equal(live.metadata?.uid, newcomer.metadata?.uid);
    assert.equal(live.data?.["who"], "a user's");
  });
});

import assert from "node:assert/strict";
import type { V1Deployment, V1Service } from "@kubernetes/client-node";
import { eventually } from "../../../e2e/support/eventually.js";
import type { DynamoKserveModel, DynamoKserveRepository } from "../../src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, modelObject, repositoryObject } from "../fixtures/kube.js";
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

    // Settled: over several resyncs and repository probes, neither object is written again.
    const snapshot = async () => ({
      service: (await kube.read<V1Service>("v1", "Service", namespace, "same")).metadata?.resourceVersion,
      deployment: (await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "same")).metadata?.resourceVersion,
    });
    const before = await snapshot();
    await new Promise((resolve) => setTimeout(resolve, 6000));
    assert.deepEqual(await snapshot(), before, "the Service or Deployment was written again");
    const service = await kube.read<V1Service>("v1", "Service", namespace, "same");
    assert.deepEqual(service.spec?.selector, { "dynamokserve.dev/model": "same" });
    const deployment = await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "same");
    assert.equal(deployment.metadata?.ownerReferences?.[0]?.kind, "DynamoKserveModel");
    const model = await kube.read<DynamoKserveModel>(GROUP_VERSION, "DynamoKserveModel", namespace, "same");
    assert.equal(conditionOf(model, "ConfigValid")?.status, "True");
    assert.notEqual(conditionOf(model, "Ready")?.reason, "NameTaken");
  });
});

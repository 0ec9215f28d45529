import assert from "node:assert/strict";
import type { V1Deployment, V1Role, V1Service } from "@kubernetes/client-node";
import type { TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { Keda } from "../../../e2e/support/keda.js";
import { requirePlatform } from "../../../e2e/support/platform.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import type { ScaledObject } from "../../src/resources/scaled-object.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject } from "../fixtures/kube.js";
import { useOperator, type OperatorProcess } from "../fixtures/operator.js";

/**
 * autoscaling.class KEDA against the real API server and the real KEDA built from its Go
 * module (kwok pods): nothing written while KEDA is missing, then the ScaledObject and the
 * activator once it is installed (no restart); KEDA's verdict on a trigger whose Prometheus
 * cannot be reached read back into AutoscalerReady; the Service moved to the label the
 * activator shares only once every pod carries it, and back (with the activator pruned) when
 * scale to zero is turned off.
 */

/** A Prometheus nobody listens at: KEDA's trigger fails, as with a Prometheus that is down. */
const UNREACHABLE_PROMETHEUS = "http://127.0.0.1:1";

describe("autoscaling.class KEDA and scale to zero (real API server, real KEDA, kwok pods)", function () {
  this.timeout(300_000);
  const suite = useOperator("keda", ["--keda-prometheus-address", UNREACHABLE_PROMETHEUS]);
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let namespace: string;
  let operator: OperatorProcess;
  let keda: Keda | undefined;
  before(async function () {
    await requirePlatform(this, "keda");
    ({ cluster, kube, namespace, operator } = suite);
  });
  after(async () => {
    await keda?.stop();
  });

  const NAME = "to-zero";
  const model = () => kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, NAME);
  const exists = (apiVersion: string, kind: string, name: string) => kube.exists(apiVersion, kind, namespace, name);
  const service = () => kube.read<V1Service & { metadata: { name: string } }>("v1", "Service", namespace, NAME);
  const spec = (minReplicas: number) => ({
    modelConfig: { inline: IDENTITY_CONFIG },
    monitoring: {},
    autoscaling: {
      class: "KEDA" as const,
      minReplicas,
      maxReplicas: 3,
      targetWaitingRequests: 2,
      keda: { pollingIntervalSeconds: 2, cooldownSeconds: 30 },
    },
  });

  it("writes nothing of KEDA's while KEDA is not installed, and says so; the pods run", async () => {
    await kube.create(modelObject(namespace, NAME, spec(0)));
    await eventually(async () => {
      const current = await model();
      assert.equal(conditionOf(current, "AutoscalerReady")?.reason, "KEDANotInstalled");
      assert.equal(current.status?.autoscaler, "KEDA NotInstalled");
    }, 60_000);
    assert.ok(await exists("apps/v1", "Deployment", NAME));
    for (const kind of ["Deployment", "ServiceAccount", "Role", "RoleBinding", "Service"]) {
      const apiVersion = kind.startsWith("Role")
        ? "rbac.authorization.k8s.io/v1"
        : kind === "Deployment"
          ? "apps/v1"
          : "v1";
      assert.equal(await exists(apiVersion, kind, `${NAME}-activator`), false, `no activator ${kind}`);
    }
  });

  it("once KEDA is installed: the ScaledObject and the activator (a pods-only Role), without a restart; KEDA's failing trigger read back", async () => {
    keda = await Keda.start(cluster);
    await eventually(async () => {
      const scaled = await kube.read<ScaledObject>("keda.sh/v1alpha1", "ScaledObject", namespace, NAME);
      assert.equal(scaled.spec.minReplicaCount, 0);
      assert.deepEqual(scaled.spec.scaleTargetRef, { apiVersion: "apps/v1", kind: "Deployment", name: NAME });
      // Reached by the activator Service's cluster IP once it has one.
      const push = scaled.spec.triggers.find((trigger) => trigger.type === "external-push");
      const activatorService = await kube.read<V1Service & { metadata: { name: string } }>(
        "v1",
        "Service",
        namespace,
        `${NAME}-activator`,
      );
      assert.equal(push?.metadata["scalerAddress"], `${activatorService.spec?.clusterIP}:9090`);
    }, 90_000);
    const role = await kube.read<V1Role & { metadata: { name: string } }>(
      "rbac.authorization.k8s.io/v1",
      "Role",
      namespace,
      `${NAME}-activator`,
    );
    assert.deepEqual(JSON.parse(JSON.stringify(role.rules)), [
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
    ]);
    const activator = await kube.read<V1Deployment & { metadata: { name: string } }>(
      "apps/v1",
      "Deployment",
      namespace,
      `${NAME}-activator`,
    );
    assert.equal(activator.spec?.template.spec?.serviceAccountName, `${NAME}-activator`);
    // KEDA cannot reach the Prometheus: its Ready condition, read back with where the cause is.
    await eventually(async () => {
      const ready = conditionOf(await model(), "AutoscalerReady");
      assert.equal(ready?.reason, "TriggerFailing", JSON.stringify(ready));
      assert.match(ready?.message ?? "", /kubectl describe scaledobject to-zero/);
    }, 120_000);
    // KEDA's own HPA is not taken for one of ours (its labels exclude the operator's).
    assert.equal(operator.process.exitCode, null);
  });

  it("moves the Service to the label the activator shares once every pod carries it; turning scale to zero off moves it back and prunes the activator", async () => {
    await eventually(async () => {
      assert.deepEqual((await service()).spec?.selector, { "dynamokserve.dev/model-service": NAME });
    }, 90_000);
    const deployment = await kube.read<V1Deployment & { metadata: { name: string } }>(
      "apps/v1",
      "Deployment",
      namespace,
      NAME,
    );
    assert.equal(deployment.spec?.template.metadata?.labels?.["dynamokserve.dev/model-service"], NAME);
    assert.deepEqual(deployment.spec?.selector.matchLabels, { "dynamokserve.dev/model": NAME });

    await kube.mergePatch({ ...modelObject(namespace, NAME, spec(1)) });
    await eventually(async () => {
      assert.deepEqual((await service()).spec?.selector, { "dynamokserve.dev/model": NAME });
      for (const [apiVersion, kind] of [
        ["apps/v1", "Deployment"],
        ["v1", "Service"],
        ["v1", "ServiceAccount"],
        ["rbac.authorization.k8s.io/v1", "Role"],
        ["rbac.authorization.k8s.io/v1", "RoleBinding"],
      ] as const) {
        assert.equal(await exists(apiVersion, kind, `${NAME}-activator`), false, `activator ${kind} pruned`);
      }
      const scaled = await kube.read<ScaledObject>("keda.sh/v1alpha1", "ScaledObject", namespace, NAME);
      assert.equal(scaled.spec.minReplicaCount, 1);
      assert.equal(
        scaled.spec.triggers.find((trigger) => trigger.type === "external-push"),
        undefined,
      );
      // Written after the objects, in the same reconcile.
      assert.equal(conditionOf(await model(), "ScaledToZero"), undefined);
    }, 90_000);
  });
});

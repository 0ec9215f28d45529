import assert from "node:assert/strict";
import type { KubernetesObject, V1ConfigMap, V1Deployment, V1Service } from "@kubernetes/client-node";
import { upstreamCrdFile, type TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import type { DynamoKserveModel, DynamoKserveRepository } from "../../src/api/v1alpha1.js";
import type { InferencePool } from "../../src/resources/inference-pool.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject, repositoryObject } from "../fixtures/kube.js";
import { useOperator, type OperatorProcess } from "../fixtures/operator.js";

const POOL_API = "inference.networking.k8s.io/v1";
const POOL_CRD = "inferencepools.inference.networking.k8s.io";

describe("InferencePool (upstream Gateway API Inference Extension CRD, real API server)", function () {
  this.timeout(180_000);
  const suite = useOperator("pool");
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let namespace: string;
  let operator: OperatorProcess;
  before(() => ({ cluster, kube, namespace, operator } = suite));
  after(async () => {
    // Leave the cluster as the other suites expect it: the current InferencePool CRD.
    if (await cluster.hasCrd(POOL_CRD)) await cluster.deleteCrd(POOL_CRD);
    await cluster.installCrdFile(upstreamCrdFile("inferencepools"));
  });

  const model = () => kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "llm");
  const pool = (name: string) => kube.read<InferencePool>(POOL_API, "InferencePool", namespace, name);
  const service = (name: string) => kube.read<V1Service>("v1", "Service", namespace, name);
  const poolModel = () =>
    modelObject(namespace, "llm", {
      replicas: 1,
      modelConfig: { inline: IDENTITY_CONFIG },
      inferencePool: { endpointPickerRef: { name: "llm-epp", port: { number: 9002 } } },
    });

  it("serves an HTTP pool on the HTTP port when the model asks, and goes back to gRPC when it stops asking", async () => {
    await kube.create(
      modelObject(namespace, "chat", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        inferencePool: { protocol: "HTTP", endpointPickerRef: { name: "chat-epp", port: { number: 9002 } } },
      }),
    );
    const chat = () =>
      kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "chat");
    await eventually(async () => assert.equal((await chat()).status?.inferencePool?.appProtocol, "http"), 30_000);
    const created = await pool("chat");
    assert.deepEqual([created.spec.targetPorts, created.spec.appProtocol], [[{ number: 8000 }], "http"]);
    await eventually(async () =>
      assert.deepEqual(
        (await service("chat-pool")).spec?.ports?.map((port) => [port.name, port.port, port.appProtocol]),
        [["http", 8000, "http"]],
      ),
    );
    await kube.mergePatch(
      modelObject(namespace, "chat", {
        modelConfig: { inline: IDENTITY_CONFIG },
        inferencePool: { protocol: "gRPC", endpointPickerRef: { name: "chat-epp", port: { number: 9002 } } },
      }),
    );
    await eventually(async () => {
      assert.deepEqual((await pool("chat")).spec.targetPorts, [{ number: 8001 }]);
      assert.deepEqual(
        (await service("chat-pool")).spec?.ports?.map((port) => [port.name, port.port, port.appProtocol]),
        [["grpc", 8001, "kubernetes.io/h2c"]],
      );
    });
    await kube.delete(await chat());
  });

  it("creates the model's InferencePool (h2c) and a Service fronting it, and reports both", async () => {
    await kube.create(poolModel());
    await eventually(
      async () => assert.equal(conditionOf(await model(), "InferencePoolReady")?.status, "True"),
      30_000,
    );
    const created = await pool("llm");
    assert.deepEqual(created.spec, {
      selector: { matchLabels: { "dynamokserve.dev/model": "llm" } },
      targetPorts: [{ number: 8001 }],
      appProtocol: "kubernetes.io/h2c",
      endpointPickerRef: {
        group: "",
        kind: "Service",
        name: "llm-epp",
        port: { number: 9002 },
        failureMode: "FailClose",
      },
    });
    const live = await model();
    assert.equal(created.metadata.ownerReferences?.[0]?.uid, live.metadata.uid);
    assert.deepEqual(live.status?.inferencePool, {
      name: "llm",
      appProtocol: "kubernetes.io/h2c",
      service: "llm-pool",
    });
    assert.equal(conditionOf(live, "InferencePoolReady")?.reason, "Created");
    await eventually(async () => {
      const front = await service("llm-pool");
      assert.deepEqual(front.spec?.selector, { "dynamokserve.dev/model": "llm" });
      assert.deepEqual(
        front.spec?.ports?.map((port) => [port.name, port.port, port.targetPort, port.appProtocol]),
        [["grpc", 8001, 8001, "kubernetes.io/h2c"]],
      );
      assert.equal(front.metadata?.ownerReferences?.[0]?.kind, "InferencePool");
      assert.equal(front.metadata?.ownerReferences?.[0]?.uid, created.metadata.uid);
    });
  });

  it("gives a DynamoKserveRepository its own pool and Service; a model of the same name finds the pool's name taken", async () => {
    await kube.create(
      repositoryObject(namespace, "zoo", {
        configMapRef: { name: "zoo-configs" },
        inferencePool: { protocol: "HTTP", endpointPickerRef: { name: "zoo-epp", port: { number: 9002 } } },
      }),
    );
    const repository = () =>
      kube.read<DynamoKserveRepository>("dynamokserve.dev/v1alpha1", "DynamoKserveRepository", namespace, "zoo");
    await eventually(async () => {
      const current = await repository();
      assert.equal(conditionOf(current, "InferencePoolReady")?.status, "True");
      assert.deepEqual(current.status?.inferencePool, { name: "zoo", appProtocol: "http", service: "zoo-pool" });
    }, 30_000);
    const created = await pool("zoo");
    assert.deepEqual(created.spec, {
      selector: { matchLabels: { "dynamokserve.dev/repository": "zoo" } },
      targetPorts: [{ number: 8000 }],
      appProtocol: "http",
      endpointPickerRef: {
        group: "",
        kind: "Service",
        name: "zoo-epp",
        port: { number: 9002 },
        failureMode: "FailClose",
      },
    });
    await eventually(async () =>
      assert.deepEqual(
        (await service("zoo-pool")).spec?.ports?.map((port) => [port.name, port.port, port.appProtocol]),
        [["http", 8000, "http"]],
      ),
    );
    // The pool's name is the repository's: a model called the same cannot take it.
    await kube.create(
      modelObject(namespace, "zoo", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        inferencePool: { endpointPickerRef: { name: "zoo-epp", port: { number: 9002 } } },
      }),
    );
    const model = () =>
      kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "zoo");
    await eventually(async () => {
      const pooled = conditionOf(await model(), "InferencePoolReady");
      assert.deepEqual([pooled?.status, pooled?.reason], ["False", "NameTaken"]);
    }, 30_000);
    assert.deepEqual((await pool("zoo")).spec.selector, { matchLabels: { "dynamokserve.dev/repository": "zoo" } });
    // Dropping spec.inferencePool removes the repository's pool (the prune), and the model takes the name.
    await kube.mergePatch(
      repositoryObject(namespace, "zoo", { inferencePool: null } as unknown as DynamoKserveRepository["spec"]),
    );
    await eventually(async () => {
      assert.equal(conditionOf(await model(), "InferencePoolReady")?.status, "True");
      assert.deepEqual((await pool("zoo")).spec.selector, { matchLabels: { "dynamokserve.dev/model": "zoo" } });
      assert.equal(conditionOf(await repository(), "InferencePoolReady"), undefined);
    }, 30_000);
    await kube.delete(await model());
    await kube.delete(await repository());
  });

  it("fronts a user's pools too: http unless the pool says h2c", async () => {
    const userPool = (name: string, appProtocol?: string): InferencePool => ({
      apiVersion: POOL_API,
      kind: "InferencePool",
      metadata: { name, namespace },
      spec: {
        selector: { matchLabels: { app: name } },
        targetPorts: [{ number: 8000 }, { number: 8100 }],
        ...(appProtocol !== undefined ? { appProtocol } : {}),
        endpointPickerRef: { name: `${name}-epp`, port: { number: 9002 } },
      },
    });
    await kube.create(userPool("vllm"));
    await kube.create(userPool("triton", "kubernetes.io/h2c"));
    await eventually(async () => {
      const http = await service("vllm-pool");
      assert.deepEqual(http.spec?.selector, { app: "vllm" });
      assert.deepEqual(
        http.spec?.ports?.map((port) => [port.port, port.appProtocol]),
        [
          [8000, "http"],
          [8100, "http"],
        ],
      );
      const grpc = await service("triton-pool");
      assert.deepEqual(
        grpc.spec?.ports?.map((port) => port.appProtocol),
        ["kubernetes.io/h2c", "kubernetes.io/h2c"],
      );
    }, 30_000);
  });

  it("runs the endpoint picker for a pool that asks (endpointPicker), the pool naming its Service; somebody else's picker Deployment is NameTaken; a picker of the user's instead removes it all", async () => {
    const pickerObjects = [
      ["v1", "ServiceAccount"],
      ["rbac.authorization.k8s.io/v1", "Role"],
      ["rbac.authorization.k8s.io/v1", "RoleBinding"],
      ["v1", "ConfigMap"],
      ["v1", "Service"],
      ["apps/v1", "Deployment"],
    ] as const;
    const picked = (inferencePool: NonNullable<DynamoKserveModel["spec"]["inferencePool"]>) =>
      modelObject(namespace, "picked", { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG }, inferencePool });
    const live = () =>
      kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "picked");
    await cluster.installCrdFile(upstreamCrdFile("inferenceobjectives"));
    await kube.create(
      picked({ protocol: "HTTP", endpointPicker: { image: "registry.example/epp:test" }, objective: { priority: 10 } }),
    );
    await eventually(async () => {
      const condition = conditionOf(await live(), "InferencePoolReady");
      // The kube tier's nodes (kwok) report pods running: the picker's Deployment becomes available.
      assert.deepEqual([condition?.status, condition?.reason], ["True", "Created"]);
      assert.match(
        condition?.message ?? "",
        /endpoint picker picked-epp \(image registry\.example\/epp:test\) picks its pods/,
      );
      assert.equal((await live()).status?.inferencePool?.endpointPicker, "picked-epp");
      // The objective's CRD was installed just before the model: the first reconcile may not see it.
      assert.equal((await live()).status?.inferencePool?.objective, "picked");
    }, 30_000);
    const model = await live();
    for (const [apiVersion, kind] of pickerObjects) {
      const object = await kube.read<KubernetesObject>(apiVersion, kind, namespace, "picked-epp");
      assert.equal(object.metadata?.ownerReferences?.[0]?.uid, model.metadata.uid, kind);
    }
    assert.deepEqual((await pool("picked")).spec.endpointPickerRef, {
      group: "",
      kind: "Service",
      name: "picked-epp",
      port: { number: 9002 },
      failureMode: "FailClose",
    });
    const deployment = await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "picked-epp");
    assert.equal(deployment.spec?.template.spec?.containers[0]?.image, "registry.example/epp:test");
    assert.ok(deployment.spec?.template.spec?.containers[0]?.args?.includes("--pool-name=picked"));
    const objective = await kube.read<KubernetesObject & { spec: unknown }>(
      "inference.networking.x-k8s.io/v1alpha2",
      "InferenceObjective",
      namespace,
      "picked",
    );
    assert.deepEqual(objective.spec, {
      poolRef: { group: "inference.networking.k8s.io", kind: "InferencePool", name: "picked" },
      priority: 10,
    });
    assert.equal((await live()).status?.inferencePool?.objective, "picked");
    const config = await kube.read<V1ConfigMap>("v1", "ConfigMap", namespace, "picked-epp");
    assert.match(config.data?.["endpoint-picker.yaml"] ?? "", /dynamo_kserve_requests_waiting\{model="picked"\}/);

    // A picker of the user's instead: every object of the operator's picker goes, the pool names theirs.
    await kube.mergePatch(
      picked({
        protocol: "HTTP",
        endpointPicker: null,
        objective: null,
        endpointPickerRef: { name: "theirs", port: { number: 9002 } },
      } as unknown as NonNullable<DynamoKserveModel["spec"]["inferencePool"]>),
    );
    await eventually(async () => {
      assert.equal((await pool("picked")).spec.endpointPickerRef.name, "theirs");
      for (const [apiVersion, kind] of pickerObjects) {
        assert.equal(await kube.exists(apiVersion, kind, namespace, "picked-epp"), false, kind);
      }
      assert.equal(
        await kube.exists("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective", namespace, "picked"),
        false,
      );
      assert.equal(conditionOf(await live(), "InferencePoolReady")?.reason, "Created");
    }, 30_000);
    await kube.delete(await live());

    // Somebody else's Deployment holds the picker's name: NameTaken, and the pool is never pointed at it.
    await kube.create<V1Deployment>({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "taken-epp", namespace },
      spec: {
        selector: { matchLabels: { app: "theirs" } },
        template: {
          metadata: { labels: { app: "theirs" } },
          spec: { containers: [{ name: "epp", image: "theirs/epp" }] },
        },
      },
    });
    await kube.create(
      modelObject(namespace, "taken", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        inferencePool: { protocol: "HTTP", endpointPicker: {} },
      }),
    );
    const taken = () =>
      kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "taken");
    await eventually(async () => {
      const condition = conditionOf(await taken(), "InferencePoolReady");
      assert.deepEqual([condition?.status, condition?.reason], ["False", "NameTaken"]);
      assert.match(condition?.message ?? "", /a Deployment named taken-epp exists and is not managed by dynamo-kserve/);
    }, 30_000);
    assert.equal(await kube.exists(POOL_API, "InferencePool", namespace, "taken"), false);
    await kube.delete(await taken());
  });

  it("says CRDNotInstalled when the CRD goes, and uses an older CRD (no appProtocol) when it comes back, without a restart", async () => {
    await cluster.deleteCrd(POOL_CRD);
    await eventually(async () => {
      const condition = conditionOf(await model(), "InferencePoolReady");
      assert.equal(condition?.status, "False");
      assert.equal(condition?.reason, "CRDNotInstalled");
    }, 30_000);
    assert.equal(conditionOf(await model(), "Ready")?.status, "True", "the model itself still serves");
    await cluster.installCrdFile(upstreamCrdFile("inferencepools", true));
    await eventually(async () => {
      const live = await model();
      assert.equal(conditionOf(live, "InferencePoolReady")?.reason, "AppProtocolUnsupported");
      assert.equal(live.status?.inferencePool?.appProtocol, "");
      const recreated = await pool("llm");
      assert.equal(recreated.spec.appProtocol, undefined);
      assert.deepEqual(recreated.spec.targetPorts, [{ number: 8001 }]);
      // Our pods speak gRPC all the same: the Service still says so.
      assert.deepEqual(
        (await service("llm-pool")).spec?.ports?.map((port) => port.appProtocol),
        ["kubernetes.io/h2c"],
      );
    }, 60_000);
    assert.equal(operator.process.exitCode, null, "the operator kept running");
  });

  it("deletes the pool when the model stops asking for one", async () => {
    await kube.mergePatch({ ...poolModel(), spec: { inferencePool: null } } as unknown as KubernetesObject & {
      metadata: { name: string; namespace: string };
    });
    await eventually(async () => {
      assert.equal(await kube.exists(POOL_API, "InferencePool", namespace, "llm"), false);
      const live = await model();
      assert.equal(conditionOf(live, "InferencePoolReady"), undefined);
      assert.equal(live.status?.inferencePool, undefined);
    }, 30_000);
  });
});

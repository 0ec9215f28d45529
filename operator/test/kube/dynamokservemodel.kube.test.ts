import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type {
  V1ConfigMap,
  V1Deployment,
  V1PodDisruptionBudget,
  V1Service,
  V2HorizontalPodAutoscaler,
} from "@kubernetes/client-node";
import { testCluster } from "../../../e2e/cluster/mocha-global.js";
import type { TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject } from "../fixtures/kube.js";
import { startOperatorProcess, TEST_DATAPLANE_IMAGE, type OperatorProcess } from "../fixtures/operator.js";

const DKM = ["dynamokserve.dev/v1alpha1", "DynamoKserveModel"] as const;

describe("DynamoKserveModel operator (real API server, controller-manager, scheduler, kwok)", function () {
  this.timeout(60_000);
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let namespace: string;
  let operator: OperatorProcess;

  const readModel = (name: string) => kube.read<DynamoKserveModel>(...DKM, namespace, name);
  const readDeployment = (name: string) => kube.read<V1Deployment>("apps/v1", "Deployment", namespace, name);
  const waitForCondition = (name: string, type: string, status: string) =>
    eventually(async () => {
      const model = await readModel(name);
      const condition = conditionOf(model, type);
      assert.equal(condition?.status, status, `${type}: ${JSON.stringify(condition)}`);
      return model;
    }, 30_000);

  before(async function () {
    cluster = testCluster(this);
    kube = new KubeTestClient(cluster.adminConfig());
    namespace = await kube.createNamespace("dkm");
    operator = await startOperatorProcess(cluster.operatorKubeconfig, ["--namespace", namespace]);
  });

  after(async () => {
    await operator?.stop();
  });

  it("creates the Deployment, Service and ConfigMap with the exact fields, owned by the model", async () => {
    const created = await kube.create(
      modelObject(namespace, "ident", { replicas: 2, modelConfig: { inline: IDENTITY_CONFIG } }),
    );
    const deployment = await eventually(() => readDeployment("ident"));
    const owner = deployment.metadata?.ownerReferences?.[0];
    assert.deepEqual(
      [owner?.kind, owner?.name, owner?.uid, owner?.controller],
      ["DynamoKserveModel", "ident", created.metadata?.uid, true],
    );
    assert.equal(deployment.spec?.replicas, 2);
    const pod = deployment.spec!.template.spec!;
    const container = pod.containers[0]!;
    assert.equal(container.image, TEST_DATAPLANE_IMAGE);
    assert.deepEqual(container.args, [
      "dataplane",
      "--model-repository",
      "/models",
      "--grpc-port",
      "8001",
      "--http-port",
      "8000",
      "--metrics-port",
      "8002",
      "--shutdown-grace-secs",
      "30",
      "--drain-delay-secs",
      "5",
      "--variant",
      "stable",
      "--log-level",
      "info",
    ]);
    // SIGKILL only after the drain delay, the grace period and 5 s to close engines.
    assert.equal(pod.terminationGracePeriodSeconds, 40);
    assert.deepEqual({ ...container.readinessProbe?.grpc }, { port: 8001, service: "inference.GRPCInferenceService" });
    assert.equal(container.livenessProbe?.grpc?.port, 8001);
    assert.deepEqual(container.securityContext?.capabilities?.drop, ["ALL"]);
    assert.equal(container.securityContext?.readOnlyRootFilesystem, true);
    assert.equal(container.securityContext?.allowPrivilegeEscalation, false);
    assert.equal(pod.securityContext?.runAsNonRoot, true);
    assert.equal(pod.securityContext?.seccompProfile?.type, "RuntimeDefault");
    assert.equal(pod.volumes?.[0]?.configMap?.name, "ident-model-config");

    const service = await kube.read<V1Service>("v1", "Service", namespace, "ident");
    assert.deepEqual(
      service.spec?.ports?.map((port) => [port.name, port.port, port.appProtocol]),
      [
        ["grpc", 8001, "kubernetes.io/h2c"],
        ["http", 8000, "http"],
        ["metrics", 8002, "http"],
      ],
    );
    assert.deepEqual(service.spec?.selector, { "dynamokserve.dev/model": "ident" });
    const configMap = await kube.read<V1ConfigMap>("v1", "ConfigMap", namespace, "ident-model-config");
    assert.deepEqual(configMap.data, { "ident.pbtxt": IDENTITY_CONFIG });
  });

  it("reports Ready with endpoint and printer columns once kwok makes the pods Ready", async () => {
    await waitForCondition("ident", "Ready", "True");
    // Ready needs one serving pod; wait for the second too before reading the rest.
    const model = await eventually(async () => {
      const current = await readModel("ident");
      assert.equal(current.status?.readyReplicas, 2);
      return current;
    });
    assert.equal(model.status?.endpoint, `ident.${namespace}.svc:8001`);
    assert.equal(model.status?.httpEndpoint, `http://ident.${namespace}.svc:8000`);
    assert.equal(model.status?.backend, "identity");
    assert.equal(model.status?.observedGeneration, model.metadata.generation);
    assert.equal(conditionOf(model, "ConfigValid")?.reason, "Valid");
    assert.equal(conditionOf(model, "Available")?.status, "True");
    assert.equal(conditionOf(model, "Degraded")?.status, "False");
    const table = await cluster.request(
      "GET",
      `/apis/dynamokserve.dev/v1alpha1/namespaces/${namespace}/dynamokservemodels/ident`,
      undefined,
      "application/json;as=Table;v=v1;g=meta.k8s.io",
    );
    const parsed = JSON.parse(table.body) as { columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
    const columns = parsed.columnDefinitions.map((column) => column.name);
    // HTTP, Replicas and Canary are wide columns (kubectl get dkm -o wide).
    assert.deepEqual(columns, [
      "Name",
      "Ready",
      "Model",
      "Backend",
      "Endpoint",
      "HTTP",
      "Replicas",
      "Autoscaler",
      "Canary",
      "Age",
    ]);
    assert.deepEqual(parsed.rows[0]?.cells.slice(0, 5), [
      "ident",
      "True",
      "ident",
      "identity",
      `ident.${namespace}.svc:8001`,
    ]);
  });

  it("updates the owned objects when the model is edited", async () => {
    await kube.mergePatch({
      ...modelObject(namespace, "ident", { replicas: 3, logLevel: "debug", modelConfig: { inline: IDENTITY_CONFIG } }),
    });
    await eventually(async () => {
      const deployment = await readDeployment("ident");
      assert.equal(deployment.spec?.replicas, 3);
      assert.ok(deployment.spec?.template.spec?.containers[0]?.args?.includes("debug"));
    });
    await eventually(async () => {
      const model = await readModel("ident");
      assert.equal(model.status?.observedGeneration, model.metadata.generation);
      assert.equal(model.status?.readyReplicas, 3);
      assert.equal(conditionOf(model, "Ready")?.status, "True");
    }, 30_000);
  });

  it("corrects drift on the Deployment", async () => {
    await kube.mergePatch(
      {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "ident", namespace },
        spec: { template: { spec: { containers: [{ name: "dataplane", image: "someone-else:1" }] } } },
      } as never,
      "someone-else",
    );
    await eventually(async () =>
      assert.equal((await readDeployment("ident")).spec?.template.spec?.containers[0]?.image, TEST_DATAPLANE_IMAGE),
    );
  });

  it("rejects a bad config with ConfigValid=False (file, line, field) and leaves the Deployment untouched", async () => {
    const before = await readDeployment("ident");
    const broken = `${IDENTITY_CONFIG}max_batch_sise: 4\n`;
    await kube.mergePatch(modelObject(namespace, "ident", { modelConfig: { inline: broken } }));
    const model = await waitForCondition("ident", "ConfigValid", "False");
    const condition = conditionOf(model, "ConfigValid")!;
    assert.equal(condition.reason, "InvalidConfig");
    assert.match(condition.message, /^spec\.modelConfig\.inline:5: .*max_batch_sise/);
    assert.equal(conditionOf(model, "Ready")?.status, "False");
    assert.equal(conditionOf(model, "Degraded")?.reason, "ServingLastValidConfig");
    const after = await readDeployment("ident");
    assert.equal(after.metadata?.generation, before.metadata?.generation);
    const configMap = await kube.read<V1ConfigMap>("v1", "ConfigMap", namespace, "ident-model-config");
    assert.deepEqual(configMap.data, { "ident.pbtxt": IDENTITY_CONFIG });
    await kube.mergePatch(modelObject(namespace, "ident", { modelConfig: { inline: IDENTITY_CONFIG } }));
    await waitForCondition("ident", "ConfigValid", "True");
  });

  it("follows a user's ConfigMap named by configMapRef, and says when it is missing", async () => {
    await kube.create(modelObject(namespace, "from-cm", { modelConfig: { configMapRef: { name: "user-config" } } }));
    const missing = await waitForCondition("from-cm", "ConfigValid", "False");
    assert.equal(conditionOf(missing, "ConfigValid")?.reason, "ConfigMapNotFound");
    assert.equal(await kube.exists("apps/v1", "Deployment", namespace, "from-cm"), false);
    await kube.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "user-config", namespace },
      data: { "config.pbtxt": IDENTITY_CONFIG },
    });
    await waitForCondition("from-cm", "Ready", "True");
    const edited = IDENTITY_CONFIG.replace("max_batch_size: 8", "max_batch_size: 16");
    await kube.mergePatch({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "user-config", namespace },
      data: { "config.pbtxt": edited },
    } as never);
    await eventually(async () => {
      const owned = await kube.read<V1ConfigMap>("v1", "ConfigMap", namespace, "from-cm-model-config");
      assert.equal(owned.data?.["from-cm.pbtxt"], edited);
    });
  });

  it("records Events for condition changes", async () => {
    await eventually(async () => {
      const events = await cluster.request("GET", `/api/v1/namespaces/${namespace}/events`);
      const items = (
        JSON.parse(events.body) as { items: { involvedObject: { name: string }; reason: string; type: string }[] }
      ).items;
      const forIdent = items
        .filter((event) => event.involvedObject.name === "ident")
        .map((event) => `${event.type}/${event.reason}`);
      assert.ok(forIdent.includes("Normal/Valid"), forIdent.join(", "));
      assert.ok(forIdent.includes("Warning/InvalidConfig"), forIdent.join(", "));
      assert.ok(forIdent.includes("Normal/Ready"), forIdent.join(", "));
    });
  });

  it("leaves replicas to another owner when spec.replicas is unset", async () => {
    await kube.create(modelObject(namespace, "scaled", { modelConfig: { inline: IDENTITY_CONFIG } }));
    await waitForCondition("scaled", "Ready", "True");
    await kube.mergePatch(
      {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "scaled", namespace },
        spec: { replicas: 4 },
      } as never,
      "autoscaler",
    );
    await eventually(async () => assert.equal((await readModel("scaled")).status?.readyReplicas, 4));
    assert.equal((await readDeployment("scaled")).spec?.replicas, 4);
    // The count is the autoscaler's: a budget keeps drains to one pod at a time.
    assert.equal(await kube.exists("policy/v1", "PodDisruptionBudget", namespace, "scaled"), true);
  });

  it("scales through the scale subresource (kubectl scale dkm), which reports the pods' selector", async () => {
    await kube.create(modelObject(namespace, "scalable", { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG } }));
    await waitForCondition("scalable", "Ready", "True");
    cluster.kubectl("scale", "dkm", "scalable", "-n", namespace, "--replicas", "3");
    await eventually(async () => assert.equal((await readModel("scalable")).status?.readyReplicas, 3));
    assert.equal((await readModel("scalable")).spec.replicas, 3);
    assert.equal((await readDeployment("scalable")).spec?.replicas, 3);
    const scale = JSON.parse(
      cluster.kubectl(
        "get",
        "--raw",
        `/apis/dynamokserve.dev/v1alpha1/namespaces/${namespace}/dynamokservemodels/scalable/scale`,
      ),
    ) as { spec: { replicas: number }; status: { replicas: number; selector: string } };
    assert.deepEqual(scale.spec, { replicas: 3 });
    assert.deepEqual(scale.status, { replicas: 3, selector: "dynamokserve.dev/model=scalable" });
    // More than one pod: voluntary disruptions take one at a time; back to one: no budget.
    const budget = () => kube.read<V1PodDisruptionBudget>("policy/v1", "PodDisruptionBudget", namespace, "scalable");
    const live = await eventually(budget);
    assert.deepEqual(
      [live.spec?.maxUnavailable, live.spec?.selector?.matchLabels],
      [1, { "dynamokserve.dev/model": "scalable" }],
    );
    assert.equal(live.metadata?.ownerReferences?.[0]?.kind, "DynamoKserveModel");
    cluster.kubectl("scale", "dkm", "scalable", "-n", namespace, "--replicas", "1");
    await eventually(async () =>
      assert.equal(await kube.exists("policy/v1", "PodDisruptionBudget", namespace, "scalable"), false),
    );
    await kube.delete(modelObject(namespace, "scalable", { modelConfig: { inline: IDENTITY_CONFIG } }));
  });

  it("autoscales through a HorizontalPodAutoscaler the cluster's HPA controller acts on, never fighting it over replicas", async () => {
    const autoscaling = {
      minReplicas: 3,
      maxReplicas: 5,
      targetInflightRequests: 4,
      behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
    };
    await kube.create(modelObject(namespace, "autoscaled", { modelConfig: { inline: IDENTITY_CONFIG }, autoscaling }));
    const hpa = await eventually(() =>
      kube.read<V2HorizontalPodAutoscaler>("autoscaling/v2", "HorizontalPodAutoscaler", namespace, "autoscaled"),
    );
    assert.deepEqual(
      { ...hpa.spec?.scaleTargetRef },
      { apiVersion: "apps/v1", kind: "Deployment", name: "autoscaled" },
    );
    assert.equal(hpa.metadata?.ownerReferences?.[0]?.kind, "DynamoKserveModel");
    // No metrics API serves this cluster's HPA: it still lifts the count to minReplicas, and
    // the model's status follows the pods the HPA asked for.
    await eventually(async () => assert.equal((await readModel("autoscaled")).status?.readyReplicas, 3), 45_000);
    const deployment = await readDeployment("autoscaled");
    assert.equal(deployment.spec?.replicas, 3);
    const replicasOwners = (deployment.metadata?.managedFields ?? [])
      .filter((entry) => JSON.stringify(entry.fieldsV1 ?? {}).includes('"f:replicas"'))
      .map((entry) => entry.manager);
    assert.ok(!replicasOwners.includes("dynamo-kserve-operator"), `replicas owned by ${replicasOwners.join(", ")}`);
    // Edits to the model re-apply the Deployment without touching the HPA's count.
    await kube.mergePatch(modelObject(namespace, "autoscaled", { logLevel: "debug" } as DynamoKserveModel["spec"]));
    await eventually(async () =>
      assert.match(
        (await readDeployment("autoscaled")).spec?.template.spec?.containers[0]?.args?.join(" ") ?? "",
        /debug/,
      ),
    );
    assert.equal((await readDeployment("autoscaled")).spec?.replicas, 3);
    // kubectl scale dkm would fight the autoscaler: the API server refuses it, saying why.
    assert.throws(
      () => cluster.kubectl("scale", "dkm", "autoscaled", "-n", namespace, "--replicas", "1"),
      /replicas cannot be set with autoscaling: the autoscaler owns the count/,
    );
    // Autoscaling off: the HPA goes.
    // A merge patch's null removes the field.
    await kube.mergePatch(
      modelObject(namespace, "autoscaled", { autoscaling: null } as unknown as DynamoKserveModel["spec"]),
    );
    await eventually(async () =>
      assert.equal(await kube.exists("autoscaling/v2", "HorizontalPodAutoscaler", namespace, "autoscaled"), false),
    );
    await kube.delete(modelObject(namespace, "autoscaled", { modelConfig: { inline: IDENTITY_CONFIG } }));
  });

  it("places and shapes the pods as spec.pod says, and rolls them keeping capacity", async () => {
    await kube.create(
      modelObject(namespace, "placed", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        pod: {
          // The operator's own label keys are refused here (the CRD suite shows it).
          labels: { team: "search" },
          annotations: { "example.com/owner": "search" },
          nodeSelector: { "kubernetes.io/os": "linux" },
          tolerations: [{ key: "gpu", operator: "Exists", effect: "NoSchedule" }],
          affinity: {
            podAntiAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [
                {
                  weight: 10,
                  podAffinityTerm: {
                    topologyKey: "kubernetes.io/hostname",
                    labelSelector: { matchLabels: { team: "search" } },
                  },
                },
              ],
            },
          },
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: "kubernetes.io/hostname",
              whenUnsatisfiable: "ScheduleAnyway",
              labelSelector: { matchLabels: { team: "search" } },
            },
          ],
          imagePullSecrets: [{ name: "registry" }],
          env: [{ name: "DYNAMO_LOG_LEVEL", value: "debug" }],
          envFrom: [{ configMapRef: { name: "extra-env", optional: true } }],
        },
      }),
    );
    // Accepted by the real API server as a pod template, and on kwok's nodes the pods run.
    await waitForCondition("placed", "Ready", "True");
    const deployment = await readDeployment("placed");
    const template = deployment.spec!.template;
    assert.equal(template.metadata?.labels?.["team"], "search");
    assert.equal(
      template.metadata?.labels?.["dynamokserve.dev/model"],
      "placed",
      "the selector label is the operator's",
    );
    assert.equal(template.metadata?.annotations?.["example.com/owner"], "search");
    assert.deepEqual(template.spec?.nodeSelector, { "kubernetes.io/os": "linux" });
    assert.equal(template.spec?.tolerations?.[0]?.key, "gpu");
    assert.equal(
      template.spec?.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution?.[0]?.weight,
      10,
    );
    assert.equal(template.spec?.topologySpreadConstraints?.[0]?.maxSkew, 1);
    assert.deepEqual(
      template.spec?.imagePullSecrets?.map(({ name }) => name),
      ["registry"],
    );
    assert.deepEqual(
      template.spec?.containers[0]?.env?.map(({ name, value }) => [name, value]),
      [["DYNAMO_LOG_LEVEL", "debug"]],
    );
    assert.equal(template.spec?.containers[0]?.envFrom?.[0]?.configMapRef?.name, "extra-env");
    assert.deepEqual({ ...deployment.spec?.strategy?.rollingUpdate }, { maxUnavailable: 0, maxSurge: 1 });
    await kube.delete(modelObject(namespace, "placed", { modelConfig: { inline: IDENTITY_CONFIG } }));
  });

  it("garbage-collects the owned objects when the model is deleted", async () => {
    await kube.delete(modelObject(namespace, "scaled", { modelConfig: { inline: IDENTITY_CONFIG } }));
    await eventually(async () => {
      assert.equal(await kube.exists("apps/v1", "Deployment", namespace, "scaled"), false);
      assert.equal(await kube.exists("v1", "Service", namespace, "scaled"), false);
      assert.equal(await kube.exists("v1", "ConfigMap", namespace, "scaled-model-config"), false);
    }, 30_000);
  });

  it("makes no API writes in a steady state (audit log of the operator's user)", async () => {
    await waitForCondition("ident", "Ready", "True");
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const mark = cluster.auditMark();
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.deepEqual(cluster.operatorWrites(mark), []);
  });

  it("serves /healthz, /readyz and controller metrics", async () => {
    const get = async (path: string) => {
      const response = await fetch(`http://127.0.0.1:${operator.httpPort}${path}`);
      return { status: response.status, text: await response.text() };
    };
    assert.equal((await get("/healthz")).status, 200);
    assert.equal((await get("/readyz")).status, 200);
    const metrics = (await get("/metrics")).text;
    assert.match(
      metrics,
      /controller_runtime_reconcile_total\{controller="dynamokservemodel",result="success"\} [1-9]/,
    );
    assert.match(metrics, /controller_runtime_reconcile_time_seconds_bucket/);
    assert.match(metrics, /workqueue_depth\{name="dynamokservemodel"\} 0/);
  });

  it("checks configs without loading the data plane's runtime: no onnxruntime in the operator process", async () => {
    // By now the operator has validated configs (and rejected one): it did so with lib/ alone.
    const maps = readFileSync(`/proc/${operator.process.pid}/maps`, "utf8");
    assert.doesNotMatch(maps, /onnxruntime/);
    assert.ok(operator.logs.some((entry) => entry["msg"] === "operator ready"));
  });
});

import assert from "node:assert/strict";
import type { V1ConfigMap, V1Deployment, V1Service } from "@kubernetes/client-node";
import { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import { parseText } from "../../../lib/model-repository/config.js";
import type { DynamoKserveModel, DynamoKserveModelSpec } from "../../src/api/v1alpha1.js";
import { checkModelConfig, type ValidConfig } from "../../src/resources/model-config.js";
import {
  desiredConfigMap,
  desiredDeployment,
  desiredAutoscaler,
  desiredDisruptionBudget,
  desiredService,
} from "../../src/resources/model.js";
import { desiredStatus } from "../../src/resources/status.js";
import {
  desiredInferencePool,
  desiredPoolService,
  poolServiceName,
  userPickerRef,
} from "../../src/resources/inference-pool.js";
import { dataplaneScaledObject, durationSeconds, type ScaledObject } from "../../src/resources/scaled-object.js";
import {
  activatorDeployment,
  activatorPodLabels,
  activatorRole,
  activatorRoleBinding,
  activatorService,
  activatorServiceAccount,
  activatorSidePorts,
} from "../../src/resources/activator.js";
import { autoscalingStatus, availabilityAtZero } from "../../src/resources/autoscaling-status.js";
import { dataplanePlan, type AutoscalingInputs } from "../../src/resources/dataplane.js";
import { dataplaneService } from "../../src/resources/dataplane-pods.js";
import { autoscalingInputs } from "../../src/controllers/autoscaling.js";
import type { PlannedObject } from "../../src/kube/owned.js";
import { IDENTITY_CONFIG } from "../fixtures/kube.js";
import { assertGolden } from "../fixtures/golden.js";

function model(spec: Partial<DynamoKserveModelSpec> = {}, status?: DynamoKserveModel["status"]): DynamoKserveModel {
  return {
    apiVersion: "dynamokserve.dev/v1alpha1",
    kind: "DynamoKserveModel",
    metadata: { name: "ident", namespace: "models", uid: "00000000-0000-0000-0000-000000000001", generation: 3 },
    spec: { modelConfig: { inline: IDENTITY_CONFIG }, ...spec },
    ...(status !== undefined ? { status } : {}),
  };
}

const valid = (target: DynamoKserveModel): ValidConfig => {
  const check = checkModelConfig(target, undefined);
  assert.ok(check.valid, JSON.stringify(check));
  return check;
};

describe("desired-state builders (golden objects)", () => {
  const full = model({
    replicas: 2,
    image: "registry.example/dynamo-kserve:1.0",
    imagePullPolicy: "IfNotPresent",
    resources: { requests: { cpu: "500m", memory: "256Mi" }, limits: { cpu: 2 } },
    grpcPort: 9001,
    metricsPort: 9002,
    maxMessageSize: 1048576,
    logLevel: "debug",
    shutdown: { drainDelaySeconds: 10, gracePeriodSeconds: 120 },
  });

  it("builds the Deployment", () => {
    assertGolden("deployment", desiredDeployment(full, { dataplaneImage: "dynamo-kserve:default" }));
  });

  it("builds the Deployment with defaults, leaving replicas unset", () => {
    const deployment: V1Deployment = desiredDeployment(model(), { dataplaneImage: "dynamo-kserve:default" });
    assert.equal(deployment.spec?.replicas, undefined);
    assert.equal(deployment.spec?.template.spec?.containers[0]?.image, "dynamo-kserve:default");
    assertGolden("deployment-defaults", deployment);
  });

  it("mounts spec.modelFiles at /model-files/<model name>, from a PVC, an image or a ConfigMap", () => {
    const pvc = desiredDeployment(
      model({ modelFiles: { persistentVolumeClaim: { claimName: "triton-repo" }, subPath: "densenet_onnx" } }),
      { dataplaneImage: "dynamo-kserve:default" },
    );
    assertGolden("deployment-model-files", pvc);
    const volumeOf = (files: NonNullable<DynamoKserveModelSpec["modelFiles"]>) =>
      desiredDeployment(model({ modelFiles: files }), { dataplaneImage: "x" }).spec?.template.spec?.volumes?.find(
        (volume) => volume.name === "model-files",
      );
    assert.deepEqual(volumeOf({ image: { reference: "models/add-sub:1", pullPolicy: "IfNotPresent" } }), {
      name: "model-files",
      image: { reference: "models/add-sub:1", pullPolicy: "IfNotPresent" },
    });
    assert.deepEqual(
      volumeOf({ configMap: { name: "add-sub-files", items: [{ key: "1_model.onnx", path: "1/model.onnx" }] } }),
      {
        name: "model-files",
        configMap: { name: "add-sub-files", items: [{ key: "1_model.onnx", path: "1/model.onnx" }] },
      },
    );
  });

  it("syncs modelFiles.storageUri into a bounded cache: --model-files, the Secret and CA as files, no volume of files", () => {
    const deployment = desiredDeployment(
      model({
        modelName: "densenet_onnx",
        modelFiles: { storageUri: "s3://minio.storage.svc:9000/models/triton/densenet_onnx" },
        storage: {
          secretName: "bucket-credentials",
          s3: { region: "eu-west-1", pathStyle: true },
          caBundle: { configMapName: "storage-ca" },
          cacheSize: "20Gi",
          pollSeconds: 30,
        },
      }),
      { dataplaneImage: "dynamo-kserve:default" },
    );
    assertGolden("deployment-storage", deployment);
    const pod = deployment.spec!.template.spec!;
    const args = pod.containers[0]!.args!;
    const after = (flag: string) => args[args.indexOf(flag) + 1];
    assert.equal(after("--model-files"), "densenet_onnx=s3://minio.storage.svc:9000/models/triton/densenet_onnx");
    assert.equal(args.includes("--model-files-root"), false);
    assert.equal(after("--model-cache-dir"), "/model-cache");
    assert.equal(after("--model-cache-max-bytes"), String(20 * 2 ** 30));
    assert.equal(after("--storage-secret-dir"), "/etc/dynamo-kserve/storage-credentials");
    assert.equal(after("--storage-ca-file"), "/etc/dynamo-kserve/storage-ca/ca.crt");
    assert.equal(after("--repository-poll-secs"), "30");
    const volume = (name: string) => pod.volumes?.find((candidate) => candidate.name === name);
    assert.equal(volume("model-files"), undefined);
    assert.deepEqual(volume("model-cache"), { name: "model-cache", emptyDir: { sizeLimit: "20Gi" } });
    // The Secret by name only, as read-only files (rotation reaches running pods), never as environment.
    assert.deepEqual(volume("storage-credentials"), {
      name: "storage-credentials",
      secret: { secretName: "bucket-credentials", defaultMode: 0o440 },
    });
    assert.equal(pod.containers[0]!.env, undefined);
    assert.equal(pod.containers[0]!.envFrom, undefined);
    assert.deepEqual(volume("storage-ca"), {
      name: "storage-ca",
      configMap: { name: "storage-ca", items: [{ key: "ca.crt", path: "ca.crt" }] },
    });
    // Without spec.storage: the 10Gi default, and each cloud's own credential chain.
    const ambient = desiredDeployment(model({ modelFiles: { storageUri: "gs://models/ident" } }), {
      dataplaneImage: "x",
    }).spec!.template.spec!;
    assert.deepEqual(ambient.volumes?.find((candidate) => candidate.name === "model-cache")?.emptyDir, {
      sizeLimit: "10Gi",
    });
    assert.equal(ambient.containers[0]!.args!.includes("--storage-secret-dir"), false);
  });

  it("builds the Service with appProtocol kubernetes.io/h2c for gRPC", () => {
    assertGolden("service", desiredService(full));
  });

  it("builds the InferencePool (with appProtocol only where the CRD has it) and the Service fronting it", () => {
    const withPool = model({
      inferencePool: { endpointPickerRef: { name: "epp", port: { number: 9002 }, failureMode: "FailOpen" } },
    });
    const pool = desiredInferencePool(withPool, {
      appProtocolSupported: true,
      endpointPickerRef: userPickerRef(withPool),
    });
    assertGolden("inferencepool", pool);
    assert.equal(
      desiredInferencePool(withPool, { appProtocolSupported: false, endpointPickerRef: userPickerRef(withPool) }).spec
        .appProtocol,
      undefined,
    );
    assertGolden(
      "inferencepool-service",
      desiredPoolService({ ...pool, metadata: { ...pool.metadata, uid: "pool-uid" } }),
    );
    assert.equal(poolServiceName("p".repeat(70)).length, 63);
  });

  it("builds an HTTP pool on the HTTP port (one pool, one appProtocol), with its Service saying http", () => {
    const httpModel = model({
      httpPort: 8080,
      inferencePool: { protocol: "HTTP", endpointPickerRef: { name: "epp", port: { number: 9002 } } },
    });
    const httpPool = desiredInferencePool(httpModel, {
      appProtocolSupported: true,
      endpointPickerRef: userPickerRef(httpModel),
    });
    assert.deepEqual(httpPool.spec.targetPorts, [{ number: 8080 }]);
    assert.equal(httpPool.spec.appProtocol, "http");
    const service = desiredPoolService({ ...httpPool, metadata: { ...httpPool.metadata, uid: "pool-uid" } });
    assert.deepEqual(
      service.spec?.ports?.map(({ name, port, appProtocol }) => ({ name, port, appProtocol })),
      [{ name: "http", port: 8080, appProtocol: "http" }],
    );
    // A CRD without appProtocol: the annotation says it for the pool's Service.
    const oldModel = model({
      inferencePool: { protocol: "HTTP", endpointPickerRef: { name: "epp", port: { number: 9002 } } },
    });
    const old = desiredInferencePool(oldModel, {
      appProtocolSupported: false,
      endpointPickerRef: userPickerRef(oldModel),
    });
    assert.equal(old.spec.appProtocol, undefined);
    assert.equal(desiredPoolService(old).spec?.ports?.[0]?.appProtocol, "http");
    assert.match(poolServiceName("p".repeat(70)), /^p+-[0-9a-f]{8}-pool$/);
  });

  it("builds a PodDisruptionBudget of one pod at a time, unless there is a single replica", () => {
    assert.equal(desiredDisruptionBudget(model({ replicas: 1 })), undefined);
    assert.equal(desiredDisruptionBudget(model({ replicas: 0 })), undefined);
    for (const replicas of [2, undefined]) {
      const budget = desiredDisruptionBudget(model(replicas === undefined ? {} : { replicas }));
      assert.deepEqual(budget?.spec, {
        maxUnavailable: 1,
        selector: { matchLabels: { "dynamokserve.dev/model": "ident" } },
      });
      assert.equal(budget?.metadata?.ownerReferences?.[0]?.uid, "00000000-0000-0000-0000-000000000001");
    }
  });

  it("builds a KEDA ScaledObject for class KEDA: Prometheus triggers on the model's own series, and at minReplicas 0 the activity window and the activator's push", () => {
    const inputs = {
      prometheusAddress: "http://prometheus.monitoring:9090",
      service: "ident",
      model: "ident",
      scrapeIntervalSeconds: 5,
    };
    assert.equal(dataplaneScaledObject(model(), model().spec, "ident", inputs), undefined);
    const hpaClass = model({ autoscaling: { maxReplicas: 3, targetInflightRequests: 4 } });
    assert.equal(dataplaneScaledObject(hpaClass, hpaClass.spec, "ident", inputs), undefined);
    const toZero = model({
      monitoring: {},
      resources: { requests: { cpu: "500m" } },
      autoscaling: {
        class: "KEDA",
        minReplicas: 0,
        maxReplicas: 3,
        targetInflightRequests: 8,
        targetWaitingRequests: 2,
        targetRunningRequests: 16,
        targetKvCacheUsagePercent: 70,
        targetCPUUtilization: 80,
        keda: { pollingIntervalSeconds: 5, cooldownSeconds: 30 },
        behavior: { scaleDown: { stabilizationWindowSeconds: 30 } },
      },
    });
    assertGolden(
      "scaled-object-to-zero",
      dataplaneScaledObject(toZero, toZero.spec, "ident", {
        ...inputs,
        activatorScaler: "ident-activator.models.svc:9090",
      }),
    );
    // KEDA reads the activity trigger once a polling interval: its window spans the whole gap
    // since the last read (and a scrape's lag), so requests between two reads keep the model up.
    const slowPolling = model({
      monitoring: {},
      autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 3, keda: { pollingIntervalSeconds: 120 } },
    });
    const activity = dataplaneScaledObject(slowPolling, slowPolling.spec, "ident", inputs)?.spec.triggers.find(
      (trigger) => trigger.name === "recent-requests",
    );
    const window = /\[(\d+)s\]\)\)$/.exec(activity?.metadata["query"] ?? "")?.[1];
    assert.ok(Number(window) >= 120 + 5, `window ${window}s shorter than the polling interval and a scrape`);
    // At one pod or more: no activity trigger, no activator; KEDA's defaults for polling and cooldown.
    const atOne = model({ monitoring: {}, autoscaling: { class: "KEDA", maxReplicas: 3, targetWaitingRequests: 2 } });
    const scaled = dataplaneScaledObject(atOne, atOne.spec, "ident", { ...inputs, scrapeIntervalSeconds: 30 });
    assert.equal(scaled?.spec.minReplicaCount, 1);
    assert.equal(scaled?.spec.pollingInterval, 15);
    assert.equal(scaled?.spec.cooldownPeriod, 300);
    assert.deepEqual(
      scaled?.spec.triggers.map((trigger) => [trigger.name, trigger.metadata["query"]]),
      [["waiting-requests", 'sum(dynamo_kserve_requests_waiting{namespace="models",service="ident",model="ident"})']],
    );
    // A repository's series: every model of its pods.
    const repositoryWide = dataplaneScaledObject(atOne, atOne.spec, "ident", { ...inputs, model: undefined });
    assert.equal(
      repositoryWide?.spec.triggers[0]?.metadata["query"],
      'sum(dynamo_kserve_requests_waiting{namespace="models",service="ident"})',
    );
  });

  it("builds the activator of a model that scales to zero: pods the Service selects but the Deployment never does, a pods-only Role, tokens and TLS from the model's Secrets", () => {
    const toZero = model({
      monitoring: {},
      auth: { tokenSecretRef: { name: "tokens" } },
      autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 3, targetWaitingRequests: 2 },
    });
    const inputs = {
      tokens: { secretName: "tokens", key: "tokens" },
      tls: { secretName: "ident-tls", serverName: "ident.models.svc" },
    };
    assertGolden(
      "activator-deployment",
      activatorDeployment(toZero, toZero.spec, "ident", inputs, { dataplaneImage: "i" }),
    );
    assertGolden("activator-rbac", [
      activatorServiceAccount(toZero, "ident"),
      activatorRole(toZero, "ident"),
      activatorRoleBinding(toZero, "ident"),
      activatorService(toZero, "ident"),
    ]);
    // The Deployment's selector (and so its PDB's, the HPA's and the pool's) never matches the activator's pods.
    const pods = desiredDeployment(toZero, { dataplaneImage: "i" }).spec!;
    const activatorLabels = activatorPodLabels(toZero);
    assert.ok(Object.entries(pods.selector.matchLabels!).some(([key, value]) => activatorLabels[key] !== value));
    // Both carry the Service label, which the Service selects once the pods have it.
    assert.equal(pods.template.metadata?.labels?.["dynamokserve.dev/model-service"], "ident");
    assert.equal(activatorLabels["dynamokserve.dev/model-service"], "ident");
    assert.deepEqual(dataplaneService(toZero, toZero.spec, "ident", false, true).spec?.selector, {
      "dynamokserve.dev/model-service": "ident",
    });
    assert.deepEqual(dataplaneService(toZero, toZero.spec, "ident", false).spec?.selector, {
      "dynamokserve.dev/model": "ident",
    });
    // Without scale to zero the pod template is unchanged (no roll when a model upgrades the operator).
    assert.equal(
      desiredDeployment(model(), { dataplaneImage: "i" }).spec?.template.metadata?.labels?.[
        "dynamokserve.dev/model-service"
      ],
      undefined,
    );
    // Its own ports keep clear of the model's, which it serves too.
    assert.deepEqual(activatorSidePorts({ grpc: 8001, http: 8000 }), { scaler: 9090, metrics: 9091 });
    assert.deepEqual(activatorSidePorts({ grpc: 9090, http: 9091 }), { scaler: 9092, metrics: 9093 });
    assert.deepEqual(activatorSidePorts({ grpc: 9091, http: 8000 }), { scaler: 9090, metrics: 9093 });
    // Class KEDA makes no HPA.
    assert.equal(desiredAutoscaler(toZero), undefined);
  });

  it("plans KEDA's objects only when KEDA is installed and a Prometheus is known, and the activator only at minReplicas 0", () => {
    const base: AutoscalingInputs = {
      kedaInstalled: true,
      prometheusAddress: "http://prometheus:9090",
      scrapeIntervalSeconds: 5,
      activator: {},
      serviceReachesActivator: false,
      settings: { dataplaneImage: "i" },
    };
    const workload = (target: DynamoKserveModel) => ({
      configMaps: [],
      deployment: desiredDeployment(target, { dataplaneImage: "i" }),
    });
    const planOf = (target: DynamoKserveModel, inputs: Partial<typeof base> = {}) =>
      dataplanePlan(
        { owner: target, name: "ident", tls: false, autoscaling: { ...base, ...inputs } },
        workload(target),
      );
    const kinds = (group: readonly PlannedObject[]) =>
      group.map((entry) => ("apply" in entry ? entry.apply.kind : `keep ${entry.keep.kind}`));
    const toZero = model({
      monitoring: {},
      autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 3, targetWaitingRequests: 2 },
    });
    const full = planOf(toZero);
    assert.equal(full.autoscalingPlanned, "KEDA");
    assert.deepEqual(kinds(full.autoscaling), ["ScaledObject"]);
    assert.deepEqual(kinds(full.activation), ["ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"]);
    // KEDA reaches the activator's scaler by its Service's cluster IP, once there is one.
    const triggers = (plan: ReturnType<typeof planOf>) =>
      plan.autoscaling.flatMap((entry) => ("apply" in entry ? (entry.apply as ScaledObject).spec.triggers : []));
    assert.equal(
      triggers(full).find((trigger) => trigger.type === "external-push"),
      undefined,
    );
    assert.deepEqual(
      triggers(planOf(toZero, { activatorClusterIp: "10.96.0.7" })).find((trigger) => trigger.type === "external-push")
        ?.metadata,
      { scalerAddress: "10.96.0.7:9090" },
    );
    // Nothing of KEDA's is written without KEDA or a Prometheus; the activator neither.
    for (const [inputs, planned] of [
      [{ kedaInstalled: false }, "KEDANotInstalled"],
      [{ prometheusAddress: undefined }, "PrometheusAddressMissing"],
    ] as const) {
      const plan = planOf(toZero, inputs);
      assert.equal(plan.autoscalingPlanned, planned);
      assert.deepEqual([...plan.autoscaling, ...plan.activation], []);
    }
    // At one pod or more: the ScaledObject alone.
    const atOne = model({ monitoring: {}, autoscaling: { class: "KEDA", maxReplicas: 3, targetWaitingRequests: 2 } });
    assert.deepEqual(kinds(planOf(atOne).activation), []);
    // The HPA class, and no autoscaling.
    assert.equal(
      planOf(model({ autoscaling: { maxReplicas: 3, targetInflightRequests: 4 } })).autoscalingPlanned,
      "HPA",
    );
    assert.equal(planOf(model()).autoscalingPlanned, "None");
    // A refused config keeps what scales the running pods.
    const kept = dataplanePlan(
      { owner: toZero, name: "ident", tls: false, autoscaling: base },
      { keep: { configMaps: ["ident-model-config"] } },
    );
    assert.deepEqual(kinds(kept.autoscaling), ["keep ScaledObject"]);
    assert.equal(kept.activation.length, 5);
  });

  it("turning scale to zero off while no pod is ready keeps the activator, the Service's label and the pods' until one is", () => {
    const settings = { dataplaneImage: "i" };
    const serviceLabel = "dynamokserve.dev/model-service";
    const live = (readyReplicas: number) => {
      const objects: Record<string, object> = {
        "Service/ident": { spec: { selector: { [serviceLabel]: "ident" } } },
        "Deployment/ident": {
          metadata: { generation: 4 },
          spec: { replicas: 0, template: { metadata: { labels: { [serviceLabel]: "ident" } } } },
          status: { observedGeneration: 4, readyReplicas },
        },
      };
      return {
        installed: () => true,
        get: <T>(kind: { kind: string }, _namespace: string, name: string) =>
          objects[`${kind.kind}/${name}`] as T | undefined,
      };
    };
    // Scale to zero turned off (minReplicas 1) while the model is at zero.
    const atOne = model({
      monitoring: {},
      autoscaling: { class: "KEDA", minReplicas: 1, maxReplicas: 3, targetWaitingRequests: 2 },
    });
    const planAt = (readyReplicas: number) =>
      dataplanePlan(
        {
          owner: atOne,
          name: "ident",
          tls: false,
          autoscaling: autoscalingInputs(atOne, "ident", {
            owned: live(readyReplicas) as never,
            settings: { ...settings, kedaPrometheusAddress: "http://prometheus:9090" },
            activator: {},
          }),
        },
        { configMaps: [], deployment: desiredDeployment(atOne, settings) },
      );
    const applied = (plan: ReturnType<typeof planAt>, kind: string) =>
      plan.dataplane.flatMap((entry) => ("apply" in entry && entry.apply.kind === kind ? [entry.apply] : []))[0];
    const waking = planAt(0);
    // The Service still reaches the activator (else it selects nothing until a pod is ready)...
    assert.deepEqual((applied(waking, "Service") as V1Service).spec?.selector, { [serviceLabel]: "ident" });
    // ...which stays, and the pods that start carry the label the Service selects.
    assert.equal(waking.activation.length, 5);
    assert.equal(
      (applied(waking, "Deployment") as V1Deployment).spec?.template.metadata?.labels?.[serviceLabel],
      "ident",
    );
    // Nothing else lifts a Deployment at zero (an HPA is disabled at zero replicas): one pod, then the autoscaler's count.
    for (const autoscaling of [
      atOne.spec.autoscaling!,
      { class: "HPA" as const, minReplicas: 2, maxReplicas: 3, targetInflightRequests: 4 },
    ]) {
      const leaving = model({ monitoring: {}, autoscaling });
      const plan = dataplanePlan(
        {
          owner: leaving,
          name: "ident",
          tls: false,
          autoscaling: autoscalingInputs(leaving, "ident", {
            owned: live(0) as never,
            settings: { ...settings, kedaPrometheusAddress: "http://prometheus:9090" },
            activator: {},
          }),
        },
        { configMaps: [], deployment: desiredDeployment(leaving, settings) },
      );
      assert.equal((applied(plan, "Deployment") as V1Deployment).spec?.replicas, 1, JSON.stringify(autoscaling));
      assert.equal(plan.activation.length, 5);
    }
    // The same when KEDA's objects cannot be written for a model still asking for zero (no
    // Prometheus address any more, KEDA uninstalled): one pod serves through the Service.
    const toZero = model({
      monitoring: {},
      autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 3, targetWaitingRequests: 2 },
    });
    const orphaned = dataplanePlan(
      {
        owner: toZero,
        name: "ident",
        tls: false,
        autoscaling: autoscalingInputs(toZero, "ident", { owned: live(0) as never, settings, activator: {} }),
      },
      { configMaps: [], deployment: desiredDeployment(toZero, settings) },
    );
    assert.equal(orphaned.autoscalingPlanned, "PrometheusAddressMissing");
    assert.deepEqual((applied(orphaned, "Service") as V1Service).spec?.selector, { [serviceLabel]: "ident" });
    assert.equal((applied(orphaned, "Deployment") as V1Deployment).spec?.replicas, 1);
    assert.equal(orphaned.activation.length, 5);
    // Once a pod is ready: the pod selector again, the activator pruned, the label gone.
    const served = planAt(1);
    assert.deepEqual((applied(served, "Service") as V1Service).spec?.selector, {
      "dynamokserve.dev/model": "ident",
    });
    assert.deepEqual(served.activation, []);
    assert.equal((applied(served, "Deployment") as V1Deployment).spec?.replicas, undefined);
    assert.equal(
      (applied(served, "Deployment") as V1Deployment).spec?.template.metadata?.labels?.[serviceLabel],
      undefined,
    );
  });

  it("says what the autoscaler does: KEDA's conditions read back, scaled to zero, ready while the activator stands in", () => {
    const scaledObject = (conditions: { type: string; status: string; reason?: string; message?: string }[]) =>
      ({ status: { conditions } }) as unknown as ScaledObject;
    const deployment = (replicas: number) => ({ spec: { replicas, selector: {}, template: {} } });
    const keda = { planned: "KEDA" as const, toZero: true, name: "ident" };
    const waiting = autoscalingStatus(keda, deployment(1));
    assert.equal(waiting.autoscalerReady?.reason, "WaitingForKEDA");
    const failing = autoscalingStatus(
      {
        ...keda,
        scaledObject: scaledObject([
          { type: "Ready", status: "False", reason: "x", message: "error inspecting prometheus metrics" },
        ]),
      },
      deployment(1),
    );
    assert.deepEqual(
      [failing.autoscalerReady?.status, failing.autoscalerReady?.reason, failing.summary],
      ["False", "TriggerFailing", "KEDA TriggerFailing"],
    );
    assert.match(failing.autoscalerReady?.message ?? "", /error inspecting prometheus metrics/);
    const idle = autoscalingStatus(
      {
        ...keda,
        scaledObject: scaledObject([
          { type: "Ready", status: "True" },
          { type: "Active", status: "False" },
        ]),
      },
      deployment(0),
    );
    assert.deepEqual(
      [idle.scaledToZero?.status, idle.scaledToZero?.reason, idle.summary],
      ["True", "Idle", "KEDA ScaledToZero"],
    );
    const active = autoscalingStatus(
      {
        ...keda,
        scaledObject: scaledObject([
          { type: "Ready", status: "True" },
          { type: "Active", status: "True" },
        ]),
      },
      deployment(2),
    );
    assert.deepEqual([active.scaledToZero?.status, active.summary], ["False", "KEDA Active"]);
    assert.equal(
      autoscalingStatus({ planned: "KEDANotInstalled", toZero: true, name: "ident" }, undefined).autoscalerReady
        ?.reason,
      "KEDANotInstalled",
    );
    assert.deepEqual(autoscalingStatus({ planned: "None", toZero: false, name: "ident" }, undefined), {});
    // At zero the model is available through its activator, once the activator is ready.
    const atZero = { ...keda, activator: { status: { readyReplicas: 1 } } };
    assert.equal(availabilityAtZero(atZero, deployment(0))?.reason, "ScaledToZero");
    assert.equal(
      availabilityAtZero({ ...keda, activator: { status: {} } }, deployment(0))?.reason,
      "ActivatorNotReady",
    );
    assert.equal(availabilityAtZero(atZero, deployment(1)), undefined);
    const status = desiredStatus(
      model({
        monitoring: {},
        autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 3, targetWaitingRequests: 2 },
      }),
      {
        config: valid(model()),
        deployment: { metadata: { name: "ident" }, spec: { replicas: 0, selector: {}, template: {} }, status: {} },
        autoscaling: {
          ...atZero,
          scaledObject: scaledObject([
            { type: "Ready", status: "True" },
            { type: "Active", status: "False" },
          ]),
        },
      },
      "2026-11-26T00:00:00Z",
    ).status;
    const condition = (type: string) => status.conditions?.find((candidate) => candidate.type === type);
    assert.equal(condition("Ready")?.status, "True");
    assert.equal(condition("Available")?.reason, "ScaledToZero");
    assert.equal(condition("ScaledToZero")?.status, "True");
    assert.equal(status.autoscaler, "KEDA ScaledToZero");
  });

  it("reads Prometheus durations as the ServiceMonitor writes them", () => {
    assert.equal(durationSeconds("30s"), 30);
    assert.equal(durationSeconds("1m30s"), 90);
    assert.equal(durationSeconds("500ms"), 0.5);
    assert.equal(durationSeconds("2h"), 7200);
  });

  it("builds a HorizontalPodAutoscaler on the Deployment from spec.autoscaling, and leaves it the replica count", () => {
    assert.equal(desiredAutoscaler(model({ replicas: 2 })), undefined);
    const scaled = model({
      resources: { requests: { cpu: "500m" } },
      autoscaling: {
        minReplicas: 2,
        maxReplicas: 6,
        targetInflightRequests: 8,
        targetCPUUtilization: 70,
        behavior: { scaleDown: { stabilizationWindowSeconds: 30 } },
      },
    });
    assertGolden("autoscaler", desiredAutoscaler(scaled));
    // The Deployment's count is the HPA's: not applied, and a budget keeps drains to one pod.
    assert.equal(desiredDeployment(scaled, { dataplaneImage: "i" }).spec?.replicas, undefined);
    assert.equal(desiredDisruptionBudget(scaled)?.spec?.maxUnavailable, 1);
    // One target alone, and the defaults: one pod at least, the data plane's own metric name.
    const inflightOnly = desiredAutoscaler(model({ autoscaling: { maxReplicas: 3, targetInflightRequests: 4 } }));
    assert.equal(inflightOnly?.spec?.minReplicas, 1);
    assert.deepEqual(inflightOnly?.spec?.metrics, [
      {
        type: "Pods",
        pods: {
          metric: { name: "dynamo_frontend_inflight_requests" },
          target: { type: "AverageValue", averageValue: "4" },
        },
      },
    ]);
    assert.equal(inflightOnly?.spec?.behavior, undefined);
  });

  it("builds the ConfigMap with the config as <model>.pbtxt", () => {
    assertGolden("configmap", desiredConfigMap(full, valid(full)));
  });
});

describe("model config checks", () => {
  const configMap = (data: Record<string, string>, binaryData: Record<string, string> = {}): V1ConfigMap => ({
    metadata: { name: "user", namespace: "models" },
    data,
    binaryData,
  });
  const fromMap = (key?: string) =>
    model({ modelConfig: { configMapRef: { name: "user", ...(key !== undefined ? { key } : {}) } } });

  it("reads text and binary configs from a ConfigMap", () => {
    const text = checkModelConfig(fromMap(), configMap({ "config.pbtxt": IDENTITY_CONFIG }));
    assert.deepEqual(
      [text.valid, text.valid && text.fileName, text.valid && text.backend],
      [true, "ident.pbtxt", "identity"],
    );
    const binary = Buffer.from(ModelConfig.encode(parseText(IDENTITY_CONFIG, "x")).finish()).toString("base64");
    const fromBinary = checkModelConfig(fromMap("model.pb"), configMap({}, { "model.pb": binary }));
    assert.ok(fromBinary.valid);
    assert.deepEqual([fromBinary.fileName, fromBinary.binaryBase64], ["ident.pb", binary]);
  });

  it("names what is missing or wrong, with a condition reason", () => {
    assert.deepEqual(checkModelConfig(fromMap(), undefined), {
      valid: false,
      reason: "ConfigMapNotFound",
      message: "ConfigMap 'user' (spec.modelConfig.configMapRef) was not found in namespace 'models'",
    });
    const noKey = checkModelConfig(fromMap("other"), configMap({ "config.pbtxt": "x" }));
    assert.equal(noKey.valid ? "" : noKey.reason, "ConfigKeyNotFound");
    assert.match(noKey.valid ? "" : noKey.message, /no key 'other'.*its keys: config\.pbtxt/);
    const broken = checkModelConfig(
      model({ modelConfig: { inline: 'backend: "identity"\nmax_batch: 1\n' } }),
      undefined,
    );
    assert.match(broken.valid ? "" : broken.message, /^spec\.modelConfig\.inline:2: .*max_batch/);
    const otherName = checkModelConfig(
      model({ modelConfig: { inline: `name: "other"\n${IDENTITY_CONFIG}` } }),
      undefined,
    );
    assert.match(otherName.valid ? "" : otherName.message, /name 'other' differs from the served model name 'ident'/);
    const backend = checkModelConfig(
      model({ modelConfig: { inline: IDENTITY_CONFIG.replace("identity", "pytorch_libtorch") } }),
      undefined,
    );
    assert.match(
      backend.valid ? "" : backend.message,
      /backend: 'pytorch_libtorch' is not supported.*identity, repeat/,
    );
  });
});

describe("status", () => {
  const now = "2026-01-01T00:00:00Z";
  const later = "2026-01-01T00:05:00Z";
  const deployment = (ready: number, wanted = 2): V1Deployment => ({
    metadata: { name: "ident" },
    spec: { replicas: wanted, selector: {}, template: {} },
    status: { replicas: wanted, readyReplicas: ready, availableReplicas: ready },
  });

  it("is Ready when the config is valid and a pod is available", () => {
    const target = model();
    const { status, transitions } = desiredStatus(target, { config: valid(target), deployment: deployment(2) }, now);
    assert.deepEqual(
      status.conditions?.map((c) => [c.type, c.status, c.reason]),
      [
        ["Ready", "True", "Ready"],
        ["ConfigValid", "True", "Valid"],
        ["Available", "True", "MinimumReplicasAvailable"],
        ["Degraded", "False", "AsExpected"],
      ],
    );
    assert.equal(status.endpoint, "ident.models.svc:8001");
    assert.equal(status.observedGeneration, 3);
    assert.deepEqual(
      transitions.map((t) => `${t.type}/${t.reason}`),
      ["Normal/Valid"],
    );
  });

  it("keeps lastTransitionTime while a condition holds, and reports real transitions", () => {
    const target = model();
    const first = desiredStatus(target, { config: valid(target), deployment: deployment(0) }, now).status;
    const second = desiredStatus(model({}, first), { config: valid(target), deployment: deployment(0) }, later);
    assert.deepEqual(second.status, first);
    assert.deepEqual(second.transitions, []);
    const third = desiredStatus(model({}, first), { config: valid(target), deployment: deployment(1) }, later);
    assert.deepEqual(
      third.transitions.map((t) => `${t.type}/${t.reason}`),
      ["Normal/Ready", "Normal/MinimumReplicasAvailable"],
    );
    assert.equal(third.status.conditions?.find((c) => c.type === "Ready")?.lastTransitionTime, later);
    assert.equal(third.status.conditions?.find((c) => c.type === "ConfigValid")?.lastTransitionTime, now);
  });

  it("is Degraded, not Ready, when a new config is refused while pods serve the old one", () => {
    const target = model();
    const { status, transitions } = desiredStatus(
      target,
      { config: { valid: false, reason: "InvalidConfig", message: "x:1: bad" }, deployment: deployment(2) },
      now,
    );
    const byType = Object.fromEntries(status.conditions!.map((c) => [c.type, c]));
    assert.equal(byType["Ready"]?.reason, "ConfigInvalid");
    assert.equal(byType["Degraded"]?.reason, "ServingLastValidConfig");
    assert.equal(byType["ConfigValid"]?.message, "x:1: bad");
    assert.deepEqual(
      transitions.map((t) => `${t.type}/${t.reason}`),
      ["Warning/InvalidConfig"],
    );
  });

  it("says why no pod serves: pending, never valid, scaled to zero", () => {
    const target = model();
    const reasonOf = (observed: Parameters<typeof desiredStatus>[1]) =>
      desiredStatus(target, observed, now).status.conditions?.find((c) => c.type === "Available")?.reason;
    assert.equal(reasonOf({ config: valid(target), deployment: undefined }), "DeploymentPending");
    assert.equal(
      reasonOf({ config: { valid: false, reason: "InvalidConfig", message: "" }, deployment: undefined }),
      "NoValidConfig",
    );
    assert.equal(reasonOf({ config: valid(target), deployment: deployment(0, 0) }), "ScaledToZero");
    assert.equal(reasonOf({ config: valid(target), deployment: deployment(0) }), "NoReplicasAvailable");
  });
});

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import type { V1Deployment, V1Pod, V1Service, V2HorizontalPodAutoscaler } from "@kubernetes/client-node";
import { startServer, type ServerProcess } from "../../../dataplane/test/fixtures/server.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { freePort, freePorts } from "../../../e2e/support/ports.js";
import type { DynamoKserveRepository, RepositoryModelStatus } from "../../src/api/v1alpha1.js";
import { boundClaimObjects, conditionOf, IDENTITY_CONFIG, repositoryObject } from "../fixtures/kube.js";
import { useOperator } from "../fixtures/operator.js";
import { tritonRepositoryCorpus } from "../fixtures/triton-repository.js";
import { MODELS_PYTHON } from "../../../dataplane/test/fixtures/peers.js";
import {
  GRPCInferenceServiceService,
  type GRPCInferenceServiceServer,
  type RepositoryIndexResponse,
} from "../../../proto/gen/ts/grpc_service.js";

/** A config the ConfigMap carries to override the claim's broken one of the same name. */
const FIXED_BROKEN_DIMS = `name: "broken_dims"\n${IDENTITY_CONFIG}`;

describe("DynamoKserveRepository: a Triton repository served by one data plane (real API server, kwok pods)", function () {
  this.timeout(120_000);
  // Asked every second, so status follows the data plane quickly.
  const suite = useOperator("repository", ["--repository-status-secs", "1"]);
  let corpus: string;
  let upstreamConfigs: string;
  let upstream: ServerProcess | undefined;
  let dataplane: ServerProcess | undefined;
  const aliasedIps: string[] = [];
  let ports: { grpc: number; http: number; metrics: number; upstream: number };

  const readRepository = (name: string) =>
    suite.kube.read<DynamoKserveRepository>(
      "dynamokserve.dev/v1alpha1",
      "DynamoKserveRepository",
      suite.namespace,
      name,
    );
  const modelsOf = (repository: DynamoKserveRepository): Map<string, RepositoryModelStatus> =>
    new Map((repository.status?.models ?? []).map((model) => [`${model.name}:${model.version ?? ""}`, model]));
  /** The IP of a Ready (kwok) pod of the repository. */
  const readyPodIp = (repository: string): Promise<string> =>
    eventually(async () => {
      const pods = await suite.kube.api.list<V1Pod>(
        "v1",
        "Pod",
        suite.namespace,
        undefined,
        undefined,
        undefined,
        undefined,
        `dynamokserve.dev/repository=${repository}`,
      );
      const ready = pods.items.find((pod) =>
        pod.status?.conditions?.some((condition) => condition.type === "Ready" && condition.status === "True"),
      );
      assert.ok(ready?.status?.podIP, "a Ready pod with an IP");
      return ready.status.podIP;
    }, 30_000);

  before(async () => {
    corpus = tritonRepositoryCorpus();
    upstreamConfigs = mkdtempSync(join(tmpdir(), "dynamo-kserve-upstream-"));
    // The "Triton" upstream: any KServe v2 server with the forwarded model ready will do.
    writeFileSync(join(upstreamConfigs, "simple_string.pbtxt"), IDENTITY_CONFIG);
    const [grpc, http, metrics, upstreamPort] = (await freePorts(4)) as [number, number, number, number];
    ports = { grpc, http, metrics, upstream: upstreamPort };
    upstream = await startServer(["--model-repository", upstreamConfigs, "--grpc-port", String(ports.upstream)]);
  });
  after(async () => {
    await dataplane?.stop();
    await upstream?.stop();
    for (const ip of aliasedIps) execFileSync("ip", ["addr", "del", `${ip}/32`, "dev", "lo"]);
    rmSync(corpus, { recursive: true, force: true });
    rmSync(upstreamConfigs, { recursive: true, force: true });
  });

  it("makes one data plane over the ConfigMap and the claim, forwarding to the upstream; not Ready without its ConfigMap", async () => {
    const { kube, namespace } = suite;
    for (const object of boundClaimObjects(namespace, "triton-repo", corpus)) await kube.create(object);
    await kube.create(
      repositoryObject(namespace, "triton-models", {
        configMapRef: { name: "triton-configs" },
        persistentVolumeClaim: { claimName: "triton-repo", subPath: "models" },
        upstream: { address: `127.0.0.1:${ports.upstream}` },
        grpcPort: ports.grpc,
        httpPort: ports.http,
        metricsPort: ports.metrics,
      }),
    );
    const repository = await eventually(async () => {
      const current = await readRepository("triton-models");
      assert.equal(conditionOf(current, "Ready")?.reason, "ConfigMapNotFound");
      return current;
    });
    assert.match(
      conditionOf(repository, "Ready")!.message,
      /ConfigMap triton-configs \(spec.configMapRef\) does not exist/,
    );
    assert.equal(repository.status?.endpoint, `triton-models.${namespace}.svc:${ports.grpc}`);
    assert.equal(repository.status?.httpEndpoint, `http://triton-models.${namespace}.svc:${ports.http}`);

    const deployment = await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "triton-models");
    const pod = deployment.spec!.template.spec!;
    assert.deepEqual(pod.containers[0]!.args, [
      "dataplane",
      "--model-repository",
      "/models",
      "--model-repository",
      "/repository",
      "--model-files-root",
      "/repository",
      "--forward-unsupported",
      `127.0.0.1:${ports.upstream}`,
      "--grpc-port",
      String(ports.grpc),
      "--http-port",
      String(ports.http),
      "--metrics-port",
      String(ports.metrics),
      "--shutdown-grace-secs",
      "30",
      "--drain-delay-secs",
      "5",
      "--log-level",
      "info",
    ]);
    assert.deepEqual(
      pod.containers[0]!.volumeMounts?.map((mount) => [mount.name, mount.mountPath, mount.subPath, mount.readOnly]),
      [
        ["model-configs", "/models", undefined, true],
        ["repository", "/repository", "models", true],
        ["tmp", "/tmp", undefined, undefined],
      ],
    );
    assert.equal(pod.volumes?.[0]?.configMap?.name, "triton-configs");
    assert.deepEqual({ ...pod.volumes?.[1]?.persistentVolumeClaim }, { claimName: "triton-repo", readOnly: true });
    assert.deepEqual(deployment.spec?.selector.matchLabels, { "dynamokserve.dev/repository": "triton-models" });
    assert.equal(deployment.metadata?.ownerReferences?.[0]?.kind, "DynamoKserveRepository");
    const service = await kube.read<V1Service>("v1", "Service", namespace, "triton-models");
    assert.deepEqual(
      service.spec?.ports?.map((port) => [port.name, port.port, port.appProtocol]),
      [
        ["grpc", ports.grpc, "kubernetes.io/h2c"],
        ["http", ports.http, "http"],
        ["metrics", ports.metrics, "http"],
      ],
    );
  });

  it("lists every model as a ready pod reports it: local, forwarded to the upstream, overridden, broken with file:line", async () => {
    const { kube, namespace } = suite;
    await kube.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "triton-configs", namespace },
      data: { "identity_fp32.pbtxt": IDENTITY_CONFIG, "broken_dims.pbtxt": FIXED_BROKEN_DIMS, "README.md": "ignored" },
    });
    // kwok makes the pod Ready with an IP; the pod's data plane runs here, on that IP, with
    // the Deployment's arguments and the volumes laid out as the kubelet would mount them.
    const podIp = await readyPodIp("triton-models");
    aliasOnLoopback(podIp);
    aliasedIps.push(podIp);
    const configs = mkdtempSync(join(tmpdir(), "dynamo-kserve-configmap-"));
    writeFileSync(join(configs, "identity_fp32.pbtxt"), IDENTITY_CONFIG);
    writeFileSync(join(configs, "broken_dims.pbtxt"), FIXED_BROKEN_DIMS);
    const deployment = await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "triton-models");
    const mounted: Record<string, string> = { "/models": configs, "/repository": corpus };
    const args = deployment.spec!.template.spec!.containers[0]!.args!.slice(1).map((arg) => mounted[arg] ?? arg);
    // The image's python3 has numpy; here, the test venv's interpreter stands in for it.
    dataplane = await startServer([...args, "--host", podIp, "--python", MODELS_PYTHON]);

    // The pod's ports open before its start-up loads end, so the operator may first see models
    // still loading: wait for every model that loads here to be reported ready (which of the
    // Python and ONNX models is slowest depends on the machine's load).
    // The forwarded ones settle when the upstream has answered for them.
    const settled: Record<string, string> = {
      "identity_fp32:1": "READY",
      "add_sub_versions:2": "READY",
      "repeat_int32:1": "READY",
      "add_sub_python:1": "READY",
      "broken_dims:1": "READY",
      "simple_string:1": "READY",
      "simple:1": "UNAVAILABLE",
    };
    const repository = await eventually(async () => {
      const current = await readRepository("triton-models");
      assert.equal(conditionOf(current, "ModelsReady")?.reason, "ModelsUnavailable", JSON.stringify(current.status));
      const reported = modelsOf(current);
      for (const [key, state] of Object.entries(settled))
        assert.equal(reported.get(key)?.state, state, `${key}: ${JSON.stringify(current.status)}`);
      return current;
    }, 30_000);
    const models = modelsOf(repository);
    const state = (key: string) => models.get(key)?.state;
    assert.equal(state("identity_fp32:1"), "READY", "from the ConfigMap, run locally");
    assert.equal(state("add_sub_versions:2"), "READY", "ONNX from the claim, the version its policy names");
    assert.equal(state("repeat_int32:1"), "READY", "decoupled, run locally");
    assert.equal(state("add_sub_python:1"), "READY", "python: run here by the python engine");
    assert.equal(state("simple_string:1"), "READY", "forwarded, and the upstream has it ready");
    assert.equal(state("broken_dims:1"), "READY", "the ConfigMap's config overrides the claim's broken one");
    assert.equal(state("simple:1"), "UNAVAILABLE", "forwarded, but the upstream does not have it");
    assert.match(models.get("simple:1")!.reason!, /upstream/);
    assert.equal(state("broken_syntax:"), "UNAVAILABLE");
    assert.match(models.get("broken_syntax:")!.reason!, /broken_syntax\/config\.pbtxt:\d+/);
    assert.match(models.get("broken_enum:")!.reason!, /broken_enum\/config\.pbtxt:\d+/);
    const ready = [...models.values()].filter((model) => model.state === "READY").length;
    assert.equal(repository.status?.modelsReady, `${ready}/${models.size}`);
    assert.equal(conditionOf(repository, "Available")?.status, "True");
    assert.equal(conditionOf(repository, "Ready")?.reason, "ModelsUnavailable");
    assert.match(conditionOf(repository, "ModelsReady")!.message, /^\d+ of \d+ not ready: /);

    const table = await suite.cluster.request(
      "GET",
      `/apis/dynamokserve.dev/v1alpha1/namespaces/${namespace}/dynamokserverepositories/triton-models`,
      undefined,
      "application/json;as=Table;v=v1;g=meta.k8s.io",
    );
    const parsed = JSON.parse(table.body) as { columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
    assert.deepEqual(
      parsed.columnDefinitions.map((column) => column.name),
      ["Name", "Ready", "Models", "Endpoint", "Replicas", "Autoscaler", "Age"],
    );
    assert.deepEqual(parsed.rows[0]?.cells.slice(0, 4), [
      "triton-models",
      "False",
      `${ready}/${models.size}`,
      `triton-models.${namespace}.svc:${ports.grpc}`,
    ]);
  });

  it("follows the repository without Kubernetes noticing, and turns Ready when every model is", async () => {
    // Removing what cannot be served from the claim: the data plane's poll drops them,
    // and the operator's next look says so.
    for (const model of ["broken_syntax", "broken_enum", "broken_unknown_field", "densenet_onnx"]) {
      rmSync(join(corpus, model), { recursive: true });
    }
    for (const model of ["simple", "simple_string", "simple_sequence", "ensemble_add_sub"]) {
      writeFileSync(join(upstreamConfigs, `${model}.pbtxt`), IDENTITY_CONFIG);
    }
    const repository = await eventually(
      async () => {
        const current = await readRepository("triton-models");
        assert.equal(conditionOf(current, "Ready")?.status, "True", JSON.stringify(current.status?.conditions));
        return current;
      },
      30_000,
      250,
    );
    const models = modelsOf(repository);
    assert.equal(models.has("broken_syntax:"), false);
    assert.equal(models.get("simple:1")?.state, "READY");
    assert.equal(conditionOf(repository, "ModelsReady")?.reason, "AllModelsReady");
    assert.match(conditionOf(repository, "Ready")!.message, /^\d+ models ready, served at triton-models\./);
  });

  it("keeps the last list and says IndexFailed when the pod stops answering", async () => {
    const before = modelsOf(await readRepository("triton-models"));
    await dataplane?.stop();
    dataplane = undefined;
    const repository = await eventually(async () => {
      const current = await readRepository("triton-models");
      assert.equal(conditionOf(current, "ModelsReady")?.reason, "IndexFailed");
      return current;
    }, 30_000);
    assert.equal(conditionOf(repository, "ModelsReady")?.status, "Unknown");
    assert.equal(conditionOf(repository, "Ready")?.status, "False");
    assert.deepEqual(modelsOf(repository), before);
  });

  it("does not take over a Service somebody else owns: Ready False, NameTaken, the Service untouched", async () => {
    const { kube, namespace } = suite;
    await kube.create({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "triton", namespace },
      spec: { selector: { app: "triton" }, ports: [{ name: "grpc", port: 8001 }] },
    });
    await kube.create(repositoryObject(namespace, "triton", { configMapRef: { name: "triton-configs" } }));
    const repository = await eventually(async () => {
      const current = await readRepository("triton");
      assert.equal(conditionOf(current, "Ready")?.reason, "NameTaken");
      return current;
    });
    assert.match(conditionOf(repository, "Ready")!.message, /a Service named triton exists and is not managed by/);
    const service = await kube.read<V1Service>("v1", "Service", namespace, "triton");
    assert.deepEqual(service.spec?.selector, { app: "triton" });
    assert.equal(await kube.exists("apps/v1", "Deployment", namespace, "triton"), false);
  });

  it("scales like a model: kubectl scale dkr, a disruption budget past one pod, an autoscaler that owns the count, pods placed and drained as asked", async () => {
    const { kube, namespace, cluster } = suite;
    await kube.create(
      repositoryObject(namespace, "scaled-repo", {
        configMapRef: { name: "triton-configs" },
        replicas: 1,
        pod: { nodeSelector: { "kubernetes.io/os": "linux" } },
        shutdown: { drainDelaySeconds: 2, gracePeriodSeconds: 60 },
      }),
    );
    const deployment = await eventually(() =>
      kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "scaled-repo"),
    );
    const pod = deployment.spec?.template.spec;
    assert.deepEqual(pod?.nodeSelector, { "kubernetes.io/os": "linux" });
    assert.equal(pod?.terminationGracePeriodSeconds, 67);
    assert.match(pod?.containers[0]?.args?.join(" ") ?? "", /--shutdown-grace-secs 60 --drain-delay-secs 2/);
    cluster.kubectl("scale", "dkr", "scaled-repo", "-n", namespace, "--replicas", "3");
    await eventually(async () => assert.equal((await readRepository("scaled-repo")).status?.replicas, 3));
    const scale = JSON.parse(
      cluster.kubectl(
        "get",
        "--raw",
        `/apis/dynamokserve.dev/v1alpha1/namespaces/${namespace}/dynamokserverepositories/scaled-repo/scale`,
      ),
    ) as { status: { replicas: number; selector: string } };
    assert.deepEqual(scale.status, { replicas: 3, selector: "dynamokserve.dev/repository=scaled-repo" });
    await eventually(() => kube.read("policy/v1", "PodDisruptionBudget", namespace, "scaled-repo"));
    // Autoscaling instead of a fixed count: the HPA on the Deployment; replicas is refused beside it.
    await kube.mergePatch(
      repositoryObject(namespace, "scaled-repo", {
        replicas: null,
        autoscaling: { minReplicas: 2, maxReplicas: 4, targetCPUUtilization: 80 },
        resources: { requests: { cpu: "100m" } },
      } as unknown as DynamoKserveRepository["spec"]),
    );
    const hpa = await eventually(() =>
      kube.read<V2HorizontalPodAutoscaler>("autoscaling/v2", "HorizontalPodAutoscaler", namespace, "scaled-repo"),
    );
    assert.deepEqual(
      [
        hpa.spec?.scaleTargetRef.name,
        hpa.spec?.minReplicas,
        hpa.spec?.metrics?.[0]?.resource?.target.averageUtilization,
      ],
      ["scaled-repo", 2, 80],
    );
    assert.throws(
      () => cluster.kubectl("scale", "dkr", "scaled-repo", "-n", namespace, "--replicas", "1"),
      /replicas cannot be set with autoscaling/,
    );
  });

  it("writes the status from what it saw after asking the pod: a ConfigMap made while the pod answered counts", async () => {
    const { kube, namespace } = suite;
    const grpcPort = await freePort();
    await kube.create(repositoryObject(namespace, "held-repo", { configMapRef: { name: "held-configs" }, grpcPort }));
    const podIp = await readyPodIp("held-repo");
    aliasOnLoopback(podIp);
    aliasedIps.push(podIp);
    // A pod that holds RepositoryIndex until told: the first ask is answered when the test
    // says, every later one never (so no later reconcile overwrites the status in the window).
    const pod = await heldIndexServer(`${podIp}:${grpcPort}`);
    try {
      await pod.firstAsk;
      await kube.create({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "held-configs", namespace },
        data: { "m.pbtxt": IDENTITY_CONFIG },
      });
      // The operator's ConfigMap watch sees it within milliseconds; give it ample time.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      pod.answerFirst([{ name: "m", version: "1", state: "READY", reason: "" }]);
      const repository = await eventually(
        async () => {
          const current = await readRepository("held-repo");
          assert.equal(current.status?.modelsReady, "1/1");
          return current;
        },
        4_000,
        50,
      );
      assert.notEqual(conditionOf(repository, "Ready")?.reason, "ConfigMapNotFound", JSON.stringify(repository.status));
    } finally {
      pod.server.forceShutdown();
    }
  });
});

/** A data-plane stand-in on `address` whose first RepositoryIndex waits for `answerFirst`. */
async function heldIndexServer(address: string): Promise<{
  server: Server;
  firstAsk: Promise<void>;
  answerFirst(models: RepositoryIndexResponse["models"]): void;
}> {
  let asked: () => void = () => undefined;
  const firstAsk = new Promise<void>((resolve) => (asked = resolve));
  let answer: ((models: RepositoryIndexResponse["models"]) => void) | undefined;
  let askedBefore = false;
  const implementation: Partial<GRPCInferenceServiceServer> = {
    repositoryIndex: (_call, callback) => {
      if (askedBefore) return; // held until the caller's deadline
      askedBefore = true;
      answer = (models) => callback(null, { models });
      asked();
    },
    modelReady: (_call, callback) => callback(null, { ready: true }),
  };
  const server = new Server();
  server.addService(GRPCInferenceServiceService, implementation as GRPCInferenceServiceServer);
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, ServerCredentials.createInsecure(), (error, port) =>
      error ? reject(error) : resolve(port),
    ),
  );
  return { server, firstAsk, answerFirst: (models) => answer?.(models) };
}

/**
 * Gives this machine the pod's IP on loopback, so the pod's data plane runs here on it. `replace`,
 * not `add`: a run killed before its clean-up leaves the address, and the next run must not fail on it.
 */
function aliasOnLoopback(ip: string): void {
  execFileSync("ip", ["addr", "replace", `${ip}/32`, "dev", "lo"]);
}

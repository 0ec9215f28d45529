import assert from "node:assert/strict";
import {
  execFile,
  execFileSync,
  spawn,
  type ChildProcess,
  type ExecFileSyncOptionsWithStringEncoding,
} from "node:child_process";
import { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { parse as parseYaml } from "yaml";
import { request as httpRequest } from "undici";
import { credentials, status, type ServiceError } from "@grpc/grpc-js";
import type { V1Pod, V1Service } from "@kubernetes/client-node";
import { REPO_ROOT, TestCluster } from "../cluster/cluster.js";
import { NODE_NAME, RealNode, realNodeUnavailable } from "../cluster/node.js";
import { eventually } from "../support/eventually.js";
import { codeBlocks, shellCommands } from "../support/docs.js";
import { buildImage, IMAGE, requireDocker } from "../support/image.js";
import { freePort } from "../support/ports.js";
import { CACHE_DIR, helmBinary, requireHelm, requireProgram } from "../support/prerequisites.js";
import { KUBE_PROMETHEUS_STACK, PrometheusStack } from "../support/prometheus-stack.js";
import { MetricsServer } from "../support/metrics-server.js";
import { Keda } from "../support/keda.js";
import { PrometheusAdapter } from "../support/prometheus-adapter.js";
import { requirePlatform } from "../support/platform.js";
import { ClosedLoopLoad, type LoadOutcome } from "../support/load.js";
import { scrape, valueOf } from "../support/prometheus.js";
import { installGatewayApi, Traefik, traefikGateway } from "../support/gateway.js";
import { DESTINATION_HEADER, EndpointPicker, endpointPickerImage, ExtProcGateway } from "../support/endpoint-picker.js";
import { ModelInferRequest, type ModelInferResponse } from "../../proto/gen/ts/grpc_service.js";
import { GRPCInferenceServiceClient } from "../../proto/gen/ts/grpc_service.js";
import { tritonRepositoryCorpus } from "../../operator/test/fixtures/triton-repository.js";
import {
  boundClaimObjects,
  conditionOf,
  IDENTITY_CONFIG,
  repositoryObject,
} from "../../operator/test/fixtures/kube.js";
import type { DynamoKserveRepository } from "../../operator/src/api/v1alpha1.js";
import { kubernetesName } from "../../operator/src/migrate/manifests.js";
import { call as callRpc, infer, startServer, streamAll } from "../../dataplane/test/fixtures/server.js";
import { addSubRequest, identityRequest, promptRequest } from "../../dataplane/test/fixtures/requests.js";
import { CLI, EXAMPLES } from "../../dataplane/test/fixtures/paths.js";
import { VARIANT_HEADER } from "../../lib/contract/dataplane.js";
import { requireObjectStore, startSeaweedFs } from "../../lib/test/object-stores.js";

/** The commands of the Kubernetes getting-started page (DEPLOY_PAGE), in order; the test runs exactly these. */
const DEPLOY_PAGE = "docs/getting-started/kubernetes.md";
const DEPLOY_SECTION = "Deploy the example model";
const DEPLOY_COMMANDS = [
  `docker build -t ${IMAGE} .`,
  "helm install dynamo-kserve helm/dynamo-kserve --namespace dynamo-kserve-system --create-namespace --wait",
  "kubectl apply -f examples/models/identity-fp32.yaml",
  "kubectl wait dkm/identity-fp32 --for=condition=Ready --timeout=180s",
  "kubectl get dkm identity-fp32",
  "kubectl port-forward service/identity-fp32 8001:8001 &",
  "python examples/tools/infer_identity.py localhost:8001 identity-fp32",
];

const PYTHON = join(process.env["DYNAMO_KSERVE_VENV"] ?? join(CACHE_DIR, "venv"), "bin", "python");

/** `dynamo-kserve infer` of add_sub_versions through a Service's ClusterIP: [0,1,2,3] + [1,1,1,1]. */
async function inferAddSub(
  clusterIP: string,
): Promise<{ model_version: string; outputs: { name: string; values: number[] }[] }> {
  const { stdout } = await promisify(execFile)(process.execPath, [
    CLI,
    "infer",
    "add_sub_versions",
    "--url",
    `${clusterIP}:8001`,
    "--input",
    "INPUT0:FP32:1x4=0,1,2,3",
    "--input",
    "INPUT1:FP32:1x4=1,1,1,1",
  ]);
  return JSON.parse(stdout) as { model_version: string; outputs: { name: string; values: number[] }[] };
}

/** A ModelInfer reply's OUTPUT0 as FP32 values (raw contents, in the reply's output order). */
function output0(reply: ModelInferResponse): number[] {
  const index = reply.outputs.findIndex((output) => output.name === "OUTPUT0");
  assert.ok(index >= 0, "no OUTPUT0");
  return [...new Float32Array(new Uint8Array(reply.rawOutputContents[index]!).buffer)];
}

/** The commands of the page's deploy section: its shell block, as a reader copies it. */
function pageDeployCommands(): string[] {
  const [block] = codeBlocks(DEPLOY_PAGE, { heading: DEPLOY_SECTION, language: "sh" });
  assert.ok(block, `${DEPLOY_PAGE} has no shell block under '${DEPLOY_SECTION}'`);
  return shellCommands(block);
}

/**
 * The user's whole path on a real cluster whose node really runs pods (kubelet + containerd
 * + CNI + kube-proxy, node.ts): build the image, install the chart (the operator runs as
 * pods of that image), apply the example model, wait for Ready, call it with the stock
 * Triton client through a port-forward and through the Service's ClusterIP, and find the
 * requests in Prometheus, which scrapes what the operator's ServiceMonitor selects.
 */
describe("deploy on Kubernetes: the getting-started page's commands on a real node", function () {
  this.timeout(900_000);
  let cluster: TestCluster | undefined;
  let node: RealNode | undefined;
  let prometheus: PrometheusStack | undefined;
  let adapter: PrometheusAdapter | undefined;
  let metricsServer: MetricsServer | undefined;
  let keda: Keda | undefined;
  const background: ChildProcess[] = [];
  let localPort = 0;

  /** Runs one of the page's commands against the test cluster (a free local port instead of 8001). */
  const run = async (command: string): Promise<string> => {
    const [program, ...args] = command
      .replace(/ &$/, "")
      .replaceAll("8001:8001", `${localPort}:8001`)
      .replaceAll("localhost:8001", `localhost:${localPort}`)
      .split(" ");
    const options: ExecFileSyncOptionsWithStringEncoding = {
      cwd: REPO_ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    };
    switch (program) {
      case "docker":
        assert.deepEqual(args, ["build", "-t", IMAGE, "."]);
        // The same build, on the stand-in base image (no registry here).
        return buildImage();
      case "helm":
        return execFileSync(helmBinary(), [...args, "--kubeconfig", cluster!.adminKubeconfig], options);
      case "kubectl":
        if (command.endsWith(" &")) return startBackground(join(cluster!.bin, "kubectl"), args, /^Forwarding from/);
        return execFileSync(
          join(cluster!.bin, "kubectl"),
          ["--kubeconfig", cluster!.adminKubeconfig, ...args],
          options,
        );
      case "python":
        return execFileSync(PYTHON, args, options);
      default:
        throw new Error(`no way to run ${command}`);
    }
  };

  const startBackground = async (program: string, args: string[], ready: RegExp): Promise<string> => {
    const child = spawn(program, ["--kubeconfig", cluster!.adminKubeconfig, ...args], { cwd: REPO_ROOT });
    background.push(child);
    return new Promise((resolve, reject) => {
      createInterface({ input: child.stdout! }).on("line", (line) => ready.test(line) && resolve(line));
      child.once("exit", (code) => reject(new Error(`${program} ${args.join(" ")} exited ${code}`)));
    });
  };

  /** Where identityLoad sends its requests: a Service's ClusterIP, or a gateway and its routes' hostnames. */
  interface LoadTarget {
    readonly grpc: string;
    readonly http: string;
    /** The gRPC :authority and the HTTP Host header (a gateway's routes match on them). */
    readonly grpcAuthority?: string;
    readonly httpHost?: string;
  }
  const serviceTarget = (model: string): LoadTarget => {
    const address = cluster!.kubectlGet<V1Service>("service", model).spec?.clusterIP;
    return { grpc: `${address}:8001`, http: `http://${address}:8000` };
  };

  /**
   * Closed-loop load on an identity model (identity-fp32's config), by default through its
   * Service's ClusterIP: 4 gRPC clients (one HTTP/2 connection each) and 8 keep-alive HTTP
   * clients. stop() gives [gRPC, HTTP] outcomes.
   */
  const identityLoad = (
    model = "identity-fp32",
    target: LoadTarget = serviceTarget(model),
  ): { stop(): Promise<LoadOutcome[]> } => {
    const authority = target.grpcAuthority !== undefined ? { "grpc.default_authority": target.grpcAuthority } : {};
    const grpc = Array.from(
      { length: 4 },
      () => new GRPCInferenceServiceClient(target.grpc, credentials.createInsecure(), authority),
    );
    const request = identityRequest({ model, width: 4 });
    const grpcLoad = new ClosedLoopLoad(4, async (client) => {
      const reply = await infer(grpc[client]!, request);
      if (reply.outputs[0]?.name !== "OUTPUT0") throw new Error("no OUTPUT0");
    });
    const httpLoad = new ClosedLoopLoad(8, async () => {
      const response = await httpRequest(`${target.http}/v2/models/${model}/infer`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(target.httpHost !== undefined ? { host: target.httpHost } : {}),
        },
        body: JSON.stringify({ inputs: [{ name: "INPUT0", shape: [1, 4], datatype: "FP32", data: [1, 2, 3, 4] }] }),
      });
      await response.body.dump();
      if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
    });
    return {
      async stop() {
        const outcomes = await Promise.all([grpcLoad.stop(), httpLoad.stop()]);
        for (const client of grpc) client.close();
        return outcomes;
      },
    };
  };

  /**
   * Waits (3 minutes at most) until the autoscaled model has `replicas` ready pods, then stops
   * the load and asserts that none of its requests failed while pods were added.
   */
  const scaleUnderLoad = async (
    model: string,
    replicas: number,
    stopLoad: () => Promise<LoadOutcome[]>,
  ): Promise<LoadOutcome[]> => {
    let outcomes: LoadOutcome[] = [];
    try {
      await eventually(
        () => {
          const current = cluster!.kubectlGet<{ status?: { readyReplicas?: number } }>("dkm", model);
          assert.equal(current.status?.readyReplicas, replicas);
        },
        180_000,
        2_000,
      );
    } finally {
      outcomes = await stopLoad();
    }
    for (const outcome of outcomes) {
      assert.equal(
        outcome.failed,
        0,
        `${outcome.failed} of ${outcome.sent} failed while pods were added: ${outcome.errors}`,
      );
    }
    return outcomes;
  };

  /** Waits until Prometheus scrapes the model (its ServiceMonitor's job; the test carries the config Secret to the reloader). */
  const scrapedByPrometheus = (model: string): Promise<void> =>
    eventually(
      async () => {
        await prometheus!.syncConfigSecret();
        assert.ok((await prometheus!.scrapeJobs()).includes(`serviceMonitor/default/${model}/0`));
      },
      90_000,
      1_000,
    );

  /**
   * A Service's ClusterIP once the node's kube-proxy routes its `port` to endpoints (90 s at
   * most; a sync takes well under a second, a failed one is retried after 30 s). Before that a
   * request leaves the machine, and what answers it is not the model: the failure names the
   * Service and ends with what kube-proxy logged last.
   */
  const routedClusterIp = async (service: string, port: number, namespace = "default"): Promise<string> => {
    const clusterIP = cluster!.kubectlGet<V1Service>("service", service, "-n", namespace).spec?.clusterIP ?? "";
    try {
      await eventually(() => assert.ok(node!.serviceRouted(clusterIP, port)), 90_000, 500);
    } catch {
      throw new Error(
        `kube-proxy routed no ${clusterIP}:${port} (${namespace}/${service}) in 90 s; its log ends:\n${node!.kubeProxyLogTail()}`,
      );
    }
    return clusterIP;
  };

  /** One KServe v2 generate call on a simulated LLM through its Service's ClusterIP; throws unless 200. */
  const generateCall = (clusterIP: string | undefined, model: string) => async (): Promise<void> => {
    const response = await fetch(`http://${clusterIP}:8000/v2/models/${model}/generate`, {
      method: "POST",
      body: JSON.stringify({ text_input: "load" }),
    });
    const body = await response.text();
    if (response.status !== 200) throw new Error(`generate: HTTP ${response.status} ${body.slice(0, 300)}`);
  };

  /** Waits until the HPA has taken the idle model back to 1 pod (the examples' 30 s stabilization window). */
  const scaledDownWhenIdle = (model: string): Promise<void> =>
    eventually(
      () => {
        const deployment = cluster!.kubectlGet<{ spec?: { replicas?: number } }>("deployment", model);
        assert.equal(deployment.spec?.replicas, 1);
      },
      180_000,
      2_000,
    );

  /** Applies a model with an InferencePool (its picker named `<model>-epp`) and waits until it is Ready. */
  const pooledModel = async (
    name: string,
    replicas: number,
    config: string,
    protocol: "gRPC" | "HTTP" = "gRPC",
  ): Promise<void> => {
    cluster!.apply({
      apiVersion: "dynamokserve.dev/v1alpha1",
      kind: "DynamoKserveModel",
      metadata: { name, namespace: "default" },
      spec: {
        replicas,
        modelConfig: { inline: config },
        inferencePool: { protocol, endpointPickerRef: { name: `${name}-epp`, port: { number: 9002 } } },
      },
    });
    await run(`kubectl wait dkm/${name} --for=condition=Ready --timeout=180s`);
  };

  /** The names of a model's pods (terminating ones included). */
  const podsOf = (model: string): V1Pod[] =>
    cluster!.kubectlGet<{ items: V1Pod[] }>("pods", "-l", `dynamokserve.dev/model=${model}`).items;

  /**
   * A model's pods once `count` of them run with their container ready (and so have an
   * address): the model's Ready condition means one serves, not all.
   */
  const readyPodsOf = (model: string, count: number): Promise<V1Pod[]> =>
    eventually(
      () => {
        const pods = podsOf(model);
        assert.equal(pods.length, count, pods.map((pod) => pod.metadata?.name).join(","));
        for (const pod of pods) {
          assert.ok(pod.status?.containerStatuses?.[0]?.ready && pod.status.podIP, `${pod.metadata?.name} not ready`);
        }
        return pods;
      },
      120_000,
      1_000,
    );

  /** The names of a repository's pods (terminating ones included). */
  const repositoryPods = (repository: string): V1Pod[] =>
    cluster!.kubectlGet<{ items: V1Pod[] }>("pods", "-l", `dynamokserve.dev/repository=${repository}`).items;

  before(async function () {
    requireDocker(this);
    requireHelm(this);
    requireProgram(this, PYTHON, "the tritonclient venv", "run scripts/setup-python.sh");
    requireObjectStore(this, "seaweedfs");
    const unavailable = realNodeUnavailable();
    if (unavailable !== undefined) {
      if (process.env["CI"] === "true") throw new Error(`no real node: ${unavailable}`);
      console.warn(`\n  !!! SKIPPING the deploy test: no real node (${unavailable})\n`);
      this.skip();
    }
    localPort = await freePort();
  });

  after(async () => {
    for (const child of background) child.kill();
    await keda?.stop();
    await metricsServer?.stop();
    await adapter?.stop();
    await prometheus?.stop();
    await node?.stop();
    await cluster?.stop();
  });

  it("the getting-started page's deploy section holds exactly the commands this test runs", () => {
    assert.deepEqual(pageDeployCommands(), DEPLOY_COMMANDS);
  });

  it("builds the image, starts a cluster with a real node and the Prometheus Operator, and loads the image into it", async function () {
    assert.equal(await run(DEPLOY_COMMANDS[0]!), IMAGE);
    cluster = await TestCluster.start({ fakeNodes: 0, reachableFromPods: true });
    node = await RealNode.start(cluster, [IMAGE]);
    // Each platform component is asked for where a step first runs it: under CI the later
    // ones may still be building in the background (.ci/run) while the earlier steps run.
    await requirePlatform(this, "prometheus-operator");
    await requirePlatform(this, "prometheus");
    prometheus = await PrometheusStack.start(cluster);
  });

  it("helm install: the operator runs as real pods of the image", async () => {
    await run(DEPLOY_COMMANDS[1]!);
    const pods = cluster!.kubectlGet<{ items: V1Pod[] }>("pods", "-n", "dynamo-kserve-system");
    assert.equal(pods.items.length, 2);
    for (const pod of pods.items) {
      assert.equal(pod.spec?.nodeName, NODE_NAME);
      assert.equal(pod.status?.phase, "Running");
      assert.equal(pod.spec?.containers[0]?.image, IMAGE);
    }
  });

  it("kubectl apply → the model is Ready, its pods run, and kubectl get dkm shows the endpoint", async () => {
    assert.match(await run(DEPLOY_COMMANDS[2]!), /dynamokservemodel.dynamokserve.dev\/identity-fp32 created/);
    assert.match(await run(DEPLOY_COMMANDS[3]!), /condition met/);
    const table = (await run(DEPLOY_COMMANDS[4]!)).trim().split("\n");
    assert.match(table[0]!, /^NAME\s+READY\s+MODEL\s+BACKEND\s+ENDPOINT\s+AUTOSCALER\s+AGE$/);
    assert.match(
      table[1]!,
      /^identity-fp32\s+True\s+identity-fp32\s+identity\s+identity-fp32\.default\.svc[^\s]*:8001\s/,
    );
    // Ready means one replica serves; the second follows (its gRPC readiness probe passes).
    await eventually(
      () => {
        const pods = podsOf("identity-fp32");
        assert.equal(pods.length, 2);
        for (const pod of pods) {
          assert.equal(pod.spec?.nodeName, NODE_NAME);
          assert.ok(pod.status?.containerStatuses?.[0]?.ready, `${pod.metadata?.name} ready`);
        }
      },
      60_000,
      500,
    );
  });

  it("the stock Triton client infers through kubectl port-forward and through the Service's ClusterIP", async () => {
    await run(DEPLOY_COMMANDS[5]!);
    assert.match(await run(DEPLOY_COMMANDS[6]!), /^identity-fp32 OUTPUT0 = \[\[0\.0, 1\.0, 2\.0, 3\.0\]\]$/m);
    const service = cluster!.kubectlGet<V1Service>("service", "identity-fp32");
    const grpcPort = service.spec?.ports?.find((port) => port.name === "grpc");
    assert.equal(grpcPort?.appProtocol, "kubernetes.io/h2c");
    const clusterAddress = `${await routedClusterIp("identity-fp32", grpcPort!.port)}:${grpcPort!.port}`;
    // A refused connection never reaches a data plane, so retrying keeps the request count exact.
    const throughService = await eventually(
      () =>
        execFileSync(PYTHON, ["examples/tools/infer_identity.py", clusterAddress, "identity-fp32"], {
          cwd: REPO_ROOT,
          encoding: "utf8",
          stdio: ["ignore", "pipe", "pipe"],
        }),
      30_000,
      1_000,
    );
    assert.match(throughService, /^identity-fp32 OUTPUT0 = /m);
  });

  it("the real Prometheus Operator selects the model's ServiceMonitor by kube-prometheus-stack's release label; Prometheus finds both pods through the API server, labels their series with the pods' variant, and counts those requests", async () => {
    const job = "serviceMonitor/default/identity-fp32/0";
    // A monitor without the release label, selecting the same Service: a Prometheus of
    // kube-prometheus-stack must ignore it (the example's label is what gets it scraped).
    cluster!.apply({
      apiVersion: "monitoring.coreos.com/v1",
      kind: "ServiceMonitor",
      metadata: { name: "unlabelled", namespace: "default" },
      spec: {
        selector: { matchLabels: { "dynamokserve.dev/model": "identity-fp32" } },
        endpoints: [{ port: "metrics" }],
      },
    });
    // The operator regenerates the configuration Secret; the kubelet's Secret volume would
    // carry it to the reloader, which renders it and has Prometheus reload.
    await eventually(
      async () => {
        await prometheus!.syncConfigSecret();
        assert.deepEqual(await prometheus!.scrapeJobs(), [job]);
      },
      90_000,
      1_000,
    );
    const pods = podsOf("identity-fp32");
    await eventually(
      async () => {
        const targets = (await prometheus!.targets()).filter((target) => target.scrapePool === job);
        assert.equal(targets.length, 2, JSON.stringify(targets));
        for (const target of targets) {
          assert.equal(target.health, "up", JSON.stringify(target));
          assert.equal(target.labels["namespace"], "default");
          assert.equal(target.labels["service"], "identity-fp32");
          assert.equal(target.labels["endpoint"], "metrics");
          // The ServiceMonitor's podTargetLabels: every series says which variant answered.
          assert.equal(target.labels["dynamokserve_dev_variant"], "stable");
        }
        assert.deepEqual(
          targets.map((target) => target.labels["pod"]).sort(),
          pods.map((pod) => pod.metadata?.name).sort(),
        );
        const [total] = await prometheus!.query('sum(nv_inference_request_success{model="identity-fp32"})');
        assert.equal(total?.value, 2, "one request through the port-forward, one through the ClusterIP");
      },
      90_000,
      1_000,
    );
    // What got it selected: the operator put the example's monitoring.labels on its ServiceMonitor.
    const monitor = cluster!.kubectlGet<{ metadata: { labels: Record<string, string> } }>(
      "servicemonitors.monitoring.coreos.com",
      "identity-fp32",
    );
    assert.equal(monitor.metadata.labels["release"], KUBE_PROMETHEUS_STACK.serviceMonitorSelector.matchLabels.release);
  });

  it("autoscales on requests in flight: the real prometheus-adapter serves them to the cluster's HPA controller; load adds pods, idle takes them away", async function () {
    await requirePlatform(this, "prometheus-adapter");
    const model = "mock-llm-autoscaled";
    adapter = await PrometheusAdapter.start(
      cluster!,
      prometheus!.url,
      join(REPO_ROOT, "examples", "autoscaling", "prometheus-adapter-rules.yaml"),
    );
    await run(`kubectl apply -f examples/models/${model}.yaml`);
    await run(`kubectl wait dkm/${model} --for=condition=Ready --timeout=180s`);
    await scrapedByPrometheus(model);
    const ourPods = (values: { describedObject: { name: string }; value: string }[]) =>
      values.filter((value) => value.describedObject.name.startsWith(`${model}-`));
    // An idle pod says 0 through the whole chain (not "missing", which an HPA reads otherwise).
    await eventually(
      async () => {
        const values = ourPods(await adapter!.podMetric("default", "dynamo_frontend_inflight_requests"));
        assert.deepEqual(
          values.map((value) => value.value),
          ["0"],
        );
      },
      120_000,
      2_000,
    );

    const call = generateCall(await routedClusterIp(model, 8000), model);
    await eventually(call, 30_000, 1_000);
    // 12 clients, each keeping one ~1 s request in flight: 12 in flight, 4 per pod is 3 pods.
    const load = new ClosedLoopLoad(12, call);
    const outcomes = await scaleUnderLoad(model, 3, async () => [await load.stop()]);
    console.log(`      autoscaling 1 → 3 pods under load: ${outcomes.map((o) => o.sent).join()} requests, 0 failed`);
    const hpa = cluster!.kubectlGet<{ spec: { scaleTargetRef: { kind: string; name: string } } }>("hpa", model);
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: "apps/v1", kind: "Deployment", name: model });
    await scaledDownWhenIdle(model);
  });

  it("autoscales on CPU: the real metrics-server reads the real kubelet's container CPU for the cluster's HPA controller; load adds a pod, idle takes it away", async function () {
    await requirePlatform(this, "metrics-server");
    const model = "identity-cpu-autoscaled";
    metricsServer = await MetricsServer.start(cluster!);
    await run(`kubectl apply -f examples/models/${model}.yaml`);
    await run(`kubectl wait dkm/${model} --for=condition=Ready --timeout=180s`);
    const cpuOf = async (): Promise<string[]> =>
      (await metricsServer!.podUsage("default"))
        .filter((pod) => pod.metadata.name.startsWith(`${model}-`))
        .map((pod) => pod.containers.find((container) => container.name === "dataplane")?.usage.cpu ?? "none");
    // The kubelet's CPU counter reaches the API (a rate needs two of metrics-server's scrapes).
    await eventually(async () => assert.equal((await cpuOf()).length, 1), 120_000, 2_000);
    // The monitoring guide's look at it: kubectl top reads the same API.
    const top = await run(`kubectl top pod -l dynamokserve.dev/model=${model}`);
    assert.match(top, new RegExp(`^${model}-\\S+\\s+\\d+m\\s+\\d+Mi\\s*$`, "m"));
    const clusterIP = await routedClusterIp(model, 8000);
    await eventually(
      async () => {
        const response = await fetch(`http://${clusterIP}:8000/v2/models/${model}/ready`, {
          signal: AbortSignal.timeout(2_000),
        });
        assert.equal(response.status, 200);
      },
      30_000,
      1_000,
    );
    const loadStart = Date.now();
    const load = identityLoad(model);
    const outcomes = await scaleUnderLoad(model, 2, () => load.stop());
    // The resource metrics API's quantities are in nanocores ("523593709n") or millicores.
    const millicores = (cpu: string): number =>
      cpu.endsWith("n")
        ? Math.round(parseInt(cpu, 10) / 1e6)
        : cpu.endsWith("m")
          ? parseInt(cpu, 10)
          : 1000 * Number(cpu);
    const usage = (await cpuOf()).map((cpu) => `${millicores(cpu)}m`);
    console.log(
      `      CPU autoscaling 1 → 2 pods under load in ${Math.round((Date.now() - loadStart) / 1000)} s: ${outcomes.map((o) => o.sent).join(" gRPC + ")} HTTP requests, 0 failed; CPU ${usage.join(", ")} of 200m requested`,
    );
    const hpa = cluster!.kubectlGet<{ spec: { metrics: { type: string; resource?: { name: string } }[] } }>(
      "hpa",
      model,
    );
    assert.deepEqual(
      hpa.spec.metrics.map((metric) => [metric.type, metric.resource?.name]),
      [["Resource", "cpu"]],
    );
    await scaledDownWhenIdle(model);
    console.log(`      idle: back to 1 pod; CPU ${(await cpuOf()).map((cpu) => `${millicores(cpu)}m`).join(", ")}`);
    await run(`kubectl delete -f examples/models/${model}.yaml`);
  });

  it("scales to zero with KEDA: idle 1 → 0 after the cooldown; a tritonclient ModelInfer (60 s deadline), a ModelStreamInfer stream and an OpenAI request through the Service all succeed while the model wakes; queue depth takes it 1 → 3 and back", async function () {
    await requirePlatform(this, "keda");
    const model = "mock-llm-scale-to-zero";
    keda = await Keda.start(cluster!);
    // The monitoring guide's commands, its Prometheus address this test's.
    const commands = shellCommands(
      codeBlocks("docs/guides/monitoring-and-autoscaling.md", {
        heading: "KEDA, and scale to zero",
        language: "sh",
      })[0]!,
    );
    assert.deepEqual(commands, [
      "helm upgrade dynamo-kserve helm/dynamo-kserve --namespace dynamo-kserve-system --reuse-values --wait --set autoscaling.keda.prometheusAddress=http://prometheus-operated.monitoring:9090",
      `kubectl apply -f examples/models/${model}.yaml`,
      `kubectl get scaledobject ${model}`,
      `kubectl get dkm ${model}`,
    ]);
    await run(commands[0]!.replace("http://prometheus-operated.monitoring:9090", prometheus!.url));
    await run(commands[1]!);
    await run(`kubectl wait dkm/${model} --for=condition=Ready --timeout=180s`);
    const current = () =>
      cluster!.kubectlGet<{
        status?: {
          autoscaler?: string;
          readyReplicas?: number;
          conditions?: { type: string; status: string; reason: string }[];
        };
      }>("dkm", model);
    const replicasWanted = () =>
      cluster!.kubectlGet<{ spec?: { replicas?: number } }>("deployment", model).spec?.replicas;
    // One request while the pod runs (a model just made is not taken to zero before its
    // cooldown); then, with none for the cooldown, KEDA takes the last pod away.
    const clusterIP = await routedClusterIp(model, 8000);
    const call = generateCall(clusterIP, model);
    await eventually(call, 30_000, 1_000);
    // KEDA's initialCooldownPeriod (30 s) counts from the ScaledObject's creation (its timestamp
    // in whole seconds, so the age computed is never short): within it, the idle model keeps its
    // pod. Later (a slow start on a busy machine), KEDA may rightly have taken it to zero already.
    const scaledObjectCreated = Date.parse(
      cluster!.kubectlGet<{ metadata: { creationTimestamp: string } }>("scaledobject", model).metadata
        .creationTimestamp,
    );
    const wantedAfterCall = replicasWanted();
    const scaledObjectAge = Date.now() - scaledObjectCreated;
    if (scaledObjectAge < 28_000) {
      assert.equal(wantedAfterCall, 1, "a model just made is not taken to zero before its cooldown");
    } else {
      console.log(`      the initial cooldown not checked: the model served ${scaledObjectAge} ms after it was made`);
    }
    // Requests while Prometheus scrapes the pod, until KEDA has seen the model in use.
    await scrapedByPrometheus(model);
    let idleSince = Date.now();
    await eventually(
      async () => {
        await call();
        idleSince = Date.now();
        assert.equal((await keda!.condition("default", model, "Active"))?.status, "True");
      },
      120_000,
      2_000,
    );
    await eventually(
      () => {
        assert.equal(replicasWanted(), 0);
        assert.equal(current().status?.autoscaler, "KEDA ScaledToZero");
      },
      240_000,
      2_000,
    );
    const idleSeconds = Math.round((Date.now() - idleSince) / 1000);
    assert.ok(idleSeconds >= 30, `scaled to zero ${idleSeconds} s after the last request, before the 30 s cooldown`);
    assert.match(await run(commands[2]!), new RegExp(`^${model}\\s.*\\bTrue\\b`, "m"));
    assert.match(await run(commands[3]!), /KEDA ScaledToZero/);
    // Ready at zero: the activator stands in for the pods (the Service reaches it).
    await eventually(
      () => {
        const ready = current().status?.conditions?.find((condition) => condition.type === "Ready");
        assert.equal(ready?.status, "True", JSON.stringify(current().status?.conditions));
        assert.equal(podsOf(model).length, 0);
      },
      120_000,
      1_000,
    );
    // The activator is Ready from the moment the last pod is not; kube-proxy sends the Service
    // to it a sync later (until then the Service, with no endpoint, refuses connections).
    const activatorIp = await eventually(
      () => {
        const [activator] = cluster!.kubectlGet<{ items: V1Pod[] }>(
          "pods",
          "-l",
          `app.kubernetes.io/name=dynamo-kserve-activator,app.kubernetes.io/instance=${model}`,
        ).items;
        assert.ok(activator?.status?.podIP, "the activator's pod has no address");
        for (const port of [8000, 8001]) assert.ok(node!.endpointRouted(activator.status.podIP, port), `port ${port}`);
        return activator.status.podIP;
      },
      60_000,
      500,
    ).catch((error: unknown) => {
      throw new Error(`kube-proxy sends the Service to no activator: ${String(error)}\n${node!.kubeProxyLogTail()}`);
    });

    // Three clients at once through the Service while no pod runs; each is held, then served.
    const wakeStart = Date.now();
    const elapsed = (): number => Math.round((Date.now() - wakeStart) / 100) / 10;
    const tritonclient = promisify(execFile)(
      PYTHON,
      [
        "-c",
        [
          "import sys, numpy as np, tritonclient.grpc as g",
          "c = g.InferenceServerClient(sys.argv[1])",
          'i = g.InferInput("text_input", [1], "BYTES")',
          'i.set_data_from_numpy(np.array([b"wake up"], dtype=object))',
          "r = c.infer(sys.argv[2], [i], client_timeout=60)",
          'print("text_output", r.as_numpy("text_output").tolist())',
        ].join("\n"),
        `${clusterIP}:8001`,
        model,
      ],
      { cwd: REPO_ROOT },
    ).then(({ stdout }) => ({ stdout, seconds: elapsed() }));
    const streamClient = new GRPCInferenceServiceClient(`${clusterIP}:8001`, credentials.createInsecure());
    const streamed = streamAll(streamClient, [promptRequest({ model, text: "stream", maxTokens: 4 })]).then(
      (replies) => ({ replies, seconds: elapsed() }),
    );
    const openai = fetch(`http://${clusterIP}:8000/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "wake up" }], max_tokens: 4 }),
      signal: AbortSignal.timeout(120_000),
    }).then(async (response) => ({ status: response.status, body: await response.text(), seconds: elapsed() }));
    try {
      const [viaTriton, viaStream, viaOpenai] = await Promise.all([tritonclient, streamed, openai]);
      assert.match(viaTriton.stdout, /^text_output \[/m);
      assert.ok(viaStream.replies.length > 0);
      for (const reply of viaStream.replies) assert.equal(reply.errorMessage, "", reply.errorMessage);
      assert.equal(viaOpenai.status, 200, viaOpenai.body);
      assert.match(viaOpenai.body, /"choices"/);
      // The activator's own measure of the cold start: first held request to first ready pod.
      const coldStart = valueOf(
        await scrape(`http://${activatorIp}:9091/metrics`),
        "dynamo_activator_cold_start_seconds_sum",
      );
      console.log(
        `      scale to zero: idle → 0 pods in ${idleSeconds} s (cooldown 30 s); woken by 3 held requests: tritonclient ModelInfer ${viaTriton.seconds} s, ModelStreamInfer ${viaStream.seconds} s, OpenAI ${viaOpenai.seconds} s; the activator's cold start ${coldStart.toFixed(1)} s`,
      );
    } finally {
      streamClient.close();
    }

    // Queue depth: 12 clients, the mocker runs 2 sequences per pod, the rest wait; 2 waiting per pod is the target.
    const load = new ClosedLoopLoad(12, call);
    const outcomes = await scaleUnderLoad(model, 3, async () => [await load.stop()]);
    console.log(`      KEDA on waiting requests: 1 → 3 pods under load, ${outcomes[0]!.sent} requests, 0 failed`);
    await scaledDownWhenIdle(model);
    await run(`kubectl delete -f examples/models/${model}.yaml`);
  });

  it("hot-reloads a model config edit in the running pods under load: no pod restarts, no request fails", async () => {
    const pods = podsOf("identity-fp32");
    const load = identityLoad();
    let outcomes: LoadOutcome[] = [];
    try {
      // The config lives in the model's ConfigMap, mounted as the data plane's repository:
      // the kubelet swaps the file, the data plane's poll loads it, the pods stay.
      const live = cluster!.kubectlGet<{ spec: { modelConfig: { inline: string } } }>("dkm", "identity-fp32");
      const edited = live.spec.modelConfig.inline.replace("max_batch_size: 8", "max_batch_size: 16");
      assert.notEqual(edited, live.spec.modelConfig.inline);
      cluster!.kubectl(
        "patch",
        "dkm",
        "identity-fp32",
        "--type",
        "merge",
        "-p",
        JSON.stringify({ spec: { modelConfig: { inline: edited } } }),
      );
      for (const pod of pods) {
        const client = new GRPCInferenceServiceClient(`${pod.status?.podIP}:8001`, credentials.createInsecure());
        try {
          await eventually(
            async () => {
              const reply = await callRpc(client, "modelConfig", { name: "identity-fp32", version: "" });
              assert.equal(reply.config?.maxBatchSize, 16, pod.metadata?.name);
            },
            90_000,
            1_000,
          );
        } finally {
          client.close();
        }
      }
    } finally {
      outcomes = await load.stop();
    }
    const after = podsOf("identity-fp32");
    assert.deepEqual(
      after.map((pod) => [pod.metadata?.name, pod.status?.containerStatuses?.[0]?.restartCount]),
      pods.map((pod) => [pod.metadata?.name, 0]),
    );
    console.log(
      `      hot reload under load: gRPC ${outcomes[0]!.sent} sent / ${outcomes[0]!.failed} failed, HTTP ${outcomes[1]!.sent} / ${outcomes[1]!.failed}`,
    );
    for (const outcome of outcomes) {
      assert.ok(outcome.sent > 0);
      assert.equal(outcome.failed, 0, `${outcome.failed} of ${outcome.sent} failed: ${outcome.errors}`);
    }
  });

  it("rolls pods under load without failing a request: gRPC and keep-alive HTTP clients through the ClusterIP, and 1 s requests on a single pod", async () => {
    const identity = identityLoad();
    // The autoscaled mocker runs one pod between scale-ups: each of its requests is ~1 s in flight.
    const llm = cluster!.kubectlGet<V1Service>("service", "mock-llm-autoscaled");
    const llmLoad = new ClosedLoopLoad(2, async () => {
      const response = await fetch(`http://${llm.spec?.clusterIP}:8000/v2/models/mock-llm-autoscaled/generate`, {
        method: "POST",
        body: JSON.stringify({ text_input: "roll" }),
      });
      await response.text();
      if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    });
    const podNames = (model: string) => podsOf(model).map((pod) => pod.metadata?.name);
    const oldPods = [...podNames("identity-fp32"), ...podNames("mock-llm-autoscaled")];
    let outcomes: LoadOutcome[] = [];
    try {
      // A pod template change (the log level is an argument) rolls both models' pods.
      for (const model of ["identity-fp32", "mock-llm-autoscaled"]) {
        await run(`kubectl patch dkm ${model} --type merge -p {"spec":{"logLevel":"debug"}}`);
      }
      for (const model of ["identity-fp32", "mock-llm-autoscaled"]) {
        await eventually(
          () => {
            const pods = podNames(model);
            assert.ok(pods.length > 0 && pods.every((pod) => !oldPods.includes(pod)), `${model}: ${pods}`);
          },
          240_000,
          1_000,
        );
        await run(`kubectl rollout status deployment/${model} --timeout=120s`);
      }
      // Keep the load on the new pods for a moment: connections moved, nothing lost.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
    } finally {
      outcomes = [...(await identity.stop()), await llmLoad.stop()];
    }
    const [grpcOutcome, httpOutcome, llmOutcome] = outcomes;
    console.log(
      `      roll-out under load: gRPC ${grpcOutcome!.sent} sent / ${grpcOutcome!.failed} failed, HTTP ${httpOutcome!.sent} / ${httpOutcome!.failed}, 1 s requests ${llmOutcome!.sent} / ${llmOutcome!.failed}`,
    );
    for (const outcome of outcomes) {
      assert.ok(outcome.sent > 0);
      assert.equal(outcome.failed, 0, `${outcome.failed} of ${outcome.sent} failed: ${outcome.errors}`);
    }
  });

  it("KServe v2 REST and OpenAI reach the pods through the Service's http port (ClusterIP)", async () => {
    const service = cluster!.kubectlGet<V1Service>("service", "identity-fp32");
    const httpPort = service.spec?.ports?.find((port) => port.name === "http");
    assert.equal(httpPort?.appProtocol, "http");
    const base = `http://${service.spec?.clusterIP}:${httpPort?.port}`;
    const reply = await eventually(
      async () => {
        const response = await fetch(`${base}/v2/models/identity-fp32/infer`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ inputs: [{ name: "INPUT0", shape: [1, 4], datatype: "FP32", data: [0, 1, 2, 3] }] }),
        });
        assert.equal(response.status, 200);
        return (await response.json()) as { outputs: { data: number[] }[] };
      },
      30_000,
      1_000,
    );
    assert.deepEqual(reply.outputs[0]?.data, [0, 1, 2, 3]);
    // Not an LLM: the OpenAI routes list nothing and say why a chat to it cannot work.
    assert.deepEqual(((await (await fetch(`${base}/v1/models`)).json()) as { data: unknown[] }).data, []);
  });

  it("a migrated Triton ONNX model runs as real pods: files from its ConfigMap, the version its policy picks", async () => {
    const repository = tritonRepositoryCorpus();
    const out = mkdtempSync(join(tmpdir(), "dynamo-kserve-migrated-"));
    try {
      await promisify(execFile)(process.execPath, [CLI, "migrate", repository, "--out", out]).catch(
        (error: { code?: number }) => assert.equal(error.code, 1, "the corpus holds broken configs"),
      );
      await run(`kubectl apply -f ${join(out, "add-sub-versions.yaml")}`);
      await run("kubectl wait dkm/add-sub-versions --for=condition=Ready --timeout=180s");
      const clusterIP = await routedClusterIp("add-sub-versions", 8001);
      const parsed = await eventually(() => inferAddSub(clusterIP), 30_000, 1_000);
      assert.equal(parsed.model_version, "2", "version_policy specific: [2]");
      assert.deepEqual(parsed.outputs.find((output) => output.name === "OUTPUT0")?.values, [1, 2, 3, 4]);
    } finally {
      rmSync(out, { recursive: true, force: true });
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("a migrated copy of the bench's Triton repository (Python-backend models) serves every model in pods, no Triton anywhere", async () => {
    const repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-bench-triton-"));
    const out = mkdtempSync(join(tmpdir(), "dynamo-kserve-migrated-"));
    const namespace = "bench-migrated";
    const models = ["identity_bytes", "identity_fp32"];
    try {
      cpSync(join(REPO_ROOT, "bench", "peers", "triton"), repository, { recursive: true });
      // No --triton-endpoint: every model must run here, or migrate fails (exit 1).
      const { stderr: report } = await promisify(execFile)(process.execPath, [
        ...[CLI, "migrate", repository, "--out", out, "--namespace", namespace],
      ]);
      for (const model of models) assert.match(report, new RegExp(`${model} .* python +model\\.py run by`), report);
      await run(`kubectl create namespace ${namespace}`);
      for (const model of models) await run(`kubectl apply -f ${join(out, `${kubernetesName(model)}.yaml`)}`);
      for (const model of models) {
        await run(`kubectl wait -n ${namespace} dkm/${kubernetesName(model)} --for=condition=Ready --timeout=180s`);
      }
      const clusterIPs = new Map<string, string>();
      for (const model of models) clusterIPs.set(model, await routedClusterIp(kubernetesName(model), 8001, namespace));
      const answer = async (model: string, input: string): Promise<unknown> => {
        const { stdout: reply } = await promisify(execFile)(process.execPath, [
          ...[CLI, "infer", model, "--url", `${clusterIPs.get(model)}:8001`, "--input", input],
        ]);
        return (JSON.parse(reply) as { outputs: { name: string; values: unknown[] }[] }).outputs;
      };
      assert.deepEqual(await eventually(() => answer("identity_fp32", "INPUT0:FP32:1x4=0.5,1,2,3"), 30_000, 1_000), [
        { name: "OUTPUT0", datatype: "FP32", shape: [1, 4], values: [0.5, 1, 2, 3] },
      ]);
      assert.deepEqual(await eventually(() => answer("identity_bytes", "INPUT0:BYTES:1x2=ab,cd"), 30_000, 1_000), [
        { name: "OUTPUT0", datatype: "BYTES", shape: [1, 2], values: ["ab", "cd"] },
      ]);
    } finally {
      await run(`kubectl delete namespace ${namespace} --wait=false`).catch(() => undefined);
      rmSync(out, { recursive: true, force: true });
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("an endpoint picker (GAIE v1.6.0's lwepp) picks Ready pods from the operator's InferencePool, never a pod that is not Ready; ModelInfer over h2c to the endpoint it gives is answered", async function () {
    await requirePlatform(this, "lwepp");
    await pooledModel("picked", 2, IDENTITY_CONFIG);
    const pool = cluster!.kubectlGet<{ spec: { selector: { matchLabels: Record<string, string> } } }>(
      "inferencepool",
      "picked",
    );
    const ready = await readyPodsOf("picked", 2);
    // A pod the pool selects that never becomes Ready: the data plane with no model loaded.
    const template = ready[0]!.spec!.containers[0]!;
    cluster!.apply({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "picked-not-ready", namespace: "default", labels: pool.spec.selector.matchLabels },
      spec: {
        nodeName: NODE_NAME,
        containers: [
          {
            name: "dataplane",
            image: template.image,
            imagePullPolicy: "Never",
            args: ["dataplane", "--model-control-mode", "explicit"],
            readinessProbe: { grpc: { port: 8001, service: "inference.GRPCInferenceService" }, periodSeconds: 1 },
          },
        ],
      },
    });
    const notReadyIp = await eventually(
      () => {
        const pod = cluster!.kubectlGet<V1Pod>("pod", "picked-not-ready");
        assert.equal(pod.status?.phase, "Running");
        assert.ok(pod.status?.podIP);
        return pod.status.podIP;
      },
      120_000,
      1_000,
    );
    const picker = await EndpointPicker.lwepp(cluster!, { name: "picked", namespace: "default" });
    const gateway = new ExtProcGateway(picker.address);
    try {
      const request = identityRequest({ model: "picked", width: 4 });
      const message = ModelInferRequest.encode(request).finish();
      // The gRPC body as a gateway forwards it: one length-prefixed message.
      const body = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), message]);
      body.writeUInt32BE(message.byteLength, 1);
      const headers = {
        ":method": "POST",
        ":path": "/inference.GRPCInferenceService/ModelInfer",
        ":authority": "picked-pool.default.svc:8001",
        "content-type": "application/grpc",
        te: "trailers",
      };
      const readyEndpoints = new Set(ready.map((pod) => `${pod.status!.podIP}:8001`));
      const picked = await eventually(
        async () => {
          const endpoints: string[] = [];
          for (let index = 0; index < 8; index++)
            endpoints.push((await gateway.pick({ headers, body }))[DESTINATION_HEADER]!);
          // Round robin over the pool's Ready pods: both are picked, the pod that is not Ready never.
          assert.deepEqual(new Set(endpoints), readyEndpoints);
          return endpoints;
        },
        60_000,
        1_000,
      );
      assert.ok(!picked.some((endpoint) => endpoint.startsWith(`${notReadyIp}:`)));
      for (const endpoint of new Set(picked)) {
        const client = new GRPCInferenceServiceClient(endpoint, credentials.createInsecure());
        try {
          const reply = await infer(client, request);
          assert.deepEqual(
            reply.outputs.map((output) => output.name),
            ["OUTPUT0"],
          );
          assert.ok(Buffer.from(reply.rawOutputContents[0]!).equals(Buffer.from(request.rawInputContents[0]!)));
        } finally {
          client.close();
        }
      }
    } finally {
      gateway.close();
      await picker.stop();
      cluster!.kubectl("delete", "pod", "picked-not-ready", "--wait=false");
      cluster!.kubectl("delete", "dkm", "picked", "--wait=false");
    }
  });

  it("one kubectl apply of the gateways guide's model runs GAIE v1.4.0's endpoint picker (epp) as the operator's pods, with the config it generates: OpenAI requests of the HTTP pool go to the pod that is not kept busy", async function () {
    await requirePlatform(this, "epp");
    const pickerImage = endpointPickerImage(cluster!);
    node!.loadImage(pickerImage);
    // The guide's example as a user applies it, the picker image made the one built here.
    const [example] = codeBlocks("docs/guides/gateways.md", {
      heading: "An endpoint picker the operator runs",
      language: "yaml",
    });
    const model = parseYaml(example!.text) as {
      metadata: { name: string };
      spec: { inferencePool: { endpointPicker: { image: string } } };
    };
    const name = model.metadata.name;
    model.spec.inferencePool.endpointPicker.image = pickerImage;
    cluster!.apply(model);
    await run(`kubectl wait dkm/${name} --for=condition=Ready --timeout=180s`);
    await run(`kubectl wait dkm/${name} --for=condition=InferencePoolReady --timeout=180s`);
    const [picker] = cluster!.kubectlGet<{ items: V1Pod[] }>(
      "pods",
      "-l",
      `dynamokserve.dev/endpoint-picker=${name}`,
    ).items;
    assert.equal(picker?.spec?.containers[0]?.image, pickerImage);
    assert.equal(picker?.status?.phase, "Running");
    const [first, second] = (await readyPodsOf(name, 2)).map((pod) => pod.status!.podIP!) as [string, string];
    const completion = (address: string, prompt: string, maxTokens: number, signal?: AbortSignal) =>
      fetch(`http://${address}:8000/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: name, prompt, max_tokens: maxTokens }),
        signal,
      });
    const loads: { stop(): Promise<void> }[] = [];
    /** Keeps a pod busy (a 10-minute answer running, two more waiting behind it) until stopped. */
    const keepBusy = async (address: string): Promise<{ stop(): Promise<void> }> => {
      const controller = new AbortController();
      const held = [1, 2, 3].map(() =>
        completion(address, "keep this pod busy", 600, controller.signal).catch(() => undefined),
      );
      const load = {
        async stop() {
          controller.abort();
          await Promise.all(held);
        },
      };
      loads.push(load);
      const samples = await eventually(
        async () => {
          const scraped = await scrape(`http://${address}:8002/metrics`);
          assert.equal(valueOf(scraped, "dynamo_kserve_requests_waiting", { model: name }), 2);
          return scraped;
        },
        30_000,
        500,
      );
      assert.equal(valueOf(samples, "dynamo_kserve_requests_running", { model: name }), 1);
      assert.ok(valueOf(samples, "dynamo_kserve_kv_cache_usage_ratio", { model: name }) > 0);
      return load;
    };
    // The gateway's side of ext_proc, through the picker's Service (TLS: the picker's own certificate).
    const gateway = new ExtProcGateway(`${await routedClusterIp(`${name}-epp`, 9002)}:9002`, { tls: true });
    const body = Buffer.from(JSON.stringify({ model: name, prompt: "which pod?", max_tokens: 1 }));
    const headers = { ":method": "POST", ":path": "/v1/completions", "content-type": "application/json" };
    /** Waits until six picks in a row all choose `address`'s pod. */
    const allPicked = (address: string) =>
      eventually(
        async () => {
          const endpoints: string[] = [];
          for (let index = 0; index < 6; index++)
            endpoints.push((await gateway.pick({ headers, body }))[DESTINATION_HEADER]!);
          assert.deepEqual(new Set(endpoints), new Set([`${address}:8000`]));
        },
        60_000,
        1_000,
      );
    try {
      // The first pod busy: every request goes to the second; then the other way round.
      const firstBusy = await keepBusy(first);
      await allPicked(second);
      const response = await completion(second, "which pod?", 1);
      assert.equal(response.status, 200);
      assert.equal(((await response.json()) as { choices: unknown[] }).choices.length, 1);
      await firstBusy.stop();
      await keepBusy(second);
      await allPicked(first);
    } finally {
      await Promise.all(loads.map((load) => load.stop()));
      gateway.close();
      cluster!.kubectl("delete", "dkm", name, "--wait=false");
    }
  });

  it("a real gateway (Traefik v3.6.12, Gateway API HTTPRoutes) carries gRPC ModelInfer over h2c to the operator's <pool>-pool Service and to the model's Service, a Service without appProtocol does not; the routes the operator writes for spec.routes (a GRPCRoute, an HTTPRoute) are accepted and carry gRPC and HTTP", async function () {
    await requirePlatform(this, "traefik");
    await installGatewayApi(cluster!);
    await pooledModel("routed", 1, IDENTITY_CONFIG);
    const poolService = cluster!.kubectlGet<V1Service>("service", "routed-pool");
    assert.equal(poolService.spec?.ports?.[0]?.appProtocol, "kubernetes.io/h2c");
    const port = await freePort();
    const route = (name: string, hostname: string, service: string) => ({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "HTTPRoute",
      metadata: { name, namespace: "default" },
      spec: {
        parentRefs: [{ name: "inference" }],
        hostnames: [hostname],
        rules: [{ backendRefs: [{ name: service, port: 8001 }] }],
      },
    });
    cluster!.apply(
      ...traefikGateway("inference", port),
      // The control: the same pods and port, with no appProtocol.
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "routed-plain", namespace: "default" },
        spec: { selector: poolService.spec?.selector, ports: [{ name: "grpc", port: 8001, targetPort: 8001 }] },
      },
      route("routed-pool", "pool.routed.test", "routed-pool"),
      route("routed-model", "model.routed.test", "routed"),
      route("routed-plain", "plain.routed.test", "routed-plain"),
    );
    const traefik = await Traefik.start(cluster!, port);
    const request = identityRequest({ model: "routed", width: 4 });
    const through = (hostname: string) => {
      const client = new GRPCInferenceServiceClient(`127.0.0.1:${port}`, credentials.createInsecure(), {
        "grpc.default_authority": hostname,
      });
      return infer(client, request).finally(() => client.close());
    };
    try {
      for (const hostname of ["pool.routed.test", "model.routed.test"]) {
        const reply = await eventually(() => through(hostname), 60_000, 1_000);
        assert.deepEqual(
          reply.outputs.map((output) => output.name),
          ["OUTPUT0"],
          hostname,
        );
      }
      // Without appProtocol Traefik speaks HTTP/1.1 to the pod: never a gRPC answer. (A route
      // not loaded yet would be a 404, UNIMPLEMENTED: wait until the failure is the upstream's.)
      const error = await eventually(
        async () => {
          const failure = await through("plain.routed.test").then(
            () => assert.fail("the Service without appProtocol answered"),
            (failed: ServiceError) => failed,
          );
          assert.notEqual(failure.code, status.UNIMPLEMENTED, failure.details);
          return failure;
        },
        60_000,
        1_000,
      );
      // Traefik's own error status for the HTTP/1.1 exchange the gRPC server refuses.
      assert.match(error.details, /HTTP status code 50[0-4]/);

      // The routes written by the operator (spec.routes) instead of by hand: Traefik accepts
      // them (RoutesReady), and carries gRPC over h2c and HTTP to the model's Service.
      cluster!.kubectl(
        "patch",
        "dkm",
        "routed",
        "--type=merge",
        "-p",
        JSON.stringify({
          spec: {
            routes: {
              gateway: { name: "inference" },
              grpc: { hostnames: ["operator.routed.test"] },
              http: { hostnames: ["http.operator.routed.test"], pathPrefix: "/v2" },
            },
          },
        }),
      );
      await run("kubectl wait dkm/routed --for=condition=RoutesReady --timeout=120s");
      const reply = await eventually(() => through("operator.routed.test"), 60_000, 1_000);
      assert.ok(Buffer.from(reply.rawOutputContents[0]!).equals(Buffer.from(request.rawInputContents[0]!)));
      // undici's request, not fetch: fetch sends its own Host header whatever it is given.
      const viaGateway = async (path: string) => {
        const response = await httpRequest(`http://127.0.0.1:${port}${path}`, {
          headers: { host: "http.operator.routed.test" },
        });
        await response.body.dump();
        return response.statusCode;
      };
      // Accepted, both routes, before Traefik's throttled watcher applies them: the GRPCRoute
      // answering does not mean the HTTPRoute does yet.
      await eventually(async () => assert.equal(await viaGateway("/v2/models/routed/ready"), 200), 60_000, 1_000);
      // Outside the HTTPRoute's path prefix: not routed.
      assert.equal(await viaGateway("/v1/models"), 404);
    } finally {
      await traefik.stop();
      cluster!.kubectl("delete", "dkm", "routed", "--wait=false");
      cluster!.kubectl("delete", "service", "routed-plain", "--wait=false");
      // The next gateway's Traefik would load these routes to Services that are gone.
      cluster!.kubectl("delete", "httproute", "routed-pool", "routed-model", "routed-plain", "--wait=false");
    }
  });

  it("a canary through Traefik's routes, as the gateways guide applies it: 10 % of 2,000 ModelInfer calls answered by the canary; promotion and rollback under 4 gRPC and 8 HTTP clients fail no request and leave no canary object", async function () {
    await requirePlatform(this, "traefik");
    await installGatewayApi(cluster!);
    const [example] = codeBlocks("docs/guides/gateways.md", { heading: "Canaries", language: "yaml" });
    const model = parseYaml(example!.text) as {
      metadata: { name: string };
      spec: {
        modelConfig: { inline: string };
        routes: { gateway: { name: string }; grpc: { hostnames: string[] }; http: { hostnames: string[] } };
        canary: { trafficPercent: number; modelConfig: { inline: string } };
      };
    };
    const name = model.metadata.name;
    const port = await freePort();
    cluster!.apply(...traefikGateway(model.spec.routes.gateway.name, port));
    const traefik = await Traefik.start(cluster!, port);
    const grpcHost = model.spec.routes.grpc.hostnames[0]!;
    const httpHost = model.spec.routes.http.hostnames[0]!;
    const clients = Array.from(
      { length: 8 },
      () =>
        new GRPCInferenceServiceClient(`127.0.0.1:${port}`, credentials.createInsecure(), {
          "grpc.default_authority": grpcHost,
        }),
    );
    const request = identityRequest({ model: name, width: 4 });
    /** A ModelInfer through the GRPCRoute, resolving to the variant its initial metadata names. */
    const inferVariant = (client: GRPCInferenceServiceClient): Promise<string> =>
      new Promise((resolve, reject) => {
        let variant = "(none)";
        const call = client.modelInfer(request, (error, reply) => {
          if (error !== null) reject(error);
          else if (reply.outputs[0]?.name !== "OUTPUT0") reject(new Error("no OUTPUT0"));
          else resolve(variant);
        });
        call.on("metadata", (metadata) => {
          variant = String(metadata.get(VARIANT_HEADER)[0] ?? "(none)");
        });
      });
    /** The same load through the GRPCRoute and the HTTPRoute. */
    const throughRoutes: LoadTarget = {
      grpc: `127.0.0.1:${port}`,
      http: `http://127.0.0.1:${port}`,
      grpcAuthority: grpcHost,
      httpHost,
    };
    const canaryObjects = () =>
      cluster!
        .kubectl("get", "deployments,services,configmaps,poddisruptionbudgets", "-o", "name")
        .split("\n")
        .filter((line) => line.includes(`/${name}-canary`));
    /** Retires the canary (spec as given) under load: no request fails, nothing of the canary is left. */
    const retireUnderLoad = async (what: string, spec: object): Promise<void> => {
      const load = identityLoad(name, throughRoutes);
      let outcomes: LoadOutcome[] = [];
      const started = Date.now();
      try {
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        cluster!.kubectl("patch", "dkm", name, "--type=merge", "-p", JSON.stringify({ spec }));
        await eventually(() => assert.deepEqual(canaryObjects(), []), 180_000, 500);
        // The load goes on a moment on what is left.
        await new Promise((resolve) => setTimeout(resolve, 3_000));
      } finally {
        outcomes = await load.stop();
      }
      const [grpcOutcome, httpOutcome] = outcomes;
      console.log(
        `      ${what} under load: gRPC ${grpcOutcome!.sent} sent / ${grpcOutcome!.failed} failed, HTTP ${httpOutcome!.sent} / ${httpOutcome!.failed}; the canary's objects gone after ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
      for (const outcome of outcomes) {
        assert.ok(outcome.sent > 0);
        assert.equal(outcome.failed, 0, `${what}: ${outcome.failed} of ${outcome.sent} failed: ${outcome.errors}`);
      }
    };
    try {
      cluster!.apply(model);
      await run(`kubectl wait dkm/${name} --for=condition=Ready --timeout=180s`);
      await run(`kubectl wait dkm/${name} --for=condition=CanaryReady --timeout=180s`);
      await run(`kubectl wait dkm/${name} --for=condition=RoutesReady --timeout=120s`);
      const row = cluster!.kubectl("get", "dkm", name, "-o", "wide").trim().split("\n");
      assert.match(row[0]!, /CANARY/);
      assert.match(row[1]!, /10% 1\/1 ready/);
      // The route's status says Accepted when Traefik has read the route, before its
      // configuration watcher (throttled, 2 s) applies it: until then the route in force may be
      // the one written before the canary was ready, weight 0. Traefik has the weights once the
      // canary answers a call; its weighted round robin gives it one call in ten from then on.
      await eventually(
        async () => {
          const seen: string[] = [];
          for (let call = 0; call < 20; call++) seen.push(await inferVariant(clients[0]!));
          assert.ok(seen.includes("canary"), `no canary answer in 20 calls: ${seen.join(",")}`);
        },
        60_000,
        1_000,
      );

      const calls = 2_000;
      const answers: string[] = [];
      await Promise.all(
        clients.map(async (client) => {
          while (answers.length < calls) {
            const slot = answers.push("(pending)") - 1;
            answers[slot] = await inferVariant(client);
          }
        }),
      );
      const counts = new Map<string, number>();
      for (const variant of answers) counts.set(variant, (counts.get(variant) ?? 0) + 1);
      const canary = counts.get("canary") ?? 0;
      /** The canary's answers in each quarter of the calls, in the order they were sent. */
      const byQuarter = [0, 1, 2, 3].map(
        (quarter) =>
          answers.slice((quarter * calls) / 4, ((quarter + 1) * calls) / 4).filter((variant) => variant === "canary")
            .length,
      );
      console.log(
        `      ${calls} ModelInfer through the GRPCRoute at 10 %: ${[...counts].map(([variant, count]) => `${variant} ${count}`).join(", ")} (the canary's by quarter: ${byQuarter.join(", ")})`,
      );
      assert.deepEqual([...counts.keys()].sort(), ["canary", "stable"]);
      assert.equal(canary + counts.get("stable")!, calls);
      assert.ok(
        Math.abs(canary / calls - 0.1) <= 0.03,
        `${((100 * canary) / calls).toFixed(1)} % answered by the canary; by quarter of the calls sent: ${byQuarter.join(", ")}`,
      );

      // Promotion: the canary's config becomes the model's, and the canary goes.
      await retireUnderLoad("promotion", {
        modelConfig: { inline: model.spec.canary.modelConfig.inline },
        canary: null,
      });
      const config = await eventually(
        async () => {
          const response = await httpRequest(`http://127.0.0.1:${port}/v2/models/${name}/config`, {
            headers: { host: httpHost },
          });
          const body = (await response.body.json()) as { max_batch_size?: number };
          assert.equal(body.max_batch_size, 16, "the promoted config is served");
          return body;
        },
        60_000,
        1_000,
      );
      assert.equal(config.max_batch_size, 16);
      assert.equal(await inferVariant(clients[0]!), "stable");

      // Rollback: a canary again (half the traffic), removed.
      cluster!.kubectl(
        "patch",
        "dkm",
        name,
        "--type=merge",
        "-p",
        JSON.stringify({
          spec: { canary: { trafficPercent: 50, modelConfig: { inline: model.spec.modelConfig.inline } } },
        }),
      );
      await run(`kubectl wait dkm/${name} --for=condition=CanaryReady --timeout=180s`);
      await eventually(
        async () => {
          const variants = new Set(await Promise.all(clients.map((client) => inferVariant(client))));
          assert.ok(variants.has("canary"), [...variants].join(","));
        },
        60_000,
        1_000,
      );
      await retireUnderLoad("rollback", { canary: null });
      const live = cluster!.kubectlGet<{ status: { canary?: unknown; conditions: { type: string }[] } }>("dkm", name);
      assert.equal(live.status.canary, undefined);
      assert.ok(!live.status.conditions.some((condition) => condition.type === "CanaryReady"));
    } finally {
      for (const client of clients) client.close();
      await traefik.stop();
      cluster!.kubectl("delete", "dkm", name, "--wait=false");
    }
  });

  it("a Triton repository by CR: the operator's pod asks the data plane's pod which models run, forwarded ones across the network", async () => {
    const repository = tritonRepositoryCorpus();
    // The data plane runs as uid 65532 and reads the claim's hostPath folder.
    chmodSync(repository, 0o755);
    const upstreamConfigs = mkdtempSync(join(tmpdir(), "dynamo-kserve-upstream-"));
    writeFileSync(join(upstreamConfigs, "simple_string.pbtxt"), IDENTITY_CONFIG);
    // The "Triton" the repository forwards to runs on the host; pods reach it at the node's address.
    const upstream = await startServer(["--model-repository", upstreamConfigs, "--host", "0.0.0.0"]);
    try {
      cluster!.apply(
        ...boundClaimObjects("default", "triton-model-repository", repository),
        {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "triton-configs", namespace: "default" },
          data: { "identity_fp32.pbtxt": IDENTITY_CONFIG },
        },
        repositoryObject("default", "triton-models", {
          configMapRef: { name: "triton-configs" },
          persistentVolumeClaim: { claimName: "triton-model-repository" },
          upstream: { address: `${cluster!.advertiseAddress}:${upstream.grpcPort}` },
        }),
      );
      await run("kubectl wait dkr/triton-models --for=condition=Available --timeout=180s");
      // Each model loads on its own: one still loading is listed without a version, so the
      // status is read until every model has come to the state it settles in.
      const settled = {
        "identity_fp32:1": "READY",
        "add_sub_versions:2": "READY",
        "simple:1": "UNAVAILABLE",
        // add_sub_python runs in the pod (the image's python3 and numpy); simple_string is forwarded.
        "add_sub_python:1": "READY",
        "simple_string:1": "READY",
      };
      const listed = await eventually(
        () => {
          const current = cluster!.kubectlGet<DynamoKserveRepository>("dkr", "triton-models");
          const models = new Map(
            (current.status?.models ?? []).map((model) => [`${model.name}:${model.version ?? ""}`, model]),
          );
          for (const [model, state] of Object.entries(settled)) {
            assert.equal(models.get(model)?.state, state, `${model}: ${JSON.stringify(current.status)}`);
          }
          return { current, models };
        },
        90_000,
        1_000,
      );
      assert.match(listed.models.get("broken_syntax:")?.reason ?? "", /config\.pbtxt:\d+/);
      const row = cluster!.kubectl("get", "dkr", "triton-models").trim().split("\n")[1]!.split(/\s+/);
      assert.deepEqual(row.slice(0, 4), [
        "triton-models",
        "False",
        listed.current.status?.modelsReady,
        "triton-models.default.svc:8001",
      ]);

      const clusterIP = await routedClusterIp("triton-models", 8001);
      const reply = await eventually(() => inferAddSub(clusterIP), 30_000, 1_000);
      assert.deepEqual(reply.outputs.find((output) => output.name === "OUTPUT0")?.values, [1, 2, 3, 4]);
    } finally {
      await upstream.stop();
      rmSync(repository, { recursive: true, force: true });
      rmSync(upstreamConfigs, { recursive: true, force: true });
    }
  });

  it("a DynamoKserveRepository serves the ONNX and Python models from SeaweedFS's S3 gateway; a version uploaded under load is served by each pod (how soon is printed), no pod restarted, no request failed", async () => {
    const pollSeconds = 2;
    const bucket = "models";
    // Pods on the node reach host processes at the cluster's advertise address.
    const store = await startSeaweedFs({ host: cluster!.advertiseAddress });
    const storageUri = store.location(bucket, "triton");
    const secret = (name: string, values: Readonly<Record<string, string>>) =>
      // created, not applied: apply would copy the values into an annotation
      cluster!.kubectlWithInput(
        JSON.stringify({
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name, namespace: "default" },
          stringData: values,
        }),
        "create",
        "-f",
        "-",
      );
    const grpc: GRPCInferenceServiceClient[] = [];
    const client = (address: string) => {
      grpc.push(new GRPCInferenceServiceClient(`${address}:8001`, credentials.createInsecure()));
      return grpc.at(-1)!;
    };
    try {
      await store.createBucket(bucket);
      await store.putFolder(join(EXAMPLES, "add_sub_onnx"), bucket, "triton/add_sub_onnx");
      await store.putFolder(join(REPO_ROOT, "dataplane", "test", "python-models", "add_sub"), bucket, "triton/add_sub");
      secret("s3-credentials", store.secretValues);
      cluster!.apply(
        repositoryObject("default", "models-in-s3", {
          storageUri,
          storage: { secretName: "s3-credentials", pollSeconds, cacheSize: "256Mi" },
          replicas: 2,
        }),
      );
      await run("kubectl wait dkr/models-in-s3 --for=condition=Ready --timeout=180s");
      const files = conditionOf(cluster!.kubectlGet<DynamoKserveRepository>("dkr", "models-in-s3"), "ModelFilesReady");
      assert.equal(files?.status, "True");
      assert.equal(files?.message, `${storageUri} holds models add_sub, add_sub_onnx`);
      const pods = await eventually(
        () => {
          const current = repositoryPods("models-in-s3");
          assert.equal(current.length, 2);
          for (const pod of current) assert.ok(pod.status?.containerStatuses?.[0]?.ready, pod.metadata?.name);
          return current;
        },
        120_000,
        1_000,
      );

      // Both models through the Service's ClusterIP: OUTPUT0 = [0,1,2,3] + [1,1,1,1].
      const service = client(await routedClusterIp("models-in-s3", 8001));
      const onnx = addSubRequest("add_sub_onnx", [1n, 4n]);
      const python = addSubRequest("add_sub", [4n]);
      const first = await eventually(() => infer(service, onnx), 30_000, 1_000);
      assert.equal(first.modelVersion, "1");
      assert.deepEqual(output0(first), [1, 2, 3, 4]);
      assert.deepEqual(output0(await infer(service, python)), [1, 2, 3, 4]);

      // Steady requests through the Service while version 2 lands in the bucket.
      const answers = (request: ModelInferRequest) => async () => {
        const reply = await infer(service, request);
        assert.deepEqual(output0(reply), [1, 2, 3, 4]);
      };
      const onnxLoad = new ClosedLoopLoad(4, answers(onnx));
      const pythonLoad = new ClosedLoopLoad(2, answers(python));
      let outcomes: LoadOutcome[] = [];
      const servedAfterMs: number[] = [];
      try {
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        const uploaded = Date.now();
        await store.put(
          bucket,
          "triton/add_sub_onnx/2/model.onnx",
          readFileSync(join(EXAMPLES, "add_sub_onnx", "1", "model.onnx")),
        );
        // Each pod on its own: the first reply from version 2 (the latest, as Triton's default policy picks).
        servedAfterMs.push(
          ...(await Promise.all(
            pods.map(async (pod) => {
              const direct = client(pod.status!.podIP!);
              await eventually(async () => assert.equal((await infer(direct, onnx)).modelVersion, "2"), 60_000, 100);
              return Date.now() - uploaded;
            }),
          )),
        );
        // And the Service's clients keep being answered for a moment more.
        await new Promise((resolve) => setTimeout(resolve, 2_000));
      } finally {
        outcomes = [await onnxLoad.stop(), await pythonLoad.stop()];
      }
      const [onnxOutcome, pythonOutcome] = outcomes;
      console.log(
        `      version 2 served ${servedAfterMs.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(" and ")} after its upload (poll ${pollSeconds} s); under load: ONNX ${onnxOutcome!.sent} sent / ${onnxOutcome!.failed} failed, Python ${pythonOutcome!.sent} / ${pythonOutcome!.failed}`,
      );
      for (const outcome of outcomes) {
        assert.ok(outcome.sent > 0);
        assert.equal(outcome.failed, 0, `${outcome.failed} of ${outcome.sent} failed: ${outcome.errors}`);
      }
      assert.equal((await infer(service, onnx)).modelVersion, "2");
      assert.deepEqual(
        repositoryPods("models-in-s3").map((pod) => [
          pod.metadata?.name,
          pod.status?.containerStatuses?.[0]?.restartCount,
        ]),
        pods.map((pod) => [pod.metadata?.name, 0]),
      );

      // Credentials the gateway refuses: the operator's own listing says so, naming the Secret, not its values.
      const wrong = { AWS_ACCESS_KEY_ID: "AKIAE2EWRONGWRONG001", AWS_SECRET_ACCESS_KEY: "e2e/wrong/secret/access/key" };
      secret("s3-wrong", wrong);
      cluster!.apply(
        repositoryObject("default", "models-denied", { storageUri, storage: { secretName: "s3-wrong" }, replicas: 0 }),
      );
      const denied = await eventually(
        () => {
          const repository = cluster!.kubectlGet<DynamoKserveRepository>("dkr", "models-denied");
          const condition = conditionOf(repository, "ModelFilesReady");
          assert.equal(condition?.reason, "AccessDenied", JSON.stringify(repository.status));
          return condition!;
        },
        60_000,
        1_000,
      );
      assert.equal(denied.status, "False");
      assert.match(denied.message, /access denied with the credentials of Secret s3-wrong/);
      const shown = JSON.stringify(cluster!.kubectlGet<unknown>("dkr"));
      for (const value of [...Object.values(wrong), ...Object.values(store.secretValues)])
        assert.equal(shown.includes(value), false, "a credential appears in a repository's status");
    } finally {
      for (const each of grpc) each.close();
      cluster!.kubectl("delete", "dkr", "models-in-s3", "models-denied", "--ignore-not-found", "--wait=false");
      cluster!.kubectl("delete", "secret", "s3-credentials", "s3-wrong", "--ignore-not-found");
      await store.stop();
    }
  });
});

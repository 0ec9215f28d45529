import assert from "node:assert/strict";
import {
  execFile,
  execFileSync,
  spawn,
  type ChildProcess,
  type ExecFileSyncOptionsWithStringEncoding,
} from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { V1Pod, V1Service } from "@kubernetes/client-node";
import { REPO_ROOT, TestCluster } from "../cluster/cluster.js";
import { NODE_NAME, RealNode, realNodeUnavailable } from "../cluster/node.js";
import { eventually } from "../support/eventually.js";
import { buildImage, IMAGE, requireDocker } from "../support/image.js";
import { freePort } from "../support/ports.js";
import { CACHE_DIR, helmBinary, requireHelm, requireProgram } from "../support/prerequisites.js";
import { PROMETHEUS, PrometheusServer, resolveServiceMonitor, scrapeJobFor } from "../support/prometheus-server.js";
import type { ServiceMonitor } from "../../operator/src/resources/service-monitor.js";
import { tritonRepositoryCorpus } from "../../operator/test/fixtures/triton-repository.js";
import { boundClaimObjects, IDENTITY_CONFIG, repositoryObject } from "../../operator/test/fixtures/kube.js";
import type { DynamoKserveRepository } from "../../operator/src/api/v1alpha1.js";
import { startServer } from "../../dataplane/test/fixtures/server.js";
import { CLI } from "../../dataplane/test/fixtures/paths.js";

/** The README's "Deploy on Kubernetes" commands, in order; the test runs exactly these. */
const README_COMMANDS = [
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
  service: V1Service,
): Promise<{ model_version: string; outputs: { name: string; values: number[] }[] }> {
  const { stdout } = await promisify(execFile)(process.execPath, [
    CLI,
    "infer",
    "add_sub_versions",
    "--url",
    `${service.spec?.clusterIP}:8001`,
    "--input",
    "INPUT0:FP32:1x4=0,1,2,3",
    "--input",
    "INPUT1:FP32:1x4=1,1,1,1",
  ]);
  return JSON.parse(stdout) as { model_version: string; outputs: { name: string; values: number[] }[] };
}

/** The commands of the README's "Deploy on Kubernetes" code block. */
function readmeDeployCommands(): string[] {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const section = readme.split(/^## Deploy on Kubernetes$/m)[1]?.split(/^## /m)[0] ?? "";
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  return block
    .split("\n")
    .map((line) => line.replace(/\s+#.*$/, "").trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

/**
 * The user's whole path on a real cluster whose node really runs pods (kubelet + containerd
 * + CNI + kube-proxy, node.ts): build the image, install the chart (the operator runs as
 * pods of that image), apply the example model, wait for Ready, call it with the stock
 * Triton client through a port-forward and through the Service's ClusterIP, and find the
 * requests in Prometheus, which scrapes what the operator's ServiceMonitor selects.
 */
describe("deploy on Kubernetes: the README's commands on a real node", function () {
  this.timeout(900_000);
  let cluster: TestCluster | undefined;
  let node: RealNode | undefined;
  let prometheus: PrometheusServer | undefined;
  const background: ChildProcess[] = [];
  let localPort = 0;

  /** Runs one README command against the test cluster (a free local port instead of 8001). */
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

  before(async function () {
    requireDocker(this);
    requireHelm(this);
    requireProgram(this, PYTHON, "the tritonclient venv", "run scripts/setup-python.sh");
    requireProgram(this, PROMETHEUS, "Prometheus", "apt-get install prometheus");
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
    await prometheus?.stop();
    await node?.stop();
    await cluster?.stop();
  });

  it("the README's section holds exactly the commands this test runs", () => {
    assert.deepEqual(readmeDeployCommands(), README_COMMANDS);
  });

  it("builds the image, starts a cluster with a real node and loads the image into it", async () => {
    assert.equal(await run(README_COMMANDS[0]!), IMAGE);
    cluster = await TestCluster.start({ fakeNodes: 0, reachableFromPods: true });
    node = await RealNode.start(cluster, [IMAGE]);
  });

  it("helm install: the operator runs as real pods of the image", async () => {
    await run(README_COMMANDS[1]!);
    const pods = JSON.parse(cluster!.kubectl("get", "pods", "-n", "dynamo-kserve-system", "-o", "json")) as {
      items: V1Pod[];
    };
    assert.equal(pods.items.length, 2);
    for (const pod of pods.items) {
      assert.equal(pod.spec?.nodeName, NODE_NAME);
      assert.equal(pod.status?.phase, "Running");
      assert.equal(pod.spec?.containers[0]?.image, IMAGE);
    }
  });

  it("kubectl apply → the model is Ready, its pods run, and kubectl get dkm shows the endpoint", async () => {
    assert.match(await run(README_COMMANDS[2]!), /dynamokservemodel.dynamokserve.dev\/identity-fp32 created/);
    assert.match(await run(README_COMMANDS[3]!), /condition met/);
    const table = (await run(README_COMMANDS[4]!)).trim().split("\n");
    assert.match(table[0]!, /^NAME\s+READY\s+MODEL\s+BACKEND\s+ENDPOINT\s+AGE$/);
    assert.match(
      table[1]!,
      /^identity-fp32\s+True\s+identity-fp32\s+identity\s+identity-fp32\.default\.svc[^\s]*:8001\s/,
    );
    // Ready means one replica serves; the second follows (its gRPC readiness probe passes).
    await eventually(
      () => {
        const pods = JSON.parse(
          cluster!.kubectl("get", "pods", "-l", "dynamokserve.dev/model=identity-fp32", "-o", "json"),
        ) as { items: V1Pod[] };
        assert.equal(pods.items.length, 2);
        for (const pod of pods.items) {
          assert.equal(pod.spec?.nodeName, NODE_NAME);
          assert.ok(pod.status?.containerStatuses?.[0]?.ready, `${pod.metadata?.name} ready`);
        }
      },
      60_000,
      500,
    );
  });

  it("the stock Triton client infers through kubectl port-forward and through the Service's ClusterIP", async () => {
    await run(README_COMMANDS[5]!);
    assert.match(await run(README_COMMANDS[6]!), /^identity-fp32 OUTPUT0 = \[\[0\.0, 1\.0, 2\.0, 3\.0\]\]$/m);
    const service = JSON.parse(cluster!.kubectl("get", "service", "identity-fp32", "-o", "json")) as V1Service;
    const grpcPort = service.spec?.ports?.find((port) => port.name === "grpc");
    assert.equal(grpcPort?.appProtocol, "kubernetes.io/h2c");
    const clusterAddress = `${service.spec?.clusterIP}:${grpcPort?.port}`;
    // kube-proxy programs the ClusterIP within its sync period of the endpoints changing; a
    // refused connection never reaches a data plane, so retrying keeps the request count exact.
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

  it("Prometheus, scraping what the operator's ServiceMonitor selects, counts those requests", async () => {
    const monitor = JSON.parse(
      cluster!.kubectl("get", "servicemonitors.monitoring.coreos.com", "identity-fp32", "-o", "json"),
    ) as ServiceMonitor;
    const targets = resolveServiceMonitor(monitor, (...args) => JSON.parse(cluster!.kubectl(...args)));
    assert.equal(targets.length, 2, "both data-plane pods' metrics ports");
    prometheus = await PrometheusServer.start(join(cluster!.dir, "prometheus"), [scrapeJobFor(monitor, targets)]);
    await eventually(
      async () => {
        const targets = await prometheus!.targets();
        assert.equal(targets.length, 2, JSON.stringify(targets));
        assert.ok(
          targets.every((target) => target.health === "up"),
          JSON.stringify(targets),
        );
        const [total] = await prometheus!.query('sum(nv_inference_request_success{model="identity-fp32"})');
        assert.equal(total?.value, 2, "one request through the port-forward, one through the ClusterIP");
      },
      60_000,
      1_000,
    );
  });

  it("KServe v2 REST and OpenAI reach the pods through the Service's http port (ClusterIP)", async () => {
    const service = JSON.parse(cluster!.kubectl("get", "service", "identity-fp32", "-o", "json")) as V1Service;
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
      const service = JSON.parse(cluster!.kubectl("get", "service", "add-sub-versions", "-o", "json")) as V1Service;
      const parsed = await eventually(() => inferAddSub(service), 30_000, 1_000);
      assert.equal(parsed.model_version, "2", "version_policy specific: [2]");
      assert.deepEqual(parsed.outputs.find((output) => output.name === "OUTPUT0")?.values, [1, 2, 3, 4]);
    } finally {
      rmSync(out, { recursive: true, force: true });
      rmSync(repository, { recursive: true, force: true });
    }
  });

  it("a Triton repository by CR: the operator's pod asks the data plane's pod which models run, forwarded ones across the network", async () => {
    const repository = tritonRepositoryCorpus();
    // The data plane runs as uid 65532 and reads the claim's hostPath folder.
    chmodSync(repository, 0o755);
    const upstreamConfigs = mkdtempSync(join(tmpdir(), "dynamo-kserve-upstream-"));
    writeFileSync(join(upstreamConfigs, "add_sub_python.pbtxt"), IDENTITY_CONFIG);
    // The "Triton" the repository forwards to runs on the host; pods reach it at the node's address.
    const upstream = await startServer(["--model-repository", upstreamConfigs, "--host", "0.0.0.0"]);
    try {
      const apply = (objects: object[]) =>
        cluster!.kubectlWithInput(
          JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
          "apply",
          "-f",
          "-",
        );
      apply([
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
      ]);
      await run("kubectl wait dkr/triton-models --for=condition=Available --timeout=180s");
      const listed = await eventually(
        () => {
          const current = JSON.parse(
            cluster!.kubectl("get", "dkr", "triton-models", "-o", "json"),
          ) as DynamoKserveRepository;
          const models = new Map(
            (current.status?.models ?? []).map((model) => [`${model.name}:${model.version ?? ""}`, model]),
          );
          assert.equal(models.get("add_sub_python:1")?.state, "READY", JSON.stringify(current.status));
          return { current, models };
        },
        60_000,
        1_000,
      );
      assert.equal(listed.models.get("identity_fp32:1")?.state, "READY");
      assert.equal(listed.models.get("add_sub_versions:2")?.state, "READY");
      assert.equal(listed.models.get("simple:1")?.state, "UNAVAILABLE");
      assert.match(listed.models.get("broken_syntax:")?.reason ?? "", /config\.pbtxt:\d+/);
      const row = cluster!.kubectl("get", "dkr", "triton-models").trim().split("\n")[1]!.split(/\s+/);
      assert.deepEqual(row.slice(0, 4), [
        "triton-models",
        "False",
        listed.current.status?.modelsReady,
        "triton-models.default.svc:8001",
      ]);

      const service = JSON.parse(cluster!.kubectl("get", "service", "triton-models", "-o", "json")) as V1Service;
      // As above: kube-proxy programs the new ClusterIP within its sync period.
      const reply = await eventually(() => inferAddSub(service), 30_000, 1_000);
      assert.deepEqual(reply.outputs.find((output) => output.name === "OUTPUT0")?.values, [1, 2, 3, 4]);
    } finally {
      await upstream.stop();
      rmSync(repository, { recursive: true, force: true });
      rmSync(upstreamConfigs, { recursive: true, force: true });
    }
  });
});

import assert from "node:assert/strict";
import { parse } from "yaml";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import type { V1Deployment } from "@kubernetes/client-node";
import { testCluster } from "../../../e2e/cluster/mocha-global.js";
import type { TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { helmBinary, requireHelm } from "../../../e2e/support/prerequisites.js";
import { REPO_ROOT } from "../../../dataplane/test/fixtures/paths.js";
import type { DynamoKserveModel, DynamoKserveRepository } from "../../src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject, repositoryObject } from "../fixtures/kube.js";
import { startOperatorProcess, type OperatorProcess } from "../fixtures/operator.js";

const CHART = join(REPO_ROOT, "helm", "dynamo-kserve");
const RELEASE = "dks";
const FULLNAME = "dks-dynamo-kserve";

describe("the Helm chart (helm built from its Go module, real API server with RBAC)", function () {
  this.timeout(180_000);
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let system: string;
  let models: string;
  let operator: OperatorProcess | undefined;

  const helm = (...args: string[]): string =>
    execFileSync(helmBinary(), [...args, "--kubeconfig", cluster.adminKubeconfig], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  /** What the API server would make of a manifest (kubectl apply --server-side --dry-run=server). */
  const serverDryRun = (manifest: string): string =>
    execFileSync(
      join(cluster.bin, "kubectl"),
      ["--kubeconfig", cluster.adminKubeconfig, "apply", "--server-side", "--dry-run=server", "-f", "-"],
      { input: manifest, encoding: "utf8" },
    );
  const values = (): string[] => ["--namespace", system, "--set", `watchNamespaces={${models}}`];

  before(async function () {
    requireHelm(this);
    cluster = testCluster(this);
    kube = new KubeTestClient(cluster.adminConfig());
    [system, models] = await Promise.all([kube.createNamespace("dks-system"), kube.createNamespace("dks-models")]);
  });
  after(async () => {
    await operator?.stop();
  });

  it("lints, and renders objects the API server accepts (server-side dry run)", () => {
    const lint = execFileSync(helmBinary(), ["lint", CHART, "--strict"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    assert.match(lint, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    const rendered = helm(
      "template",
      RELEASE,
      CHART,
      ...values(),
      "--kube-version",
      "1.34.4",
      "--set",
      "grafanaDashboard.enabled=true",
    );
    const applied = serverDryRun(rendered);
    for (const kind of ["serviceaccount", "clusterrole", "role", "rolebinding", "deployment", "service", "configmap"]) {
      assert.match(applied, new RegExp(`^${kind}[^ ]*/`, "m"), `${kind} in:\n${applied}`);
    }
  });

  it("gives the operator's ServiceMonitor the labels a kube-prometheus-stack Prometheus selects", () => {
    const rendered = helm(
      "template",
      RELEASE,
      CHART,
      ...values(),
      "--kube-version",
      "1.34.4",
      "--api-versions",
      "monitoring.coreos.com/v1/ServiceMonitor",
      "--set",
      "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
      "--show-only",
      "templates/servicemonitor.yaml",
    );
    const monitor = parse(rendered) as { kind: string; metadata: { labels: Record<string, string> } };
    assert.equal(monitor.kind, "ServiceMonitor");
    assert.equal(monitor.metadata.labels["release"], "kube-prometheus-stack");
    // The cluster's ServiceMonitor CRD (from the Prometheus Operator's module) accepts it.
    const applied = serverDryRun(rendered);
    assert.match(applied, /^servicemonitor[^ ]*\/\S+ serverside-applied/m);
  });

  it("installs; the operator, run as the chart's ServiceAccount, does its whole job with no request refused", async () => {
    helm("install", RELEASE, CHART, ...values(), "--wait=false");
    const deployment = await kube.read<V1Deployment>("apps/v1", "Deployment", system, FULLNAME);
    assert.equal(deployment.spec?.replicas, 2);
    const args = deployment.spec?.template.spec?.containers[0]?.args ?? [];
    assert.ok(args.includes("--leader-elect"));
    assert.ok(args.includes(`--namespace=${models}`));
    // The operator as the chart deploys it (kwok's pods do not run it): same identity, same arguments.
    const token = cluster.kubectl("create", "token", FULLNAME, "--namespace", system, "--duration", "1h").trim();
    const kubeconfig = cluster.writeKubeconfig(join(cluster.dir, "chart-operator.kubeconfig"), token);
    const mark = cluster.auditMark();
    operator = await startOperatorProcess(
      kubeconfig,
      args.slice(1).filter((arg) => !arg.startsWith("--http-port")),
    );
    await eventually(() => assert.ok(operator!.logs.some((entry) => entry["msg"] === "became leader")), 30_000);
    await kube.create({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "tokens", namespace: models },
      data: { tokens: Buffer.from("a-token\n").toString("base64") },
    });
    await kube.create(
      modelObject(models, "everything", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        tls: { mode: "SelfSigned" },
        auth: { tokenSecretRef: { name: "tokens" } },
        inferencePool: { endpointPickerRef: { name: "epp", port: { number: 9002 } } },
        monitoring: {},
      }),
    );
    await eventually(async () => {
      const model = await kube.read<DynamoKserveModel>(
        "dynamokserve.dev/v1alpha1",
        "DynamoKserveModel",
        models,
        "everything",
      );
      for (const type of ["Ready", "CredentialsReady", "InferencePoolReady", "MonitoringReady"]) {
        assert.equal(conditionOf(model, type)?.status, "True", `${type}: ${JSON.stringify(conditionOf(model, type))}`);
      }
      assert.ok(await kube.exists("v1", "Service", models, "everything-pool"), "the pool's Service");
    }, 60_000);
    // A repository too: its pods are watched and asked (kwok's pods do not answer: IndexFailed).
    await kube.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "configs", namespace: models },
      data: { "ident.pbtxt": IDENTITY_CONFIG },
    });
    await kube.create(repositoryObject(models, "repo", { configMapRef: { name: "configs" }, monitoring: {} }));
    await eventually(async () => {
      const repository = await kube.read<DynamoKserveRepository>(
        "dynamokserve.dev/v1alpha1",
        "DynamoKserveRepository",
        models,
        "repo",
      );
      assert.equal(conditionOf(repository, "Available")?.status, "True", JSON.stringify(repository.status));
      assert.equal(conditionOf(repository, "MonitoringReady")?.status, "True");
      assert.equal(conditionOf(repository, "ModelsReady")?.reason, "IndexFailed");
    }, 60_000);
    // A repository in object storage: the operator reads its Secret as the chart's identity
    // (a refused read would say SecretMissing) and lists the location (a closed port here).
    await kube.create({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "bucket", namespace: models },
      data: {
        AWS_ACCESS_KEY_ID: Buffer.from("AKIACHARTTEST").toString("base64"),
        AWS_SECRET_ACCESS_KEY: Buffer.from("chart-test-secret").toString("base64"),
      },
    });
    await kube.create(
      repositoryObject(models, "bucket", { storageUri: "s3://127.0.0.1:1/models", storage: { secretName: "bucket" } }),
    );
    await eventually(async () => {
      const repository = await kube.read<DynamoKserveRepository>(
        "dynamokserve.dev/v1alpha1",
        "DynamoKserveRepository",
        models,
        "bucket",
      );
      const condition = conditionOf(repository, "ModelFilesReady");
      assert.equal(condition?.status, "False", JSON.stringify(repository.status));
      assert.notEqual(condition?.reason, "SecretMissing");
    }, 60_000);
    const refused = cluster.forbiddenRequests(`system:serviceaccount:${system}:${FULLNAME}`, mark);
    assert.deepEqual(
      refused.map((event) => `${event.verb} ${event.objectRef?.resource}/${event.objectRef?.subresource ?? ""}`),
      [],
      "the chart's RBAC lets the operator do everything it needs",
    );
  });

  it("upgrades and uninstalls", async () => {
    helm("upgrade", RELEASE, CHART, ...values(), "--set", "replicaCount=3");
    assert.equal((await kube.read<V1Deployment>("apps/v1", "Deployment", system, FULLNAME)).spec?.replicas, 3);
    helm("uninstall", RELEASE, "--namespace", system);
    await eventually(async () => assert.equal(await kube.exists("apps/v1", "Deployment", system, FULLNAME), false));
  });
});

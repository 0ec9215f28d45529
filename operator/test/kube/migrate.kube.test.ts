import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import type { V1ConfigMap, V1Deployment } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { CLI } from "../../../dataplane/test/fixtures/paths.js";
import { addSubRequest } from "../../../dataplane/test/fixtures/requests.js";
import { infer, startServer, type ServerProcess } from "../../../dataplane/test/fixtures/server.js";
import { eventually } from "../../../e2e/support/eventually.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import type { MigratedObject } from "../../src/migrate/manifests.js";
import { conditionOf } from "../fixtures/kube.js";
import { useOperator } from "../fixtures/operator.js";
import { tritonRepositoryCorpus } from "../fixtures/triton-repository.js";

const TRITON = "triton.ml.svc:8001";

interface Migration {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

async function migrate(...args: string[]): Promise<Migration> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, "migrate", ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** The summary table's rows by model: [versions, platform, engine, notes]. */
function tableRows(stderr: string): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of stderr.split("\n").slice(1)) {
    const cells = line.split(/ {2,}/);
    if (cells.length >= 4) rows.set(cells[0]!, cells.slice(1));
  }
  return rows;
}

describe("migrate: a Triton model repository becomes DynamoKserveModels (real API server)", function () {
  this.timeout(120_000);
  const suite = useOperator("migrate");
  let repository: string;
  let server: ServerProcess | undefined;

  before(() => {
    repository = tritonRepositoryCorpus();
  });
  after(async () => {
    await server?.stop();
    rmSync(repository, { recursive: true, force: true });
  });

  it("prints how each model moves, names each broken config's file and line, and exits 1", async () => {
    const { code, stdout, stderr } = await migrate(repository, "--triton-endpoint", TRITON, "--dry-run");
    assert.equal(code, 1);
    assert.equal(stdout, "", "--dry-run writes no YAML");
    assert.match(stderr.split("\n")[0]!, /^MODEL\s+VERSIONS\s+PLATFORM\/BACKEND\s+ENGINE\s+NOTES$/);
    const rows = tableRows(stderr);
    const engineOf = (model: string) => rows.get(model)?.[2];
    assert.equal(engineOf("simple"), "kserve-grpc");
    assert.equal(engineOf("simple_string"), "kserve-grpc");
    assert.match(rows.get("simple_sequence")![3]!, /sequences stay on one upstream/);
    // Its one step (add_sub_python) runs here, so it does too.
    assert.equal(engineOf("ensemble_add_sub"), "ensemble");
    assert.match(rows.get("ensemble_add_sub")![3]!, /ensemble run here, not by Triton: its steps \('add_sub_python'\)/);
    assert.equal(rows.get("add_sub_python")?.[1], "python");
    assert.equal(engineOf("add_sub_python"), "python");
    assert.match(rows.get("add_sub_python")![3]!, /model\.py run by the python engine/);
    assert.equal(engineOf("repeat_int32"), "repeat");
    assert.match(rows.get("repeat_int32")![3]!, /decoupled/);
    assert.deepEqual(rows.get("add_sub_versions")?.slice(0, 3), ["2", "onnxruntime_onnx", "onnx"]);
    assert.match(rows.get("add_sub_autocomplete")![3]!, /auto-completed/);
    assert.match(rows.get("densenet_onnx")![3]!, /no model files/);
    assert.match(rows.get("broken_syntax")![3]!, /broken_syntax\/config\.pbtxt:4: expected "," or "\]"/);
    assert.match(rows.get("broken_unknown_field")![3]!, /config\.pbtxt:3: unknown field "max_batch_sizes"/);
    assert.match(rows.get("broken_enum")![3]!, /config\.pbtxt:3: unknown enum value "TYPE_FLOAT32"/);
    assert.match(rows.get("broken_dims")![3]!, /config\.pbtxt:3: input\[0\] 'INPUT0'\.dims/);
    assert.match(stderr, /^8 of 13 models migrated$/m);
  });

  it("with --forward-python, forwards Python-backend models as before", async () => {
    const rows = tableRows(
      (await migrate(repository, "--triton-endpoint", TRITON, "--forward-python", "--dry-run")).stderr,
    );
    assert.equal(rows.get("add_sub_python")?.[2], "kserve-grpc");
    // Its step is forwarded, so it is.
    assert.equal(rows.get("ensemble_add_sub")?.[2], "kserve-grpc");
    assert.match(
      rows.get("ensemble_add_sub")![3]!,
      /its step model 'add_sub_python' is forwarded: --forward-python forwards every Python-backend model; forwarded to /,
    );
  });

  it("without --triton-endpoint, says which models need it", async () => {
    const rows = tableRows((await migrate(repository, "--dry-run")).stderr);
    assert.match(
      rows.get("simple")![3]!,
      /'tensorflow_graphdef' does not run in this data plane; pass --triton-endpoint/,
    );
    assert.equal(rows.get("repeat_int32")?.[2], "repeat");
  });

  const kubectl = (args: string[], input?: string): string => suite.cluster.kubectlWithInput(input, ...args);

  it("writes YAML the API server accepts (server-side apply, dry run), one file per model with --out", async () => {
    const { stdout } = await migrate(repository, "--triton-endpoint", TRITON, "--namespace", suite.namespace);
    const applied = kubectl(["apply", "--server-side", "--dry-run=server", "-f", "-"], stdout);
    const models = applied.match(/^dynamokservemodel\.dynamokserve\.dev\/\S+ serverside-applied \(server dry run\)$/gm);
    assert.equal(models?.length, 8, applied);
    assert.match(applied, /^configmap\/add-sub-versions-model-files serverside-applied/m);
    assert.match(applied, /^configmap\/add-sub-python-model-files serverside-applied/m);
    const documents = parseAllDocuments(stdout).map((document) => document.toJS() as MigratedObject);
    const simple = documents.find((object) => object.metadata?.name === "simple-triton-config") as V1ConfigMap;
    assert.match(simple.data!["config.pbtxt"]!, /key: "engine"\s+value: \{\s+string_value: "kserve-grpc"/);
    assert.match(simple.data!["config.pbtxt"]!, new RegExp(`string_value: "${TRITON}"`));
    const model = documents.find((object) => object.metadata?.name === "simple" && object.kind === "DynamoKserveModel");
    assert.deepEqual((model as DynamoKserveModel).spec.modelConfig, {
      configMapRef: { name: "simple-triton-config", key: "config.pbtxt" },
    });
    const out = mkdtempSync(join(tmpdir(), "dynamo-kserve-migrated-"));
    try {
      await migrate(repository, "--triton-endpoint", TRITON, "--out", out);
      assert.deepEqual(readdirSync(out).sort(), [
        "add-sub-autocomplete.yaml",
        "add-sub-python.yaml",
        "add-sub-versions.yaml",
        "ensemble-add-sub.yaml",
        "repeat-int32.yaml",
        "simple-sequence.yaml",
        "simple-string.yaml",
        "simple.yaml",
      ]);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it("with --model-files pvc:<claim>, mounts each ONNX model's folder of the repository's PVC", async () => {
    const { stdout, stderr } = await migrate(
      repository,
      "--triton-endpoint",
      TRITON,
      "--model-files",
      "pvc:triton-repo",
    );
    assert.match(
      tableRows(stderr).get("densenet_onnx")![3]!,
      /instance_group KIND_GPU set to KIND_CPU.*label_filename not applied.*files from PVC triton-repo, densenet_onnx\//,
    );
    const densenet = parseAllDocuments(stdout)
      .map((document) => document.toJS() as MigratedObject)
      .find(
        (object) => object.kind === "DynamoKserveModel" && object.metadata?.name === "densenet-onnx",
      ) as DynamoKserveModel;
    assert.deepEqual(densenet.spec.modelFiles, {
      persistentVolumeClaim: { claimName: "triton-repo" },
      subPath: "densenet_onnx",
    });
    assert.equal(densenet.spec.modelName, "densenet_onnx");
  });

  it("serves a migrated ONNX model: real inference through the data plane as the operator's Deployment runs it", async () => {
    const { stdout } = await migrate(repository, "--triton-endpoint", TRITON, "--namespace", suite.namespace);
    kubectl(["apply", "--server-side", "-f", "-"], stdout);
    const name = "add-sub-versions";
    await eventually(async () => {
      const model = await suite.kube.read<DynamoKserveModel>(
        "dynamokserve.dev/v1alpha1",
        "DynamoKserveModel",
        suite.namespace,
        name,
      );
      assert.equal(conditionOf(model, "Ready")?.status, "True", JSON.stringify(model.status));
    }, 60_000);
    // What the kubelet would mount: the operator's ConfigMap at /models, the files ConfigMap's items under /model-files/<model>.
    const deployment = await suite.kube.read<V1Deployment>("apps/v1", "Deployment", suite.namespace, name);
    const pod = deployment.spec!.template.spec!;
    const container = pod.containers[0]!;
    const root = mkdtempSync(join(tmpdir(), "dynamo-kserve-pod-"));
    try {
      for (const mount of container.volumeMounts ?? []) {
        const volume = pod.volumes!.find((candidate) => candidate.name === mount.name)!;
        if (volume.configMap === undefined) continue;
        const configMap = await suite.kube.read<V1ConfigMap>(
          "v1",
          "ConfigMap",
          suite.namespace,
          volume.configMap.name!,
        );
        const target = join(root, mount.mountPath);
        const items =
          volume.configMap.items ??
          Object.keys({ ...configMap.data, ...configMap.binaryData }).map((key) => ({ key, path: key }));
        for (const item of items) {
          const content = configMap.data?.[item.key] ?? Buffer.from(configMap.binaryData![item.key]!, "base64");
          mkdirSync(dirname(join(target, item.path)), { recursive: true });
          writeFileSync(join(target, item.path), content);
        }
      }
      const args = container.args!.slice(1).map((arg) => (arg.startsWith("/") ? join(root, arg) : arg));
      const withoutPorts = dropOptions(args, ["--grpc-port", "--metrics-port"]);
      server = await startServer(withoutPorts);
      const reply = await infer(server.client, addSubRequest("add_sub_versions"));
      assert.equal(reply.modelVersion, "2");
      assert.deepEqual([...new Float32Array(new Uint8Array(reply.rawOutputContents[0]!).buffer)], [1, 2, 3, 4]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

/** Removes `--flag value` pairs (the test picks free ports instead). */
function dropOptions(args: readonly string[], flags: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (flags.includes(args[i]!)) i++;
    else kept.push(args[i]!);
  }
  return kept;
}

import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { kubernetesName, migratedObjects, toYaml } from "../operator/src/migrate/manifests.js";
import { planMigration, type ModelFilesSource, type ModelPlan } from "../operator/src/migrate/plan.js";
import { flag, text, withOptions, type OptionDeclaration, type ValuesOf } from "../lib/contract/options.js";
import { errorMessage } from "../lib/errors.js";
import { isRemoteLocation, parseStorageLocation, type RemoteLocation } from "../lib/storage/locations.js";
import { fetchRepositoryOutline } from "../operator/src/migrate/remote.js";

/**
 * `dynamo-kserve migrate <model_repository>`: a Triton model repository becomes Kubernetes
 * YAML (per model a ConfigMap with its config.pbtxt and a DynamoKserveModel) for
 * `kubectl apply -f -`, with a table on stderr of how each model moved. Exits 1 when a
 * model could not be migrated (the others are still written).
 */

const MIGRATE_OPTIONS = {
  namespace: text("--namespace <namespace>", {
    env: "DYNAMO_NAMESPACE",
    help: "namespace of the objects (default: kubectl's)",
  }),
  tritonEndpoint: text("--triton-endpoint <host:port>", {
    env: "DYNAMO_TRITON_ENDPOINT",
    help: "the Triton gRPC endpoint that serves the repository now; models this data plane cannot run are forwarded there",
  }),
  vllmUrl: text("--vllm-url <url>", {
    env: "DYNAMO_VLLM_URL",
    help: "base URL of a vLLM OpenAI server (e.g. http://vllm:8000/v1); Triton vLLM-backend models are served from it, keeping their tensors",
  }),
  forwardPython: flag("--forward-python", {
    env: "DYNAMO_FORWARD_PYTHON",
    help: "forward Python-backend models to --triton-endpoint too, instead of running them with the python engine",
  }),
  modelFiles: {
    flags: "--model-files <source>",
    env: "DYNAMO_MODEL_FILES",
    help: "where model files (ONNX models, Python models' model.py) come from: configmap (shipped in a ConfigMap, small models), pvc:<claim> (a PersistentVolumeClaim holding this repository), or the same repository in object storage (s3://bucket/prefix, s3://host:port/bucket/prefix, gs://bucket/prefix, as://account/container/prefix: each model's modelFiles.storageUri is its folder there, nothing is copied)",
    parse: parseModelFiles,
    default: { kind: "configMap" },
    defaultLabel: "configmap",
    hasDefault: true,
  } satisfies OptionDeclaration<ModelFilesSource, true>,
  storageSecret: text("--storage-secret <name>", {
    env: "DYNAMO_STORAGE_SECRET",
    help: "with --model-files s3://, gs:// or as://: the Secret holding the bucket's credentials (storage.secretName of each model that reads files); without it, the pods' own identity (workload identity)",
  }),
  out: text("--out <dir|->", { env: "DYNAMO_OUT", help: "a folder for one YAML file per model, or - for stdout" }, "-"),
  dryRun: flag("--dry-run", { env: "DYNAMO_DRY_RUN", help: "print only the table" }),
} as const;

type MigrateFlags = ValuesOf<typeof MIGRATE_OPTIONS>;

export function migrateCommand(): Command {
  const command = new Command("migrate")
    .description("turn a Triton model repository into DynamoKserveModel YAML (kubectl apply -f -)")
    .argument(
      "<model_repository>",
      "a Triton model repository: a folder, or s3://, gs://, as:// (configs read from the bucket with the cloud's standard credentials; the models' files stay there)",
    );
  return withOptions(command, MIGRATE_OPTIONS).action(async (repository: string, flags: MigrateFlags) => {
    // A repository in object storage: its configs are read from there, and its models'
    // files stay there (unless --model-files names a claim holding a copy).
    const remote = isRemoteLocation(repository) ? (parseStorageLocation(repository) as RemoteLocation) : undefined;
    const filesSource: ModelFilesSource =
      remote !== undefined && flags.modelFiles.kind === "configMap"
        ? { kind: "storage", uri: repository.replace(/\/+$/, "") }
        : flags.modelFiles;
    const modelFiles = withStorageSecret(filesSource, flags.storageSecret);
    const folder = remote === undefined ? repository : await fetchRepositoryOutline(remote);
    let plans: ModelPlan[];
    try {
      plans = await planMigration(folder, {
        modelFiles,
        ...(flags.tritonEndpoint !== undefined ? { tritonEndpoint: flags.tritonEndpoint } : {}),
        ...(flags.vllmUrl !== undefined ? { vllmUrl: flags.vllmUrl } : {}),
        forwardPython: flags.forwardPython === true,
      });
    } finally {
      if (remote !== undefined) await rm(folder, { recursive: true, force: true });
    }
    if (remote !== undefined) plans = plans.map((plan) => namedBy(plan, folder, repository));
    const checked = rejectNameClashes(plans);
    process.stderr.write(summaryTable(checked));
    if (!flags.dryRun) await writeManifests(checked, { ...flags, modelFiles });
    const failed = checked.filter((plan) => !plan.ok).length;
    process.stderr.write(`${checked.length - failed} of ${checked.length} models migrated\n`);
    if (failed > 0) process.exitCode = 1;
  });
}

export function parseModelFiles(value: string): ModelFilesSource {
  if (value === "configmap") return { kind: "configMap" };
  const claim = /^pvc:([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(value)?.[1];
  if (claim !== undefined) return { kind: "persistentVolumeClaim", claimName: claim };
  if (isRemoteLocation(value)) {
    try {
      parseStorageLocation(value);
    } catch (error) {
      throw new InvalidArgumentError(errorMessage(error));
    }
    return { kind: "storage", uri: value.replace(/\/+$/, "") };
  }
  throw new InvalidArgumentError(
    `expected configmap, pvc:<claim name> or s3://, gs://, as://<the repository in object storage>, got '${value}'`,
  );
}

/** A plan's messages name the bucket, not the temporary folder its configs were read into. */
function namedBy(plan: ModelPlan, folder: string, uri: string): ModelPlan {
  const named = (text: string) => text.replaceAll(folder, uri.replace(/\/+$/, ""));
  return plan.ok ? { ...plan, notes: plan.notes.map(named) } : { ...plan, error: named(plan.error) };
}

/** --storage-secret goes with a repository in object storage, and only there. */
function withStorageSecret(source: ModelFilesSource, secretName: string | undefined): ModelFilesSource {
  if (secretName === undefined) return source;
  if (source.kind !== "storage") {
    throw new InvalidArgumentError("--storage-secret needs --model-files s3://, gs:// or as://");
  }
  return { ...source, secretName };
}

/** Two Triton names that map to one Kubernetes name (e.g. a_b and a-b) cannot both move. */
function rejectNameClashes(plans: readonly ModelPlan[]): ModelPlan[] {
  const owners = new Map<string, string>();
  return plans.map((plan) => {
    const name = kubernetesName(plan.model);
    const owner = owners.get(name);
    if (owner === undefined) {
      owners.set(name, plan.model);
      return plan;
    }
    return {
      ok: false,
      model: plan.model,
      platform: plan.platform,
      error: `its Kubernetes name '${name}' is taken by model '${owner}'; rename one of them`,
    };
  });
}

async function writeManifests(plans: readonly ModelPlan[], flags: MigrateFlags): Promise<void> {
  const documents = plans.flatMap((plan) =>
    plan.ok
      ? [{ name: kubernetesName(plan.model), yaml: toYaml(migratedObjects(plan, flags.namespace, flags.modelFiles)) }]
      : [],
  );
  if (flags.out === "-") {
    process.stdout.write(documents.map((document) => document.yaml).join(""));
    return;
  }
  await mkdir(flags.out, { recursive: true });
  for (const document of documents) await writeFile(join(flags.out, `${document.name}.yaml`), document.yaml);
}

/** MODEL, VERSIONS, PLATFORM/BACKEND, ENGINE, NOTES: one row per model, errors in NOTES. */
export function summaryTable(plans: readonly ModelPlan[]): string {
  const rows = [
    ["MODEL", "VERSIONS", "PLATFORM/BACKEND", "ENGINE", "NOTES"],
    ...plans.map((plan) =>
      plan.ok
        ? [plan.model, plan.versions.join(","), plan.platform, plan.engine, plan.notes.join("; ")]
        : [plan.model, "-", plan.platform || "-", "FAILED", plan.error],
    ),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!)))
        .join("  ")
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join("");
}

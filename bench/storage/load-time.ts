import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Command } from "commander";
import { REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import {
  MODELS_PYTHON,
  startTritonServer,
  startTritonServerOnObjectStore,
  type Peer,
} from "../../dataplane/test/fixtures/peers.js";
import { startServer } from "../../dataplane/test/fixtures/server.js";
import { eventually } from "../../e2e/support/eventually.js";
import { TOOLS_PYTHON } from "../../e2e/support/prerequisites.js";
import { startSeaweedFs, type ObjectStoreServer } from "../../lib/test/object-stores.js";
import { positiveInteger } from "../harness/options.js";
import { median } from "../harness/ghz.js";
import { publishSection } from "../harness/published.js";
import { BENCH_CACHE } from "../harness/servers.js";

/**
 * `npm run bench:storage`: how long a server takes from start to a 100 MiB model being READY,
 * from local disk and from SeaweedFS's S3 gateway (lib/test/object-stores.ts) on loopback.
 * The data plane: from disk, from the bucket with an empty --model-cache-dir (cold: every byte
 * downloaded) and restarted on the same cache folder (warm: the listing's ETags match the
 * cached snapshot, nothing downloaded). Triton (the PyPI build, Python backend only): from disk
 * and from the same bucket (it copies the model to a local folder at every start).
 * Two models of a 100 MiB FP32 table each (bench/storage/make_models.py): an ONNX model with the
 * table as an initializer, and a Python-backend model that reads it from a file. Each time is
 * the median of --repetitions starts; every start is checked by one inference.
 * Writes bench/results/storage-load-<date>.{json,md} and its section of BENCHMARKS.md.
 */

const options = new Command("bench:storage")
  .option("--repetitions <n>", "starts per case (the median is kept)", positiveInteger, 3)
  .option("--no-publish", "a trial: write bench/results/tmp/ only, not bench/results/ nor BENCHMARKS.md")
  .parse()
  .opts<{ repetitions: number; publish: boolean }>();

const MODELS_DIR = join(BENCH_CACHE, "storage-models");
const BUCKET = "models";
const TITLE = "Loading a 100 MiB model from object storage";
/** The machine's one-minute load average as the bench starts (other work on a shared machine skews starts). */
const LOAD_AT_START = loadavg()[0]!.toFixed(1);
/** The row every start's check asks for (the table's row i holds i four times). */
const ROW = 4_000_000;

type Source = "local disk" | "S3, cold cache" | "S3, warm cache" | "S3";
interface Case {
  readonly server: "data plane" | "Triton";
  readonly model: "table_onnx" | "table_python";
  readonly source: Source;
}
interface Measured extends Case {
  readonly runsMs: number[];
  readonly medianMs: number;
  /** The data plane's sync outcome of each start from the bucket ("downloaded", "nothing downloaded"). */
  readonly synced?: string[];
  /** The download's milliseconds as the data plane logged them, of each start that downloaded. */
  readonly downloadMs?: number[];
}
type Run = { ms: number; synced?: string; downloadMs?: number };

const log = (line: string): void => console.error(`bench:storage: ${line}`);
const repositoryOf = (model: Case["model"]): string => (model === "table_onnx" ? "onnx" : "python");

/** The two models, made once (bench/storage/make_models.py with the tooling venv's onnx). */
function ensureModels(): void {
  if (existsSync(join(MODELS_DIR, "python", "table_python", "1", "table.bin"))) return;
  if (!existsSync(TOOLS_PYTHON)) throw new Error(`${TOOLS_PYTHON} is missing: run scripts/setup-python.sh`);
  rmSync(MODELS_DIR, { recursive: true, force: true });
  execFileSync(TOOLS_PYTHON, [join(REPO_ROOT, "bench", "storage", "make_models.py"), MODELS_DIR], {
    stdio: "inherit",
  });
}

/** Asks the model at `http` (KServe v2 REST) for row ROW; throws unless it is that row. */
async function checkRow(http: string, model: string): Promise<void> {
  const reply = await fetch(`http://${http}/v2/models/${model}/infer`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ inputs: [{ name: "INDEX", shape: [1], datatype: "INT64", data: [ROW] }] }),
  });
  const body = (await reply.json()) as { outputs?: { data: number[] }[] };
  const data = body.outputs?.[0]?.data;
  if (JSON.stringify(data) !== JSON.stringify([ROW, ROW, ROW, ROW]))
    throw new Error(`${model} answered ${JSON.stringify(body).slice(0, 300)}`);
}

async function untilModelReady(http: string, model: string): Promise<void> {
  await eventually(
    async () => {
      const reply = await fetch(`http://${http}/v2/models/${model}/ready`);
      await reply.arrayBuffer();
      if (!reply.ok) throw new Error(`${model} not ready (HTTP ${reply.status})`);
    },
    300_000,
    20,
  );
}

/** One data plane start: milliseconds to READY, and how the bucket's files came (if from one). */
async function dataPlaneStart(repository: string, model: string, storage: readonly string[]): Promise<Run> {
  const started = performance.now();
  const server = await startServer([
    ...["--model-repository", repository, "--model-control-mode", "none"],
    ...["--python", MODELS_PYTHON, ...storage],
  ]);
  try {
    await untilModelReady(`127.0.0.1:${server.httpPort}`, model);
    const ms = performance.now() - started;
    await checkRow(`127.0.0.1:${server.httpPort}`, model);
    const sync = server.logs.find((line) => line["msg"] === "model files synced from the object store");
    if (storage.length === 0) return { ms };
    if (sync === undefined) return { ms, synced: "nothing downloaded" };
    return { ms, synced: String(sync["outcome"]), downloadMs: Number(sync["ms"]) };
  } finally {
    await server.stop();
  }
}

/** One Triton start (ready once every model of its repository is): milliseconds to READY. */
async function tritonStart(start: () => Promise<Peer & { readonly httpAddress: string }>, model: string) {
  const started = performance.now();
  const triton = await start();
  try {
    await untilModelReady(triton.httpAddress, model);
    const ms = performance.now() - started;
    await checkRow(triton.httpAddress, model);
    return { ms };
  } finally {
    await triton.kill();
  }
}

async function measure(store: ObjectStoreServer, secrets: string): Promise<Measured[]> {
  const scratch = mkdtempSync(join(tmpdir(), "storage-bench-"));
  const results: Measured[] = [];
  const add = (kase: Case, runs: Run[]): void => {
    const runsMs = runs.map((run) => Math.round(run.ms));
    const synced = runs.flatMap((run) => (run.synced === undefined ? [] : [run.synced]));
    const downloadMs = runs.flatMap((run) => (run.downloadMs === undefined ? [] : [run.downloadMs]));
    results.push({
      ...kase,
      runsMs,
      medianMs: median(runsMs),
      ...(synced.length > 0 ? { synced } : {}),
      ...(downloadMs.length > 0 ? { downloadMs } : {}),
    });
    log(`${kase.server}, ${kase.model}, ${kase.source}: ${runsMs.join(", ")} ms${synced.length ? ` (${synced})` : ""}`);
  };
  try {
    for (const model of ["table_onnx", "table_python"] as const) {
      const local = join(MODELS_DIR, repositoryOf(model));
      const remote = store.location(BUCKET, repositoryOf(model));
      const fromDisk: Run[] = [];
      const cold: Run[] = [];
      const warm: Run[] = [];
      for (let run = 0; run < options.repetitions; run++) {
        fromDisk.push(await dataPlaneStart(local, model, []));
        const cache = join(scratch, `cache-${model}-${run}`);
        const storage = [...store.dataPlaneArguments(secrets), "--model-cache-dir", cache];
        cold.push(await dataPlaneStart(remote, model, storage));
        warm.push(await dataPlaneStart(remote, model, storage));
      }
      add({ server: "data plane", model, source: "local disk" }, fromDisk);
      add({ server: "data plane", model, source: "S3, cold cache" }, cold);
      add({ server: "data plane", model, source: "S3, warm cache" }, warm);
    }
    const model = "table_python";
    const local: Run[] = [];
    const fromBucket: Run[] = [];
    for (let run = 0; run < options.repetitions; run++) {
      local.push(await tritonStart(() => startTritonServer([join(MODELS_DIR, "python")]), model));
      const mount = mkdtempSync(join(scratch, "triton-mount-"));
      const location = store.location(BUCKET, "python");
      fromBucket.push(await tritonStart(() => startTritonServerOnObjectStore(store, [location], mount), model));
      rmSync(mount, { recursive: true, force: true });
    }
    add({ server: "Triton", model, source: "local disk" }, local);
    add({ server: "Triton", model, source: "S3" }, fromBucket);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return results;
}

/** The Markdown table: each case's median, its runs, and its ratio to the same server and model from disk. */
function markdown(results: readonly Measured[], date: string): string {
  const fromDisk = (result: Measured): number =>
    results.find(
      (other) => other.server === result.server && other.model === result.model && other.source === "local disk",
    )!.medianMs;
  const rows = results.map((result) => {
    const ratio = (result.medianMs / fromDisk(result)).toFixed(2);
    const synced = result.synced === undefined ? "" : ` (${[...new Set(result.synced)].join(", ")})`;
    const download = result.downloadMs === undefined ? "" : String(median(result.downloadMs));
    return `| ${result.server} | ${result.model} | ${result.source}${synced} | ${result.medianMs} | ${result.runsMs.join(", ")} | ${ratio}× | ${download} |`;
  });
  return [
    `${date}, ${cpus().length} cores (load average ${LOAD_AT_START} at the start), Node ${process.version},`,
    `SeaweedFS's S3 gateway on loopback; median of ${options.repetitions} starts`,
    "(`npm run bench:storage`). Start to READY: from starting the process until",
    "`/v2/models/<model>/ready` answers 200; each start then answers one inference.",
    "Models: a 100 MiB FP32 table (bench/storage/make_models.py), as an ONNX initializer",
    "(table_onnx, 100.0 MiB model.onnx) and as a Python-backend model's data file (table_python;",
    "Triton's PyPI build has only the Python backend). Download: the data plane's own measure",
    "of the bucket-to-cache copy (its log line `model files synced from the object store`).",
    "",
    "| server | model | from | start to READY, ms (median) | each start, ms | × local disk | download, ms |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

ensureModels();
log("starting SeaweedFS and uploading the models");
const store = await startSeaweedFs();
const secrets = mkdtempSync(join(tmpdir(), "storage-bench-secret-"));
let results: Measured[];
try {
  await store.writeSecretDir(secrets);
  await store.createBucket(BUCKET);
  await store.putFolder(join(MODELS_DIR, "onnx"), BUCKET, "onnx");
  await store.putFolder(join(MODELS_DIR, "python"), BUCKET, "python");
  results = await measure(store, secrets);
} finally {
  await store.stop();
  rmSync(secrets, { recursive: true, force: true });
}

const date = new Date().toISOString().slice(0, 10);
const resultsDir = join(REPO_ROOT, "bench", "results", ...(options.publish ? [] : ["tmp"]));
mkdirSync(resultsDir, { recursive: true });
const stem = join(resultsDir, `storage-load-${date}`);
writeFileSync(`${stem}.json`, `${JSON.stringify({ date, cores: cpus().length, results }, null, 2)}\n`);
const table = markdown(results, date);
writeFileSync(`${stem}.md`, `# ${TITLE}\n\n${table}\n`);
if (options.publish) publishSection(REPO_ROOT, "storage-load", TITLE, table);
console.log(table);
log(`wrote ${stem}.{json,md}${options.publish ? " and BENCHMARKS.md" : ""}`);

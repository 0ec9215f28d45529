import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { credentials } from "@grpc/grpc-js";
import { Command } from "commander";
import { GRPCInferenceServiceClient } from "../../proto/gen/ts/grpc_service.js";
import { REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import { MODELS_PYTHON, startTritonServer } from "../../dataplane/test/fixtures/peers.js";
import { call, startServer } from "../../dataplane/test/fixtures/server.js";
import { eventually } from "../../e2e/support/eventually.js";
import { perfAnalyzerBinary } from "../../e2e/support/prerequisites.js";
import { positiveInteger } from "../harness/options.js";
import { medianRun, type LoadRun } from "../harness/ghz.js";
import { runPerfAnalyzer } from "../harness/perf-analyzer.js";
import { publishSection, writeResults } from "../harness/published.js";
import { modelCounts } from "../harness/server-cost.js";

/**
 * `npm run bench:scheduling:python`: the python engine's dynamic batching (the data plane's
 * scheduler, dataplane/src/scheduling/) against Triton's Python backend. One Python model, a
 * small numpy perceptron written to batch (bench/scheduling/models/numpy_mlp), with the same
 * config.pbtxt (`dynamic_batching { }`, max_batch_size 64, one instance) served by this data
 * plane and by Triton (PyPI's nvidia-pytriton build), and the same model without
 * dynamic_batching on both. Load: Triton's perf_analyzer, batch size 1, concurrency 64, the
 * servers (and their Python processes) on core 0 and perf_analyzer on the others; the
 * servers take turns, --rounds times, and each number is the median of its rounds. Requests
 * per execution are read from each server's ModelStatistics (inference_count /
 * execution_count) over the measured runs. Writes bench/results/scheduling-python-<date>.{json,md}.
 */

const options = new Command("bench:scheduling:python")
  .option("--seconds <n>", "length of each measured run", positiveInteger, 15)
  .option("--rounds <n>", "times each server is started and measured (the median is kept)", positiveInteger, 3)
  .option("--no-publish", "a trial: write bench/results/tmp/, not bench/results/")
  .parse()
  .opts<{ seconds: number; rounds: number; publish: boolean }>();

const TITLE = "The python engine's dynamic batching against Triton's Python backend";
const CONCURRENCY = 64;
const MODEL = "numpy_mlp";
const UNBATCHED = "numpy_mlp_unbatched";
/** The same tensors answered by the data plane's identity engine: what its gRPC front does at most here. */
const CEILING = "identity_64";
const MODELS = [MODEL, UNBATCHED, CEILING] as const;
/** Triton's PyPI build has no identity backend: the ceiling is the data plane's only. */
const modelsOf = (server: ServerName) => MODELS.filter((model) => server === "data plane" || model !== CEILING);
/** A repository of the data plane's only (the ceiling's model). */
const DATAPLANE_MODELS = join(REPO_ROOT, "bench", "scheduling", "models-dataplane");
const SHAPE = "INPUT0:64";
const WARMUP_SECONDS = 3;
const LOAD_AT_START = loadavg()[0]!.toFixed(1);
/** The goal (issue 37): the batched model here at least as fast as on Triton's Python backend. */
const GOAL = 1.0;
/** The thread counts of numpy's BLAS (OpenBLAS, or another through OpenMP), set for the servers' Python. */
const BLAS_THREADS = ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"] as const;

type ServerName = "data plane" | "Triton";
interface Served {
  readonly address: string;
  stop(): Promise<void>;
}
interface Measured {
  readonly server: ServerName;
  readonly model: (typeof MODELS)[number];
  readonly runs: LoadRun[];
  readonly median: LoadRun;
  /** inference_count / execution_count of the measured runs, per round. */
  readonly requestsPerExecution: number[];
}

const log = (line: string): void => console.error(`bench:scheduling:python: ${line}`);

/** The bench's repository: numpy_mlp as it is, and numpy_mlp_unbatched (its config without dynamic_batching). */
function repository(): string {
  const folder = mkdtempSync(join(tmpdir(), "scheduling-bench-"));
  const source = join(REPO_ROOT, "bench", "scheduling", "models", MODEL);
  cpSync(source, join(folder, MODEL), { recursive: true });
  cpSync(source, join(folder, UNBATCHED), { recursive: true });
  const config = readFileSync(join(source, "config.pbtxt"), "utf8");
  const unbatched = config.replace(/^dynamic_batching \{ \}\n/m, "");
  if (unbatched === config) throw new Error(`${source}/config.pbtxt: no 'dynamic_batching { }' line to take out`);
  writeFileSync(join(folder, UNBATCHED, "config.pbtxt"), unbatched);
  return folder;
}

/**
 * The cores for the servers and for the load: with two or more, this process (and so every
 * server it starts, with their Python processes) keeps core 0 and perf_analyzer the others.
 * On one core numpy's BLAS threads only contend (a 20-row matmul took milliseconds, on both
 * servers alike): the model processes get one each.
 */
function pinServers(): string | undefined {
  const count = cpus().length;
  if (count < 2) return undefined;
  execFileSync("taskset", ["-a", "-p", "-c", "0", String(process.pid)], { stdio: "ignore" });
  for (const variable of BLAS_THREADS) process.env[variable] = "1";
  return `1-${count - 1}`;
}

/** A server on the bench's repository, once both models answer ModelReady. */
async function start(server: ServerName, folder: string): Promise<Served> {
  let served: Served;
  if (server === "data plane") {
    const started = await startServer([
      ...["--model-repository", folder, "--model-repository", DATAPLANE_MODELS, "--model-control-mode", "none"],
      ...["--python", MODELS_PYTHON],
    ]);
    served = { address: `127.0.0.1:${started.grpcPort}`, stop: async () => void (await started.stop()) };
  } else {
    const triton = await startTritonServer([folder]);
    served = { address: triton.address, stop: () => triton.kill() };
  }
  const client = new GRPCInferenceServiceClient(served.address, credentials.createInsecure());
  try {
    for (const model of modelsOf(server)) {
      await eventually(async () => {
        if (!(await call(client, "modelReady", { name: model, version: "" })).ready)
          throw new Error(`${model} not ready`);
      }, 120_000);
    }
  } finally {
    client.close();
  }
  return served;
}

async function measure(folder: string, loadCpus: string | undefined): Promise<Measured[]> {
  const runs = new Map<string, { runs: LoadRun[]; perExecution: number[] }>();
  const load = (address: string, model: string, seconds: number) =>
    runPerfAnalyzer({
      binary: perfAnalyzerBinary(),
      address,
      model,
      shape: SHAPE,
      concurrency: CONCURRENCY,
      durationSeconds: seconds,
      // OUTPUT0: 64 FP32.
      responseBytes: 64 * 4,
      ...(loadCpus !== undefined ? { cpus: loadCpus } : {}),
    });
  for (let round = 0; round < options.rounds; round++) {
    // Each round the other server goes first: a drift in the machine's load falls on both.
    const order: ServerName[] = round % 2 === 0 ? ["data plane", "Triton"] : ["Triton", "data plane"];
    for (const server of order) {
      log(`round ${round + 1}: starting ${server}`);
      const served = await start(server, folder);
      try {
        for (const model of modelsOf(server)) {
          await load(served.address, model, WARMUP_SECONDS);
          const before = await modelCounts(served.address, model);
          const run = await load(served.address, model, options.seconds);
          const after = await modelCounts(served.address, model);
          const perExecution =
            (after.inferences - before.inferences) / Math.max(1, after.executions - before.executions);
          const key = `${server}|${model}`;
          const entry = runs.get(key) ?? { runs: [], perExecution: [] };
          entry.runs.push(run);
          entry.perExecution.push(Number(perExecution.toFixed(2)));
          runs.set(key, entry);
          const failed = run.firstError === undefined ? "" : ` (${run.firstError})`;
          log(
            `round ${round + 1}, ${server}, ${model}: ${Math.round(run.rps)} req/s, ${perExecution.toFixed(2)} requests per execution${failed}`,
          );
        }
      } finally {
        await served.stop();
      }
    }
  }
  return [...runs].map(([key, entry]) => {
    const [server, model] = key.split("|") as [ServerName, (typeof MODELS)[number]];
    return { server, model, runs: entry.runs, median: medianRun(entry.runs), requestsPerExecution: entry.perExecution };
  });
}

function markdown(results: readonly Measured[], date: string): string {
  const rps = (server: ServerName, model: string): number =>
    results.find((result) => result.server === server && result.model === model)?.median.rps ?? NaN;
  const ratio = rps("data plane", MODEL) / rps("Triton", MODEL);
  const rows = results.map(
    ({ server, model, median, runs, requestsPerExecution }) =>
      `| ${server} | ${model} | ${Math.round(median.rps)} | ${runs.map((run) => Math.round(run.rps)).join(", ")} | ${median.p50Ms.toFixed(1)} | ${median.p99Ms.toFixed(1)} | ${requestsPerExecution.join(", ")} |`,
  );
  return [
    `${date}, ${cpus().length} cores (load average ${LOAD_AT_START} at the start), Node ${process.version};`,
    `perf_analyzer, batch size 1, concurrency ${CONCURRENCY}, ${options.seconds} s per run, median of ${options.rounds} rounds`,
    "(`npm run bench:scheduling:python`). The model: bench/scheduling/models/numpy_mlp (a numpy",
    "perceptron that joins its requests into one matrix), `dynamic_batching { }`, max_batch_size 64,",
    "one instance; numpy_mlp_unbatched is the same without dynamic_batching. The servers and their",
    "Python processes share core 0 (perf_analyzer has the others), with one BLAS thread each",
    `(${BLAS_THREADS.join(", ")}: 1).`,
    "",
    `**Batched, data plane / Triton: ${ratio.toFixed(2)}×** (goal ≥ ${GOAL.toFixed(1)}×: ${ratio >= GOAL ? "met" : "not met"});`,
    `batched / unbatched here: ${(rps("data plane", MODEL) / rps("data plane", UNBATCHED)).toFixed(2)}×,`,
    `on Triton: ${(rps("Triton", MODEL) / rps("Triton", UNBATCHED)).toFixed(2)}×. ${CEILING}: the same tensors answered by the`,
    "data plane's built-in identity engine (no Python, no scheduler), the most its gRPC front does here.",
    "",
    "| server | model | req/s (median) | each round | p50 ms | p99 ms | requests per execution |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

const loadCpus = pinServers();
const folder = repository();
let results: Measured[];
try {
  results = await measure(folder, loadCpus);
} finally {
  rmSync(folder, { recursive: true, force: true });
}
const date = new Date().toISOString().slice(0, 10);
const table = markdown(results, date);
const numbers = { date, cores: cpus().length, concurrency: CONCURRENCY, results };
const stem = writeResults(REPO_ROOT, { name: "scheduling-python", trial: !options.publish }, numbers, TITLE, table);
if (options.publish) publishSection(REPO_ROOT, "scheduling-python", TITLE, table);
console.log(table);
log(`wrote ${stem}.{json,md}`);

import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { ModelInferRequest, type ModelStatistics } from "../../proto/gen/ts/grpc_service.js";
import { EXAMPLES, REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import { call, infer, startServer, type ServerProcess } from "../../dataplane/test/fixtures/server.js";
import { eventually } from "../../e2e/support/eventually.js";
import { ghzBinary, TOOLS_PYTHON } from "../../e2e/support/prerequisites.js";
import { positiveInteger } from "../harness/options.js";
import { publishSection, writeResults } from "../harness/published.js";
import { median, runLoad, type LoadRun } from "../harness/ghz.js";
import { BENCH_CACHE } from "../harness/servers.js";

/**
 * `npm run bench:scheduling:onnx`: what Triton's dynamic batching is worth to an ONNX model.
 * One data plane serves each MLP twice: with the example's config (dynamic_batching,
 * examples/model_repository/mlp_onnx) and the same config without dynamic_batching (each
 * request its own session.run). The MLPs: the example's (64 -> 512 -> 512 -> 16), and a
 * heavier one (64 -> 1024 -> 1024 -> 1024 -> 16) that examples/tools/make_onnx_models.py
 * writes into the bench cache, where the work per row outweighs the data plane's cost per
 * request. ghz drives each model with ModelInfer at concurrency 64 (one FP32 [1, 64] row per
 * request), the four alternating for --repetitions rounds; the table gives each one's median
 * requests per second and each MLP's ratio (the issue's goal: batched at least 2x). The
 * model statistics give the executions: requests per execution is the batch size seen.
 * Triton's own ONNX Runtime backend is not on this machine (its PyPI build has only the
 * Python backend), so there is no Triton row. Writes bench/results/scheduling-onnx-<date>.{json,md}.
 */

const options = new Command("bench:scheduling:onnx")
  .option("--repetitions <n>", "rounds (each model driven once per round; the median is kept)", positiveInteger, 3)
  .option("--seconds <n>", "length of each load run", positiveInteger, 10)
  .option("--concurrency <n>", "requests in flight", positiveInteger, 64)
  .option("--no-publish", "a trial: write bench/results/tmp/ only")
  .parse()
  .opts<{ repetitions: number; seconds: number; concurrency: number; publish: boolean }>();

const TITLE = "Dynamic batching of an ONNX model";
const LOAD_AT_START = loadavg()[0]!.toFixed(1);
const EXAMPLE = join(EXAMPLES, "mlp_onnx");
const HEAVY_HIDDEN = "1024,1024,1024";

/** An MLP the bench serves: its model file and how the table names it. */
interface Variant {
  readonly id: "mlp" | "mlp_heavy";
  readonly layers: string;
  readonly file: string;
}
const VARIANTS: readonly Variant[] = [
  { id: "mlp", layers: "64 -> 512 -> 512 -> 16 (the example)", file: join(EXAMPLE, "1", "model.onnx") },
  {
    id: "mlp_heavy",
    layers: `64 -> ${HEAVY_HIDDEN.replaceAll(",", " -> ")} -> 16`,
    file: join(BENCH_CACHE, "scheduling", `mlp-${HEAVY_HIDDEN.replaceAll(",", "-")}.onnx`),
  },
];
type Scheduling = "batched" | "unbatched";
const SCHEDULINGS: readonly Scheduling[] = ["batched", "unbatched"];
/** The models served: each variant with and without dynamic batching. */
const CASES = VARIANTS.flatMap((variant) =>
  SCHEDULINGS.map((scheduling) => ({ variant, scheduling, model: `${variant.id}_${scheduling}` })),
);
type Case = (typeof CASES)[number];
/** Seconds of load before each measured run (sessions warm, connections open). */
const WARMUP_SECONDS = 2;

const log = (line: string): void => console.error(`bench:scheduling:onnx: ${line}`);

/** The heavier MLP, made once into the bench cache. */
function ensureHeavyModel(): void {
  const heavy = VARIANTS[1]!.file;
  if (existsSync(heavy)) return;
  if (!existsSync(TOOLS_PYTHON)) throw new Error(`${TOOLS_PYTHON} is missing: run scripts/setup-python.sh`);
  const script = join(REPO_ROOT, "examples", "tools", "make_onnx_models.py");
  execFileSync(TOOLS_PYTHON, [script, "--mlp", heavy, "--hidden", HEAVY_HIDDEN], { stdio: "inherit" });
}

/** The example's config under the case's name; without dynamic_batching for the unbatched cases. */
function configOf(kase: Case): string {
  const config = readFileSync(join(EXAMPLE, "config.pbtxt"), "utf8").replace(
    'name: "mlp_onnx"',
    `name: "${kase.model}"`,
  );
  if (kase.scheduling === "batched") return config;
  const unbatched = config.replace(/dynamic_batching \{[^}]*\}\n/, "");
  if (unbatched === config) throw new Error("the example's config has no dynamic_batching block to take out");
  return unbatched;
}

function repository(): string {
  const folder = mkdtempSync(join(tmpdir(), "scheduling-onnx-bench-"));
  for (const kase of CASES) {
    mkdirSync(join(folder, kase.model, "1"), { recursive: true });
    copyFileSync(kase.variant.file, join(folder, kase.model, "1", "model.onnx"));
    writeFileSync(join(folder, kase.model, "config.pbtxt"), configOf(kase));
  }
  return folder;
}

/** One row of 64 values, the same for every request (the answers are checked equal once). */
const ROW = Float32Array.from({ length: 64 }, (_, index) => Math.sin(index) * 2);

function request(model: string): ModelInferRequest {
  return ModelInferRequest.fromPartial({
    modelName: model,
    inputs: [{ name: "INPUT", datatype: "FP32", shape: [1n, 64n] }],
    rawInputContents: [new Uint8Array(ROW.buffer)],
  });
}

/** Each MLP answers the row alike batched or not: the same model, scheduled otherwise. */
async function checkAnswers(server: ServerProcess): Promise<void> {
  for (const variant of VARIANTS) {
    const answers = await Promise.all(
      SCHEDULINGS.map(async (scheduling) => {
        const reply = await infer(server.client, request(`${variant.id}_${scheduling}`));
        return [...reply.rawOutputContents[0]!];
      }),
    );
    if (JSON.stringify(answers[0]) !== JSON.stringify(answers[1])) {
      throw new Error(`${variant.id}: batched and unbatched answer differently`);
    }
  }
}

async function statisticsOf(server: ServerProcess, model: string): Promise<ModelStatistics> {
  const { modelStats } = await call(server.client, "modelStatistics", { name: model, version: "" });
  return modelStats[0]!;
}

interface Measured {
  readonly model: string;
  readonly variant: Variant["id"];
  readonly layers: string;
  readonly scheduling: Scheduling;
  readonly runs: LoadRun[];
  readonly medianRps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Requests per execution over the measured runs (the statistics' inference count / execution count). */
  readonly requestsPerExecution: number;
  /** The batch sizes the statistics saw (batch_stats), with their executions. */
  readonly batchSizes: Record<string, number>;
}

async function measure(server: ServerProcess, requestDir: string): Promise<Measured[]> {
  const ghz = ghzBinary();
  // On two or more cores ghz gets the last one, so the load takes less of the server's.
  const client = cpus().length >= 2 ? String(cpus().length - 1) : undefined;
  const address = `127.0.0.1:${server.grpcPort}`;
  const load = (kase: Case, seconds: number) => {
    const requestFile = join(requestDir, `${kase.model}.bin`);
    writeFileSync(requestFile, ModelInferRequest.encode(request(kase.model)).finish());
    return runLoad({
      ghz,
      address,
      requestFile,
      concurrency: options.concurrency,
      connections: 1,
      durationSeconds: seconds,
      ...(client !== undefined ? { cpus: client } : {}),
    });
  };
  const runs = new Map<Case, LoadRun[]>(CASES.map((kase) => [kase, []]));
  const before = new Map<Case, ModelStatistics>();
  for (const kase of CASES) {
    await load(kase, WARMUP_SECONDS);
    before.set(kase, await statisticsOf(server, kase.model));
  }
  for (let round = 0; round < options.repetitions; round++) {
    // Alternating, so a change in the machine's other load falls on every case.
    for (const kase of round % 2 === 0 ? CASES : [...CASES].reverse()) {
      const run = await load(kase, options.seconds);
      if (run.errors > 0) throw new Error(`${kase.model}: ${run.errors} errors (${run.firstError})`);
      runs.get(kase)!.push(run);
      log(`round ${round + 1}, ${kase.model}: ${Math.round(run.rps)} req/s, p50 ${run.p50Ms.toFixed(2)} ms`);
    }
  }
  const results: Measured[] = [];
  for (const kase of CASES) {
    const start = before.get(kase)!;
    const end = await statisticsOf(server, kase.model);
    const inferences = Number(end.inferenceCount - start.inferenceCount);
    const executions = Number(end.executionCount - start.executionCount);
    const batchSizes: Record<string, number> = {};
    for (const stats of end.batchStats) {
      const earlier = start.batchStats.find((other) => other.batchSize === stats.batchSize);
      const count = Number((stats.computeInfer?.count ?? 0n) - (earlier?.computeInfer?.count ?? 0n));
      if (count > 0) batchSizes[String(stats.batchSize)] = count;
    }
    const measured = runs.get(kase)!;
    results.push({
      model: kase.model,
      variant: kase.variant.id,
      layers: kase.variant.layers,
      scheduling: kase.scheduling,
      runs: measured,
      medianRps: Math.round(median(measured.map((run) => run.rps))),
      p50Ms: median(measured.map((run) => run.p50Ms)),
      p99Ms: median(measured.map((run) => run.p99Ms)),
      requestsPerExecution: executions > 0 ? inferences / executions : NaN,
      batchSizes,
    });
  }
  return results;
}

/** The batch sizes seen, most executions first (at most five). */
function describeBatches(sizes: Record<string, number>): string {
  const entries = Object.entries(sizes).sort((a, b) => b[1] - a[1]);
  const shown = entries.slice(0, 5).map(([size, count]) => `${size}: ${count}`);
  return entries.length > 5 ? `${shown.join(", ")}, …` : shown.join(", ");
}

/** Each MLP's batched / unbatched ratio of median requests per second. */
function ratios(results: readonly Measured[]): Record<string, number> {
  const rps = (variant: string, scheduling: Scheduling) =>
    results.find((result) => result.variant === variant && result.scheduling === scheduling)!.medianRps;
  return Object.fromEntries(VARIANTS.map(({ id }) => [id, rps(id, "batched") / rps(id, "unbatched")]));
}

function markdown(results: readonly Measured[], date: string): string {
  const batching = readFileSync(join(EXAMPLE, "config.pbtxt"), "utf8").match(/dynamic_batching \{([^}]*)\}/)![1]!;
  const rows = results.map(
    (result) =>
      `| ${result.layers} | ${result.scheduling === "batched" ? "dynamic_batching" : "none"} | ${result.medianRps} | ${result.runs.map((run) => Math.round(run.rps)).join(", ")} | ${result.p50Ms.toFixed(2)} | ${result.p99Ms.toFixed(2)} | ${result.requestsPerExecution.toFixed(1)} | ${describeBatches(result.batchSizes)} |`,
  );
  const ratioLines = Object.entries(ratios(results)).map(
    ([variant, ratio]) =>
      `- ${VARIANTS.find(({ id }) => id === variant)!.layers}: batched / unbatched **${ratio.toFixed(2)}×** (goal: at least 2×)`,
  );
  return [
    `${date}, ${cpus().length} cores (load average ${LOAD_AT_START} at the start), Node ${process.version};`,
    `one data plane, ghz at concurrency ${options.concurrency} on one connection${cpus().length >= 2 ? ` (pinned to core ${cpus().length - 1})` : ""},`,
    `${options.repetitions} alternating runs of ${options.seconds} s per model (\`npm run bench:scheduling:onnx\`).`,
    "Each MLP (FP32 [batch, 64] in, [batch, 16] out; one row per request) is served with the example's",
    `config (examples/model_repository/mlp_onnx: \`dynamic_batching {${batching.replace(/\s+/g, " ")}}\`, one CPU`,
    "instance) and with the same config without its dynamic_batching block.",
    "",
    "| MLP | scheduling | req/s (median) | each run | p50 ms | p99 ms | requests per execution | batch sizes seen (executions) |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
    "",
    ...ratioLines,
  ].join("\n");
}

ensureHeavyModel();
const folder = repository();
const requestDir = mkdtempSync(join(tmpdir(), "scheduling-onnx-requests-"));
let results: Measured[];
try {
  const server = await startServer(["--model-repository", folder, "--model-control-mode", "none"]);
  try {
    await eventually(() => checkAnswers(server), 60_000, 100);
    results = await measure(server, requestDir);
  } finally {
    await server.stop();
  }
} finally {
  rmSync(folder, { recursive: true, force: true });
  rmSync(requestDir, { recursive: true, force: true });
}

const date = new Date().toISOString().slice(0, 10);
const table = markdown(results, date);
const numbers = { date, cores: cpus().length, options, ratios: ratios(results), results };
const stem = writeResults(REPO_ROOT, { name: "scheduling-onnx", trial: !options.publish }, numbers, TITLE, table);
if (options.publish) publishSection(REPO_ROOT, "scheduling-onnx", TITLE, table);
console.log(table);
log(`wrote ${stem}.{json,md}`);

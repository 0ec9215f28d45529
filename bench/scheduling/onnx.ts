import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { ModelInferRequest, type ModelStatistics } from "../../proto/gen/ts/grpc_service.js";
import { EXAMPLES, REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import { call, infer, startServer, type ServerProcess } from "../../dataplane/test/fixtures/server.js";
import { eventually } from "../../e2e/support/eventually.js";
import { ghzBinary } from "../../e2e/support/prerequisites.js";
import { positiveInteger } from "../harness/options.js";
import { median, runLoad, type LoadRun } from "../harness/ghz.js";

/**
 * `npm run bench:scheduling:onnx`: what Triton's dynamic batching is worth to an ONNX model.
 * One data plane serves the example MLP (examples/model_repository/mlp_onnx) twice: as its
 * config says (dynamic_batching) and the same config without dynamic_batching (each request
 * its own session.run). ghz drives each with ModelInfer at concurrency 64 (one FP32 [1, 64]
 * row per request), the two alternating for --repetitions rounds; the table gives each one's
 * median requests per second and the ratio (the issue's goal: batched at least 2x). The model
 * statistics give the executions each served: requests per execution is the batch size seen.
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
const MODELS = { batched: "mlp_batched", unbatched: "mlp_unbatched" } as const;
type Case = keyof typeof MODELS;
/** Seconds of load before each measured run (sessions warm, connections open). */
const WARMUP_SECONDS = 2;

const log = (line: string): void => console.error(`bench:scheduling:onnx: ${line}`);

/** The example's config under another name; without dynamic_batching for the unbatched case. */
function configOf(kase: Case): string {
  const config = readFileSync(join(EXAMPLE, "config.pbtxt"), "utf8").replace(
    'name: "mlp_onnx"',
    `name: "${MODELS[kase]}"`,
  );
  if (kase === "batched") return config;
  const unbatched = config.replace(/dynamic_batching \{[^}]*\}\n/, "");
  if (unbatched === config) throw new Error("the example's config has no dynamic_batching block to take out");
  return unbatched;
}

function repository(): string {
  const folder = mkdtempSync(join(tmpdir(), "scheduling-onnx-bench-"));
  for (const kase of Object.keys(MODELS) as Case[]) {
    mkdirSync(join(folder, MODELS[kase], "1"), { recursive: true });
    copyFileSync(join(EXAMPLE, "1", "model.onnx"), join(folder, MODELS[kase], "1", "model.onnx"));
    writeFileSync(join(folder, MODELS[kase], "config.pbtxt"), configOf(kase));
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

/** Both models answer the row alike: the batched one is the same model, scheduled otherwise. */
async function checkAnswers(server: ServerProcess): Promise<void> {
  const answers = await Promise.all(
    Object.values(MODELS).map(async (model) => [...(await infer(server.client, request(model))).rawOutputContents[0]!]),
  );
  if (JSON.stringify(answers[0]) !== JSON.stringify(answers[1])) throw new Error("the two models answer differently");
}

async function statisticsOf(server: ServerProcess, model: string): Promise<ModelStatistics> {
  const { modelStats } = await call(server.client, "modelStatistics", { name: model, version: "" });
  return modelStats[0]!;
}

interface Measured {
  readonly case: Case;
  readonly model: string;
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
  const files = Object.fromEntries(
    (Object.keys(MODELS) as Case[]).map((kase) => {
      const file = join(requestDir, `${kase}.bin`);
      writeFileSync(file, ModelInferRequest.encode(request(MODELS[kase])).finish());
      return [kase, file];
    }),
  ) as Record<Case, string>;
  const load = (kase: Case, seconds: number) =>
    runLoad({
      ghz,
      address,
      requestFile: files[kase],
      concurrency: options.concurrency,
      connections: 1,
      durationSeconds: seconds,
      ...(client !== undefined ? { cpus: client } : {}),
    });
  const runs: Record<Case, LoadRun[]> = { batched: [], unbatched: [] };
  const before = new Map<Case, ModelStatistics>();
  for (const kase of Object.keys(MODELS) as Case[]) {
    await load(kase, WARMUP_SECONDS);
    before.set(kase, await statisticsOf(server, MODELS[kase]));
  }
  for (let round = 0; round < options.repetitions; round++) {
    // Alternating, so a change in the machine's other load falls on both.
    for (const kase of round % 2 === 0 ? (["batched", "unbatched"] as const) : (["unbatched", "batched"] as const)) {
      const run = await load(kase, options.seconds);
      if (run.errors > 0) throw new Error(`${kase}: ${run.errors} errors (${run.firstError})`);
      runs[kase].push(run);
      log(`round ${round + 1}, ${kase}: ${Math.round(run.rps)} req/s, p50 ${run.p50Ms.toFixed(2)} ms`);
    }
  }
  const results: Measured[] = [];
  for (const kase of Object.keys(MODELS) as Case[]) {
    const start = before.get(kase)!;
    const end = await statisticsOf(server, MODELS[kase]);
    const inferences = Number(end.inferenceCount - start.inferenceCount);
    const executions = Number(end.executionCount - start.executionCount);
    const batchSizes: Record<string, number> = {};
    for (const stats of end.batchStats) {
      const earlier = start.batchStats.find((other) => other.batchSize === stats.batchSize);
      const count = Number((stats.computeInfer?.count ?? 0n) - (earlier?.computeInfer?.count ?? 0n));
      if (count > 0) batchSizes[String(stats.batchSize)] = count;
    }
    results.push({
      case: kase,
      model: MODELS[kase],
      runs: runs[kase],
      medianRps: Math.round(median(runs[kase].map((run) => run.rps))),
      p50Ms: median(runs[kase].map((run) => run.p50Ms)),
      p99Ms: median(runs[kase].map((run) => run.p99Ms)),
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

function markdown(results: readonly Measured[], date: string): string {
  const byCase = (kase: Case) => results.find((result) => result.case === kase)!;
  const ratio = byCase("batched").medianRps / byCase("unbatched").medianRps;
  const rows = results.map(
    (result) =>
      `| ${result.model} | ${result.case === "batched" ? "dynamic_batching (preferred 16, 32, 64; 100 µs)" : "none"} | ${result.medianRps} | ${result.runs.map((run) => Math.round(run.rps)).join(", ")} | ${result.p50Ms.toFixed(2)} | ${result.p99Ms.toFixed(2)} | ${result.requestsPerExecution.toFixed(1)} | ${describeBatches(result.batchSizes)} |`,
  );
  return [
    `${date}, ${cpus().length} cores (load average ${LOAD_AT_START} at the start), Node ${process.version};`,
    `one data plane, ghz at concurrency ${options.concurrency} on one connection${cpus().length >= 2 ? ` (pinned to core ${cpus().length - 1})` : ""},`,
    `${options.repetitions} alternating runs of ${options.seconds} s per model (\`npm run bench:scheduling:onnx\`).`,
    "Model: examples/model_repository/mlp_onnx (FP32 [batch, 64] -> 512 -> 512 -> 16), one row per request,",
    "one CPU instance; the same config with and without its dynamic_batching block.",
    "",
    "| model | scheduling | req/s (median) | each run | p50 ms | p99 ms | requests per execution | batch sizes seen (executions) |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
    "",
    `Batched / unbatched: **${ratio.toFixed(2)}×** (goal: at least 2×).`,
  ].join("\n");
}

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
const resultsDir = join(REPO_ROOT, "bench", "results", ...(options.publish ? [] : ["tmp"]));
mkdirSync(resultsDir, { recursive: true });
const stem = join(resultsDir, `scheduling-onnx-${date}`);
writeFileSync(`${stem}.json`, `${JSON.stringify({ date, cores: cpus().length, options, results }, null, 2)}\n`);
const table = markdown(results, date);
writeFileSync(`${stem}.md`, `# ${TITLE}\n\n${table}\n`);
console.log(table);
log(`wrote ${stem}.{json,md}`);

import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { ModelInferRequest } from "../../proto/gen/ts/grpc_service.js";
import { ensembleRepository, ensembleStep } from "../../dataplane/test/fixtures/ensembles.js";
import { EXAMPLES, REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import { MODELS_PYTHON } from "../../dataplane/test/fixtures/peers.js";
import { addSubRequest } from "../../dataplane/test/fixtures/requests.js";
import { PYTHON_MODELS } from "../../dataplane/test/fixtures/python-models.js";
import { startServer, type ServerProcess } from "../../dataplane/test/fixtures/server.js";
import { ghzBinary } from "../../e2e/support/prerequisites.js";
import { median, runLoad, type LoadRun } from "../harness/ghz.js";
import { publishSection, writeResults } from "../harness/published.js";

/**
 * `npm run bench:scheduling:ensemble`: what an ensemble of two steps costs against its two
 * steps called directly, on one data plane under the same load: at concurrency 1 the
 * ensemble's median latency against the sum of its steps' medians, at concurrency 16 the
 * time each ensemble request takes of the server (1 / throughput) against the sum of each
 * step's, each repetition's ratio of runs back to back, the median kept. Two ensembles: the
 * bundled ensemble_add_sub (add_sub_onnx twice) and the same graph of the Python add_sub
 * model. Goal: at most 1.3x. Writes
 * bench/results/scheduling-ensemble-<date>.{json,md}.
 */

const positive = (value: string): number => {
  const parsed = Number(value);
  if (!(parsed > 0 && Number.isInteger(parsed))) throw new InvalidArgumentError("must be a positive integer");
  return parsed;
};
const options = new Command("bench:scheduling:ensemble")
  .option("--seconds <n>", "seconds of each load run", positive, 8)
  .option("--repetitions <n>", "runs of each case, interleaved (the median is kept)", positive, 3)
  .option("--no-publish", "a trial: write bench/results/tmp/ only")
  .parse()
  .opts<{ seconds: number; repetitions: number; publish: boolean }>();

const GOAL = 1.3;
const log = (line: string): void => console.error(`bench:scheduling:ensemble: ${line}`);

interface Pair {
  readonly label: string;
  readonly step: string;
  readonly ensemble: string;
  /** The inputs' shape: [1, 4] for the batching ONNX model, [4] for the Python one. */
  readonly shape: readonly bigint[];
}
const PAIRS: readonly Pair[] = [
  { label: "ONNX (add_sub_onnx twice)", step: "add_sub_onnx", ensemble: "ensemble_add_sub", shape: [1n, 4n] },
  { label: "Python (add_sub twice)", step: "add_sub", ensemble: "ensemble_add_sub_python", shape: [4n] },
];

/** ensemble_add_sub's graph on the Python add_sub model. */
const ENSEMBLE_ADD_SUB_PYTHON = `name: "ensemble_add_sub_python"
platform: "ensemble"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [
${ensembleStep(
  "add_sub",
  [
    ["INPUT0", "INPUT0"],
    ["INPUT1", "INPUT1"],
  ],
  [
    ["OUTPUT0", "SUM"],
    ["OUTPUT1", "DIFF"],
  ],
)},
${ensembleStep(
  "add_sub",
  [
    ["INPUT0", "SUM"],
    ["INPUT1", "DIFF"],
  ],
  [
    ["OUTPUT0", "OUTPUT0"],
    ["OUTPUT1", "OUTPUT1"],
  ],
)}
  ]
}
`;

/** add_sub's request (INPUT0 = 0, 1, 2, ..., INPUT1 = ones) for `model`, encoded where ghz reads it. */
function requestFile(dir: string, model: string, shape: readonly bigint[]): string {
  const file = join(dir, `${model}.bin`);
  writeFileSync(file, ModelInferRequest.encode(addSubRequest(model, shape)).finish());
  return file;
}

interface Measured {
  readonly pair: string;
  readonly model: string;
  readonly concurrency: number;
  readonly runs: LoadRun[];
  readonly rps: number;
  readonly p50Ms: number;
}

async function measurePair(server: ServerProcess, scratch: string, pair: Pair): Promise<Measured[]> {
  const ghz = ghzBinary();
  const address = `127.0.0.1:${server.grpcPort}`;
  const files = new Map([pair.step, pair.ensemble].map((model) => [model, requestFile(scratch, model, pair.shape)]));
  const runs = new Map<string, LoadRun[]>();
  const run = async (model: string, concurrency: number, seconds: number): Promise<LoadRun> => {
    const result = await runLoad({
      ghz,
      address,
      requestFile: files.get(model)!,
      concurrency,
      connections: Math.min(concurrency, 4),
      durationSeconds: seconds,
    });
    if (result.errors > 0) throw new Error(`${model}: ${result.errors} errors, first: ${result.firstError}`);
    return result;
  };
  // Warm both (sessions, processes, JIT) before anything counts.
  for (const model of files.keys()) await run(model, 4, 2);
  for (let repetition = 0; repetition < options.repetitions; repetition++) {
    for (const concurrency of [1, 16]) {
      // Interleaved, so a change in the machine's load touches both alike.
      for (const model of repetition % 2 === 0 ? [pair.step, pair.ensemble] : [pair.ensemble, pair.step]) {
        const result = await run(model, concurrency, options.seconds);
        log(`${model} c${concurrency}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(2)} ms`);
        const key = `${model}@${concurrency}`;
        runs.set(key, [...(runs.get(key) ?? []), result]);
      }
    }
  }
  return [...runs].map(([key, measured]) => {
    const [model, concurrency] = key.split("@") as [string, string];
    return {
      pair: pair.label,
      model,
      concurrency: Number(concurrency),
      runs: measured,
      rps: median(measured.map((one) => one.rps)),
      p50Ms: median(measured.map((one) => one.p50Ms)),
    };
  });
}

interface Ratio {
  readonly pair: string;
  /** c1: the ensemble's median latency / (its two steps' median latencies added). */
  readonly latencyRatio: number;
  /** c16: the ensemble's time per request (1 / throughput) / its two steps' added. */
  readonly throughputCostRatio: number;
}

/**
 * Each repetition's ratio (its ensemble and step runs were back to back), then their median:
 * a shared machine's load drifts between repetitions more than within one.
 */
function ratiosOf(pair: Pair, measured: readonly Measured[]): Ratio {
  const runsOf = (model: string, concurrency: number) =>
    measured.find((one) => one.model === model && one.concurrency === concurrency)!.runs;
  const paired = (concurrency: number, ratio: (ensemble: LoadRun, step: LoadRun) => number): number => {
    const steps = runsOf(pair.step, concurrency);
    return median(runsOf(pair.ensemble, concurrency).map((run, index) => ratio(run, steps[index]!)));
  };
  return {
    pair: pair.label,
    latencyRatio: paired(1, (ensemble, step) => ensemble.p50Ms / (2 * step.p50Ms)),
    throughputCostRatio: paired(16, (ensemble, step) => 1 / ensemble.rps / (2 / step.rps)),
  };
}

function markdown(measured: readonly Measured[], ratios: readonly Ratio[], date: string): string {
  const lines = [
    `${date}, ${cpus().length} cores, load average ${loadavg()[0]!.toFixed(1)} at the end; ghz, ${options.seconds} s runs; ratios: the median of ${options.repetitions} repetitions' (each ensemble run beside its step's), req/s and p50: medians; goal: at most ${GOAL}x the sum of the steps.`,
    "",
    "| ensemble | c1 latency: ensemble / sum of steps | c16 time per request: ensemble / sum of steps |",
    "|---|---|---|",
    ...ratios.map(
      (ratio) => `| ${ratio.pair} | ${ratio.latencyRatio.toFixed(2)}x | ${ratio.throughputCostRatio.toFixed(2)}x |`,
    ),
    "",
    "| model | concurrency | req/s | p50 ms |",
    "|---|---|---|---|",
    ...measured.map((one) => `| ${one.model} | ${one.concurrency} | ${one.rps.toFixed(0)} | ${one.p50Ms.toFixed(2)} |`),
  ];
  return lines.join("\n");
}

const scratch = mkdtempSync(join(tmpdir(), "ensemble-bench-"));
const repository = ensembleRepository({ ensemble_add_sub_python: ENSEMBLE_ADD_SUB_PYTHON });
// Only the Python model the ensemble needs, not the whole test repository.
cpSync(join(PYTHON_MODELS, "add_sub"), join(repository, "add_sub"), { recursive: true });
const pythonHere = existsSync(MODELS_PYTHON);
if (!pythonHere) log(`no ${MODELS_PYTHON} (scripts/setup-python.sh): the Python pair is left out`);
let server: ServerProcess | undefined;
const measured: Measured[] = [];
const ratios: Ratio[] = [];
try {
  server = await startServer([
    ...["--model-repository", EXAMPLES],
    ...(pythonHere ? ["--model-repository", repository, "--python", MODELS_PYTHON] : []),
  ]);
  for (const pair of PAIRS.filter((candidate) => pythonHere || candidate.step !== "add_sub")) {
    const results = await measurePair(server, scratch, pair);
    measured.push(...results);
    ratios.push(ratiosOf(pair, results));
  }
} finally {
  await server?.stop();
  rmSync(scratch, { recursive: true, force: true });
  rmSync(repository, { recursive: true, force: true });
}
const date = new Date().toISOString().slice(0, 10);
const table = markdown(measured, ratios, date);
const TITLE = "An ensemble of two steps against its steps called directly";
const numbers = { date, cores: cpus().length, goal: GOAL, ratios, measured };
const stem = writeResults(REPO_ROOT, { name: "scheduling-ensemble", trial: !options.publish }, numbers, TITLE, table);
if (options.publish) publishSection(REPO_ROOT, "scheduling-ensemble", TITLE, table);
console.log(table);
log(`wrote ${stem}.{json,md}`);
for (const ratio of ratios) {
  if (ratio.latencyRatio > GOAL || ratio.throughputCostRatio > GOAL) log(`${ratio.pair}: past the goal of ${GOAL}x`);
}

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { REPO_ROOT } from "../dataplane/test/fixtures/paths.js";
import { markedSections, publishSection, writeResults } from "./harness/published.js";
import { markdownReport } from "./harness/report.js";
import { runBenchmarks } from "./harness/run.js";
import { SCENARIOS } from "./harness/scenarios.js";
import { runSharedMemoryBench, SHARED_MEMORY_SCENARIO, sharedMemoryMarkdown } from "./harness/shared-memory.js";
import { BENCH_CACHE, SERVER_IDS, type ServerId } from "./harness/servers.js";

/**
 * `npm run bench`: every scenario against every server, then bench/results/<date>.{json,md,png}
 * and BENCHMARKS.md. bench/setup.sh (run by npm run bench first) installs the peers.
 */

const positive = (value: string): number => {
  const parsed = Number(value);
  if (!(parsed > 0)) throw new InvalidArgumentError("must be a positive number");
  return parsed;
};
const servers = (value: string): ServerId[] => {
  const ids = value.split(",");
  const unknown = ids.filter((id) => !(SERVER_IDS as readonly string[]).includes(id));
  if (unknown.length > 0)
    throw new InvalidArgumentError(`unknown: ${unknown.join(", ")}; known: ${SERVER_IDS.join(", ")}`);
  return ids as ServerId[];
};

const options = new Command("bench")
  .option("--duration <seconds>", "length of each measured run", positive, 5)
  .option("--repetitions <n>", "measured runs per scenario and server (the median is kept)", positive, 3)
  .option("--warmup <seconds>", "unmeasured run before them", positive, 1)
  .option("--scenarios <ids>", "only these scenarios (comma-separated ids)")
  .option("--only <servers>", "only these servers (comma-separated)", servers, [] as ServerId[])
  .option("--no-publish", "a trial: write bench/results/tmp/ only, not bench/results/ nor BENCHMARKS.md")
  .option("--no-perf-analyzer", "drive the gRPC tensor scenarios with ghz only, not also with perf_analyzer")
  .option(
    "--results-dir <dir>",
    "write the scenarios' json, md and png here (a trial elsewhere than bench/results/tmp)",
  )
  .parse()
  .opts<{
    duration: number;
    repetitions: number;
    warmup: number;
    scenarios?: string;
    only: ServerId[];
    publish: boolean;
    perfAnalyzer: boolean;
    resultsDir?: string;
  }>();

const asked = options.scenarios?.split(",");
const chosen = asked === undefined ? SCENARIOS : SCENARIOS.filter((s) => asked.includes(s.id));
// The shared-memory scenario drives perf_analyzer alone, and publishes a section of its own.
const withSharedMemory = asked === undefined || asked.includes(SHARED_MEMORY_SCENARIO.id);
const log = (line: string): void => console.error(`bench: ${line}`);
// How it was run, as typed: npm passes the options after `--`.
const passed = process.argv.slice(2);
const command = passed.length === 0 ? "npm run bench" : `npm run bench -- ${passed.join(" ")}`;

if (chosen.length > 0) await mainScenarios();
if (withSharedMemory) {
  const settings = {
    durationSeconds: options.duration,
    repetitions: options.repetitions,
    warmupSeconds: options.warmup,
    only: options.only,
    log,
  };
  const results = await runSharedMemoryBench(settings);
  const table = sharedMemoryMarkdown(results, settings);
  const stem = writeResults(
    REPO_ROOT,
    { name: SHARED_MEMORY_SCENARIO.id, trial: !options.publish },
    results,
    SHARED_MEMORY_SCENARIO.title,
    table,
  );
  if (options.publish) publishSection(REPO_ROOT, SHARED_MEMORY_SCENARIO.id, SHARED_MEMORY_SCENARIO.title, table);
  log(`wrote ${stem}.{json,md}${options.publish ? " and its BENCHMARKS.md section" : ""}`);
}

/** Every chosen ghz / vegeta / stream scenario, its report and chart, and BENCHMARKS.md's main part. */
async function mainScenarios(): Promise<void> {
  const report = await runBenchmarks(chosen, {
    durationSeconds: options.duration,
    repetitions: options.repetitions,
    warmupSeconds: options.warmup,
    only: options.only,
    perfAnalyzer: options.perfAnalyzer,
    log,
  });

  // A partial run (--no-publish) goes to the git-ignored tmp/, never over the published results.
  const resultsDir = options.resultsDir ?? join(REPO_ROOT, "bench", "results", ...(options.publish ? [] : ["tmp"]));
  mkdirSync(resultsDir, { recursive: true });
  const stem = report.date.slice(0, 10);
  const jsonFile = join(resultsDir, `${stem}.json`);
  writeFileSync(jsonFile, `${JSON.stringify(report, null, 2)}\n`);
  const chartFile = join(resultsDir, `${stem}.png`);
  const python = join(BENCH_CACHE, "..", "venv-bench", "bin", "python");
  let chart: string | undefined;
  if (existsSync(python)) {
    execFileSync(python, [join(REPO_ROOT, "bench", "chart.py"), jsonFile, chartFile], { stdio: "inherit" });
    chart = chartFile;
  } else {
    console.error(`bench: no chart: ${python} is missing (bench/setup.sh makes it)`);
  }
  writeFileSync(join(resultsDir, `${stem}.md`), markdownReport(report, command, chart && `${stem}.png`));
  if (options.publish) {
    const published = markdownReport(report, command, chart && `bench/results/${stem}.png`);
    const benchmarks = join(REPO_ROOT, "BENCHMARKS.md");
    // Other benches' sections (bench:storage) stay.
    const kept = existsSync(benchmarks) ? markedSections(readFileSync(benchmarks, "utf8")) : [];
    writeFileSync(benchmarks, [`# Benchmarks\n\n${published}`, ...kept].join("\n\n") + "\n");
  }
  console.error(`bench: wrote ${jsonFile}${options.publish ? " and BENCHMARKS.md" : ""}`);
}

import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { LoadRun } from "./ghz.js";

/**
 * The second load client: Triton's own perf_analyzer (C++, the PyPI 2.60 wheel that
 * e2e/tools/perf-analyzer.sh runs through a newer glibc's loader), driving ModelInfer with
 * the same tensor shape ghz sends. Two generators that agree make a number the server's,
 * not the client's.
 */
export interface PerfAnalyzerLoad {
  readonly binary: string;
  readonly address: string;
  readonly model: string;
  /** The input and its shape, as perf_analyzer's --shape takes it (e.g. INPUT0:1,262144). */
  readonly shape: string;
  readonly concurrency: number;
  readonly durationSeconds: number;
  /** Cores the load generator may use (taskset), e.g. "1". */
  readonly cpus?: string;
}

const US_PER_MS = 1000;
/** perf_analyzer measures until three windows in a row are "stable"; with -s 1000 any three are. */
const WINDOWS = 3;

export async function runPerfAnalyzer(options: PerfAnalyzerLoad): Promise<LoadRun> {
  const dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-perf-analyzer-"));
  const csv = join(dir, "run.csv");
  const args = [
    ...["-m", options.model, "-u", options.address, "-i", "grpc", "--shape", options.shape],
    ...["--concurrency-range", String(options.concurrency)],
    ...["--measurement-interval", String(Math.max(100, Math.round((options.durationSeconds * 1000) / WINDOWS)))],
    ...["-s", "1000", "--max-trials", String(WINDOWS), "-f", csv],
  ];
  const [program, programArgs] =
    options.cpus === undefined ? [options.binary, args] : ["taskset", ["-c", options.cpus, options.binary, ...args]];
  try {
    const { stdout } = await promisify(execFile)(program, programArgs, { maxBuffer: 16 * 1024 * 1024 });
    const [header, row] = readFileSync(csv, "utf8").trim().split("\n");
    const columns = header!.split(",");
    const value = (name: string): number => Number(row!.split(",")[columns.indexOf(name)]);
    const count = Number(/Request count: (\d+)/.exec(stdout)?.[1] ?? NaN);
    return {
      ok: count,
      errors: 0,
      rps: value("Inferences/Second"),
      p50Ms: value("p50 latency") / US_PER_MS,
      p99Ms: value("p99 latency") / US_PER_MS,
    };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message?: string };
    const said = `${failed.stderr ?? ""}\n${failed.stdout ?? ""}`.trim().split("\n").filter(Boolean);
    return { ok: 0, errors: 1, rps: 0, p50Ms: NaN, p99Ms: NaN, firstError: said.at(-1) ?? failed.message ?? "failed" };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

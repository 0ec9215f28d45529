import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { join } from "node:path";
import { REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";

/** One load run's numbers, from ghz's JSON report. */
export interface LoadRun {
  readonly ok: number;
  readonly errors: number;
  /** Successful requests per second. */
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** The first error ghz saw, if any (e.g. a peer refusing a 16 MiB message). */
  readonly firstError?: string;
}

export interface LoadOptions {
  readonly ghz: string;
  readonly address: string;
  readonly requestFile: string;
  readonly concurrency: number;
  readonly connections: number;
  readonly durationSeconds: number;
  /** Cores the load generator may use (taskset), e.g. "1"; undefined leaves it unpinned. */
  readonly cpus?: string;
}

interface GhzReport {
  count: number;
  rps: number;
  latencyDistribution: { percentage: number; latency: number }[] | null;
  statusCodeDistribution: Record<string, number> | null;
  errorDistribution: Record<string, number> | null;
}

const PROTO = join(REPO_ROOT, "proto", "grpc_service.proto");
const NS_PER_MS = 1e6;

/**
 * Drives ModelInfer with ghz (built from its Go module): the same encoded request, again
 * and again, from `concurrency` workers over `connections` HTTP/2 connections.
 */
export async function runLoad(options: LoadOptions): Promise<LoadRun> {
  const args = [
    "--insecure",
    "--proto",
    PROTO,
    "--call",
    "inference.GRPCInferenceService.ModelInfer",
    "--binary-file",
    options.requestFile,
    "--concurrency",
    String(options.concurrency),
    "--connections",
    String(options.connections),
    "--duration",
    `${options.durationSeconds}s`,
    // Calls still in flight when the time is up are left out, not counted as failures.
    "--duration-stop",
    "ignore",
    "--total",
    "0",
    "--max-recv-message-size",
    "2147483647",
    "--max-send-message-size",
    "2147483647",
    "--cpus",
    String(options.cpus === undefined ? 2 : options.cpus.split(",").length),
    "--format",
    "json",
    options.address,
  ];
  const [program, programArgs] =
    options.cpus === undefined ? [options.ghz, args] : ["taskset", ["-c", options.cpus, options.ghz, ...args]];
  const { stdout } = await promisify(execFile)(program, programArgs, { maxBuffer: 64 * 1024 * 1024 });
  return summarize(JSON.parse(stdout) as GhzReport, options.durationSeconds);
}

function summarize(report: GhzReport, durationSeconds: number): LoadRun {
  const codes = report.statusCodeDistribution ?? {};
  const ok = codes["OK"] ?? 0;
  const errors = Object.entries(codes)
    .filter(([code]) => code !== "OK")
    .reduce((sum, [, count]) => sum + count, 0);
  const percentile = (percentage: number): number =>
    (report.latencyDistribution?.find((entry) => entry.percentage === percentage)?.latency ?? NaN) / NS_PER_MS;
  const firstError = Object.keys(report.errorDistribution ?? {})[0];
  return {
    ok,
    errors,
    // ghz's rps counts failures too; throughput is what succeeded.
    rps: ok / durationSeconds,
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    ...(firstError !== undefined ? { firstError } : {}),
  };
}

/** The median of some numbers (the mean of the middle two when they are even). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The median of each number over repeated runs (errors summed). */
export function medianRun(runs: readonly LoadRun[]): LoadRun {
  const firstError = runs.find((run) => run.firstError !== undefined)?.firstError;
  return {
    ok: runs.reduce((sum, run) => sum + run.ok, 0),
    errors: runs.reduce((sum, run) => sum + run.errors, 0),
    rps: median(runs.map((run) => run.rps)),
    p50Ms: median(runs.map((run) => run.p50Ms)),
    p99Ms: median(runs.map((run) => run.p99Ms)),
    ...(firstError !== undefined ? { firstError } : {}),
  };
}

import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SHM_DIRECTORY } from "../../dataplane/src/shared-memory/keys.js";
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
  /**
   * Tensors in system shared memory instead of in the messages (--shared-memory system): the
   * output regions' size, and the model's output names (perf_analyzer names its regions
   * after the tensors).
   */
  readonly sharedMemory?: { readonly outputBytes: number; readonly outputs: readonly string[] };
  /** The output bytes each response carries (0 when the outputs are in shared memory): bounds perf_analyzer's memory. */
  readonly responseBytes: number;
}

const US_PER_MS = 1000;
/** perf_analyzer measures until three windows in a row are "stable"; the run is split into three windows. */
const WINDOWS = 3;
/** -s 1000 makes almost any three windows stable, but not always: up to this many, then. */
const MAX_WINDOWS = 10;
/**
 * perf_analyzer 2.60 keeps every response's outputs until its run ends (its request records
 * carry them, for genai-perf): about 1.5 MiB per 1 MiB response, measured. Against a fast
 * server it grew to 19 GiB before the kernel's OOM killer ended it — the rows of the run of
 * 2026-11-24 that said "Request concurrency: 16" (and 4, at 16 MiB): stdout's last line, and
 * nothing on stderr. Short windows were not enough (2026-11-26: at 1 MiB c16 against Triton
 * it still passed 4 GiB in one run of two, its stabilization trials adding up), so where
 * responses are large the run is bounded by a count of requests instead of by windows
 * (--request-count): as many as RESPONSE_MEMORY_BYTES of kept responses hold, one
 * measurement. A watchdog still stops it past MEMORY_LIMIT_BYTES, with that reason.
 */
const LARGE_RESPONSE_BYTES = 64 * 1024;
/** What perf_analyzer keeps per response, over the response's tensor bytes (measured: about 1.5). */
const KEPT_PER_RESPONSE_BYTE = 1.5;
const RESPONSE_MEMORY_BYTES = 1024 ** 3;
const MEMORY_LIMIT_BYTES = 4 * 1024 ** 3;
const WATCH_EVERY_MS = 100;

/**
 * How long perf_analyzer measures: windows of a third of the run each, until three in a row
 * are stable (up to MAX_WINDOWS); or, for large responses, a fixed count of requests (at least
 * four per concurrent request) whose kept responses fit in RESPONSE_MEMORY_BYTES.
 */
export function measurementArgs(
  options: Pick<PerfAnalyzerLoad, "durationSeconds" | "responseBytes" | "concurrency">,
): string[] {
  if (options.responseBytes >= LARGE_RESPONSE_BYTES) {
    const fits = Math.floor(RESPONSE_MEMORY_BYTES / (KEPT_PER_RESPONSE_BYTE * options.responseBytes));
    return ["--request-count", String(Math.max(4 * options.concurrency, fits))];
  }
  const third = Math.max(100, Math.round((options.durationSeconds * 1000) / WINDOWS));
  return [...["--measurement-interval", String(third)], ...["--max-trials", String(MAX_WINDOWS)]];
}

/** The resident memory of a process, in bytes (0 once it is gone). */
function residentBytes(pid: number): number {
  try {
    const kib = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return Number(kib ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/** Runs perf_analyzer, killing it past MEMORY_LIMIT_BYTES; rejects as execFile does, with the reason when it was stopped. */
function runWatched(program: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    let overLimit = false;
    // taskset and the wrapper exec perf_analyzer: the child's pid is perf_analyzer's.
    const child = execFile(program, args, { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      clearInterval(watch);
      if (error === null) return resolve(stdout);
      const stopped = `perf_analyzer passed ${MEMORY_LIMIT_BYTES / 1024 ** 3} GiB and was stopped (it keeps every response until it ends)`;
      reject(Object.assign(error, { stdout, stderr: overLimit ? stopped : stderr }));
    });
    const watch = setInterval(() => {
      if (child.pid !== undefined && residentBytes(child.pid) > MEMORY_LIMIT_BYTES) {
        overLimit = true;
        child.kill("SIGKILL");
      }
    }, WATCH_EVERY_MS);
  });
}

export async function runPerfAnalyzer(options: PerfAnalyzerLoad): Promise<LoadRun> {
  const dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-perf-analyzer-"));
  const csv = join(dir, "run.csv");
  const input = options.shape.split(":")[0]!;
  const args = [
    ...["-m", options.model, "-u", options.address, "-i", "grpc", "--shape", options.shape],
    ...["--concurrency-range", String(options.concurrency)],
    ...measurementArgs(options),
    ...["-s", "1000", "-f", csv],
    ...(options.sharedMemory === undefined
      ? []
      : ["--shared-memory", "system", "--output-shared-memory-size", String(options.sharedMemory.outputBytes)]),
  ];
  const regionsBefore = new Set(readdirSync(SHM_DIRECTORY));
  const [program, programArgs] =
    options.cpus === undefined ? [options.binary, args] : ["taskset", ["-c", options.cpus, options.binary, ...args]];
  try {
    const stdout = await runWatched(program, programArgs);
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
    return { ok: 0, errors: 1, rps: 0, p50Ms: NaN, p99Ms: NaN, firstError: whyFailed(failed) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (options.sharedMemory !== undefined) removeRegionsLeft(regionsBefore, [input, ...options.sharedMemory.outputs]);
  }
}

/** perf_analyzer says why on stderr; its stdout ends with whatever it was doing ("Request concurrency: 16"). */
function whyFailed(failed: { stdout?: string; stderr?: string; message?: string }): string {
  const lines = (text: string | undefined) => (text ?? "").trim().split("\n").filter(Boolean);
  const stderr = lines(failed.stderr);
  return (
    stderr.find((line) => /error|failed|unable|cannot/i.test(line)) ??
    stderr.at(-1) ??
    lines(failed.stdout).at(-1) ??
    failed.message ??
    "failed"
  );
}

/**
 * The regions perf_analyzer made and left (it unlinks them when it ends well, not when it is
 * killed or fails): what appeared in /dev/shm named after one of the tensors (INPUT0_0_0,
 * OUTPUT0). Other processes' segments, which appear too, are left alone.
 */
function removeRegionsLeft(before: ReadonlySet<string>, tensors: readonly string[]): void {
  const ours = new RegExp(`^(${tensors.map((name) => name.replace(/\W/g, "\\$&")).join("|")})(_\\d+)*$`);
  for (const name of readdirSync(SHM_DIRECTORY)) {
    if (!before.has(name) && ours.test(name)) rmSync(`${SHM_DIRECTORY}/${name}`, { force: true });
  }
}

import { cpus, loadavg } from "node:os";
import { perfAnalyzerBinary } from "../../e2e/support/prerequisites.js";
import { medianRun, type LoadRun } from "./ghz.js";
import { runPerfAnalyzer } from "./perf-analyzer.js";
import { pinning } from "./run.js";
import { startBenchServer, type ServerId } from "./servers.js";

/**
 * The shared-memory scenario of `npm run bench` (issue 38): perf_analyzer at 1 MiB FP32
 * (`--shape INPUT0:1,262144`), concurrency 8, each server driven over the wire and with
 * `--shared-memory system --output-shared-memory-size 1048576` (the client's regions in
 * /dev/shm, registered with the server; requests name them instead of carrying tensors).
 * Servers: Triton's Python backend and this data plane's python engine on the same model.py
 * (bench/peers/triton's identity_fp32), and the data plane's built-in identity engine (its
 * own ceiling, without the python engine's transfer to its process). Each server is started
 * once and takes its turns; numbers are the median of the repetitions, and ratios are to
 * Triton in the same run and the same transport.
 */

export const SHARED_MEMORY_SCENARIO = {
  id: "shm-1MiB-c8",
  title: "System shared memory against the wire: perf_analyzer, FP32 1 MiB, concurrency 8",
} as const;

const CONCURRENCY = 8;
const ELEMENTS = 256 * 1024;
const BYTES = ELEMENTS * 4;
const MODEL = "identity_fp32";
const SERVERS: readonly { readonly id: ServerId; readonly label: string }[] = [
  { id: "triton", label: "Triton (Python backend)" },
  { id: "dataplane-python", label: "dynamo-kserve python engine (same model.py)" },
  { id: "dataplane", label: "dynamo-kserve identity engine" },
];
const TRANSPORTS = ["wire", "shared memory"] as const;
type Transport = (typeof TRANSPORTS)[number];

export interface SharedMemoryResult {
  readonly server: ServerId;
  readonly label: string;
  readonly transport: Transport;
  readonly runs: readonly LoadRun[];
  readonly median: LoadRun;
  /** Why there are no numbers (the server did not start, or perf_analyzer failed). */
  readonly error?: string;
}

export interface SharedMemorySettings {
  readonly durationSeconds: number;
  readonly repetitions: number;
  readonly warmupSeconds: number;
  /** Only these servers (all three when empty). */
  readonly only: readonly ServerId[];
  readonly log: (line: string) => void;
}

export async function runSharedMemoryBench(settings: SharedMemorySettings): Promise<SharedMemoryResult[]> {
  const pins = pinning();
  const results: SharedMemoryResult[] = [];
  for (const { id, label } of SERVERS.filter(({ id }) => settings.only.length === 0 || settings.only.includes(id))) {
    let server: Awaited<ReturnType<typeof startBenchServer>>;
    try {
      server = await startBenchServer(id, {
        cpus: pins.server,
        ceilingSizes: [],
        dataplaneOptions: ["--allow-client-shm"],
      });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      settings.log(`${SHARED_MEMORY_SCENARIO.id} ${id}: cannot run here: ${message}`);
      for (const transport of TRANSPORTS)
        results.push({ server: id, label, transport, runs: [], median: failed(message), error: message });
      continue;
    }
    try {
      for (const transport of TRANSPORTS) {
        const load = (durationSeconds: number) =>
          runPerfAnalyzer({
            binary: perfAnalyzerBinary(),
            address: server.address,
            model: MODEL,
            shape: `INPUT0:1,${ELEMENTS}`,
            concurrency: CONCURRENCY,
            durationSeconds,
            ...(pins.client !== undefined ? { cpus: pins.client } : {}),
            ...(transport === "shared memory" ? { sharedMemory: { outputBytes: BYTES, outputs: ["OUTPUT0"] } } : {}),
          });
        await load(settings.warmupSeconds);
        const runs: LoadRun[] = [];
        for (let i = 0; i < settings.repetitions; i++) runs.push(await load(settings.durationSeconds));
        const median = medianRun(runs);
        const error = runs.find((run) => run.ok === 0)?.firstError;
        settings.log(
          `${SHARED_MEMORY_SCENARIO.id} ${id} (${transport}): ${median.rps.toFixed(0)} req/s, p50 ${median.p50Ms.toFixed(2)} ms, p99 ${median.p99Ms.toFixed(2)} ms` +
            (error !== undefined ? `, failed: ${error}` : ""),
        );
        results.push({ server: id, label, transport, runs, median, ...(error !== undefined ? { error } : {}) });
      }
    } finally {
      await server.stop();
    }
  }
  return results;
}

const failed = (message: string): LoadRun => ({
  ok: 0,
  errors: 1,
  rps: 0,
  p50Ms: NaN,
  p99Ms: NaN,
  firstError: message,
});

/** The scenario's BENCHMARKS.md section: one row per server and transport, ratios to Triton's same transport. */
export function sharedMemoryMarkdown(results: readonly SharedMemoryResult[], settings: SharedMemorySettings): string {
  const triton = (transport: Transport) =>
    results.find((result) => result.server === "triton" && result.transport === transport && result.error === undefined)
      ?.median;
  const wire = (server: ServerId) =>
    results.find((result) => result.server === server && result.transport === "wire")?.median;
  const ratio = (value: number, base: number | undefined) =>
    base === undefined || !Number.isFinite(value) || !(base > 0) ? "—" : `${(value / base).toFixed(2)}×`;
  const rows = results.map(({ server, label, transport, median, runs, error }) => {
    if (error !== undefined)
      return `| ${label} | ${transport} | — | — | — | — | — | — | ${error.replace(/\|/g, "\\|").slice(0, 200)} |`;
    const base = triton(transport);
    return (
      `| ${label} | ${transport} | ${Math.round(median.rps)} (${runs.map((run) => Math.round(run.rps)).join(", ")}) | ` +
      `${median.p50Ms.toFixed(1)} | ${median.p99Ms.toFixed(1)} | ${ratio(median.rps, base?.rps)} | ` +
      `${ratio(median.p50Ms, base?.p50Ms)} / ${ratio(median.p99Ms, base?.p99Ms)} | ` +
      `${transport === "wire" ? "" : ratio(median.rps, wire(server)?.rps)} | |`
    );
  });
  return [
    `${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores (load average ${loadavg()[0]!.toFixed(1)} at the end), Node ${process.version};`,
    `perf_analyzer, FP32 [1, ${ELEMENTS}] (1 MiB) in and out, concurrency ${CONCURRENCY}, ${settings.durationSeconds} s per run,`,
    `median of ${settings.repetitions} (\`npm run bench -- --scenarios ${SHARED_MEMORY_SCENARIO.id}\`). "shared memory": perf_analyzer's`,
    "`--shared-memory system --output-shared-memory-size 1048576` (inputs and outputs in /dev/shm regions it",
    "registers; the data plane started with `--allow-client-shm`). The servers on core 0, perf_analyzer on the others.",
    "Ratios: req/s and latency over Triton's with the same transport in this run; shm / wire: the same server's",
    "req/s with shared memory over its req/s over the wire.",
    "",
    "| server | transport | req/s (runs) | p50 ms | p99 ms | req/s vs Triton | p50 / p99 vs Triton | shm / wire | error |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

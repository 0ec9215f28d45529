import { cpus, loadavg } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ghzBinary, perfAnalyzerBinary } from "../../e2e/support/prerequisites.js";
import { median, medianRun, runLoad, type LoadRun } from "./ghz.js";
import { writeRequest } from "./requests.js";
import { runPerfAnalyzer } from "./perf-analyzer.js";
import { modelCounts, processGroupCpuSeconds } from "./server-cost.js";
import { pinning } from "./run.js";
import { startBenchServer, type BenchServer, type ServerId } from "./servers.js";

/**
 * The shared-memory scenario of `npm run bench` (issue 38): perf_analyzer at 1 MiB FP32
 * (`--shape INPUT0:1,262144`), concurrency 8, each server driven over the wire and with
 * `--shared-memory system --output-shared-memory-size 1048576` (the client's regions in
 * /dev/shm, registered with the server; requests name them instead of carrying tensors).
 * Servers: Triton's Python backend and this data plane's python engine on the same model.py
 * (bench/peers/triton's identity_fp32), and the data plane's built-in identity engine (its
 * own ceiling, without the python engine's transfer to its process). The servers are up
 * together and take turns, round by round; numbers are the median of the rounds, and ratios
 * are to Triton in the same run and the same transport.
 */

export const SHARED_MEMORY_SCENARIO = {
  id: "shm-1MiB-c8",
  title: "System shared memory against the wire: perf_analyzer (and ghz), FP32 1 MiB, concurrency 8",
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
/**
 * "wire (ghz)" is the same load from ghz (the same encoded 1 MiB request for every server):
 * perf_analyzer 2.60 cannot hold a 1 MiB run against Triton over the wire (it keeps every
 * response, falls behind, and passes 4 GiB; harness/perf-analyzer.ts), so the wire's ratios
 * to Triton are also given from ghz.
 */
const TRANSPORTS = ["wire", "wire (ghz)", "shared memory"] as const;
type Transport = (typeof TRANSPORTS)[number];

export interface SharedMemoryResult {
  readonly server: ServerId;
  readonly label: string;
  readonly transport: Transport;
  readonly runs: readonly LoadRun[];
  readonly median: LoadRun;
  /** The server's CPU milliseconds per inference in each run (its process group's CPU over its inference count). */
  readonly cpuMsPerRequest: readonly number[];
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
  const chosen = SERVERS.filter(({ id }) => settings.only.length === 0 || settings.only.includes(id));
  const started = new Map<ServerId, BenchServer>();
  const refused = new Map<ServerId, string>();
  const runs = new Map<string, LoadRun[]>();
  const cpu = new Map<string, number[]>();
  let cleanUp = (): void => undefined;
  try {
    // All up at once (idle ones cost nothing), then the runs take turns, round by round: a
    // change in the machine's load (other work on a shared runner) falls on every server alike.
    for (const { id } of chosen) {
      try {
        started.set(
          id,
          await startBenchServer(id, { cpus: pins.server, ceilingSizes: [], dataplaneOptions: ["--allow-client-shm"] }),
        );
      } catch (error) {
        refused.set(id, error instanceof Error ? error.message : String(error));
        settings.log(`${SHARED_MEMORY_SCENARIO.id} ${id}: cannot run here: ${refused.get(id)}`);
      }
    }
    const requestDir = mkdtempSync(join(tmpdir(), "dynamo-kserve-shm-bench-"));
    const requestFile = writeRequest(requestDir, SHARED_MEMORY_SCENARIO.id, { kind: "fp32", elements: ELEMENTS });
    cleanUp = () => rmSync(requestDir, { recursive: true, force: true });
    const load = (server: BenchServer, transport: Transport, durationSeconds: number) =>
      transport === "wire (ghz)"
        ? runLoad({
            ghz: ghzBinary(),
            address: server.address,
            requestFile,
            concurrency: CONCURRENCY,
            connections: 4,
            durationSeconds,
            ...(pins.client !== undefined ? { cpus: pins.client } : {}),
          })
        : runPerfAnalyzer({
            binary: perfAnalyzerBinary(),
            address: server.address,
            model: MODEL,
            shape: `INPUT0:1,${ELEMENTS}`,
            concurrency: CONCURRENCY,
            durationSeconds,
            ...(pins.client !== undefined ? { cpus: pins.client } : {}),
            ...(transport === "shared memory"
              ? { sharedMemory: { outputBytes: BYTES, outputs: ["OUTPUT0"] }, responseBytes: 0 }
              : { responseBytes: BYTES }),
          });
    for (let round = -1; round < settings.repetitions; round++) {
      for (const [id, server] of started) {
        for (const transport of TRANSPORTS) {
          // Round -1 warms each up, unmeasured.
          if (round < 0) {
            await load(server, transport, settings.warmupSeconds);
            continue;
          }
          const cpuBefore = processGroupCpuSeconds(server.processGroup);
          const countsBefore = await modelCounts(server.address, MODEL);
          const run = await load(server, transport, settings.durationSeconds);
          const served = (await modelCounts(server.address, MODEL)).inferences - countsBefore.inferences;
          const cpuMs = ((processGroupCpuSeconds(server.processGroup) - cpuBefore) * 1000) / Math.max(1, served);
          settings.log(
            `${SHARED_MEMORY_SCENARIO.id} round ${round + 1} ${id} (${transport}): ${run.rps.toFixed(0)} req/s, p50 ${run.p50Ms.toFixed(2)} ms, p99 ${run.p99Ms.toFixed(2)} ms, ${cpuMs.toFixed(2)} ms CPU per request` +
              (run.firstError !== undefined ? `, failed: ${run.firstError}` : ""),
          );
          const key = `${id}|${transport}`;
          runs.set(key, [...(runs.get(key) ?? []), run]);
          cpu.set(key, [...(cpu.get(key) ?? []), Number(cpuMs.toFixed(3))]);
        }
      }
    }
  } finally {
    for (const server of started.values()) await server.stop();
    cleanUp();
  }
  return chosen.flatMap(({ id, label }) =>
    TRANSPORTS.map((transport): SharedMemoryResult => {
      const why = refused.get(id);
      if (why !== undefined) {
        return { server: id, label, transport, runs: [], median: failed(why), cpuMsPerRequest: [], error: why };
      }
      const measured = runs.get(`${id}|${transport}`) ?? [];
      const error = measured.find((run) => run.ok === 0)?.firstError;
      return {
        server: id,
        label,
        transport,
        runs: measured,
        median: medianRun(measured),
        cpuMsPerRequest: cpu.get(`${id}|${transport}`) ?? [],
        ...(error !== undefined ? { error } : {}),
      };
    }),
  );
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
    results.find((result) => result.server === server && result.transport === "wire (ghz)")?.median;
  const ratio = (value: number, base: number | undefined) =>
    base === undefined || !Number.isFinite(value) || !(base > 0) ? "—" : `${(value / base).toFixed(2)}×`;
  const cpuOf = (result: SharedMemoryResult | undefined) => median(result?.cpuMsPerRequest ?? []);
  const rows = results.map((result) => {
    const { server, label, transport, median: middle, runs, error } = result;
    // A failed client run still loaded the server: its CPU per request is kept, and compared.
    const tritonCpu = cpuOf(results.find((other) => other.server === "triton" && other.transport === transport));
    if (error !== undefined) {
      const cpu = cpuOf(result);
      const shownCpu = Number.isFinite(cpu) ? `${cpu.toFixed(2)} | ${ratio(cpu, tritonCpu)}` : "— | —";
      return `| ${label} | ${transport} | — | — | — | — | — | — | ${shownCpu} | ${error.replace(/\|/g, "\\|").slice(0, 200)} |`;
    }
    const base = triton(transport);
    return (
      `| ${label} | ${transport} | ${Math.round(middle.rps)} (${runs.map((run) => Math.round(run.rps)).join(", ")}) | ` +
      `${middle.p50Ms.toFixed(1)} | ${middle.p99Ms.toFixed(1)} | ${ratio(middle.rps, base?.rps)} | ` +
      `${ratio(middle.p50Ms, base?.p50Ms)} / ${ratio(middle.p99Ms, base?.p99Ms)} | ` +
      `${transport === "shared memory" ? ratio(middle.rps, wire(server)?.rps) : ""} | ` +
      `${cpuOf(result).toFixed(2)} | ${ratio(cpuOf(result), tritonCpu)} | |`
    );
  });
  return [
    `${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores (load average ${loadavg()[0]!.toFixed(1)} at the end), Node ${process.version};`,
    `perf_analyzer, FP32 [1, ${ELEMENTS}] (1 MiB) in and out, concurrency ${CONCURRENCY}, ${settings.durationSeconds} s per run,`,
    `median of ${settings.repetitions} rounds in which the servers take turns (\`npm run bench -- --scenarios ${SHARED_MEMORY_SCENARIO.id}\`). "shared memory": perf_analyzer's`,
    "`--shared-memory system --output-shared-memory-size 1048576` (inputs and outputs in /dev/shm regions it",
    "registers; the data plane started with `--allow-client-shm`). The servers on core 0, perf_analyzer on the others.",
    '"wire (ghz)": the same load from ghz, the same encoded request for every server (perf_analyzer 2.60 keeps every',
    "response until it ends and cannot hold a 1 MiB run against Triton over the wire: bench/README.md).",
    "Ratios: req/s and latency over Triton's with the same transport in this run; shm / wire: the same server's",
    "req/s with shared memory over its req/s over the wire (ghz). CPU: the server's process group's CPU time (its Python",
    "processes included) over the inferences it counted (ModelStatistics) in each run, median: it holds where req/s",
    "moves with what else the machine runs.",
    "",
    "| server | transport | req/s (runs) | p50 ms | p99 ms | req/s vs Triton | p50 / p99 vs Triton | shm / wire | CPU ms / request | CPU vs Triton | error |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

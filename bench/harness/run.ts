import { cpus, release } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ghzBinary, perfAnalyzerBinary, vegetaBinary } from "../../e2e/support/prerequisites.js";
import { medianRun, runLoad, type LoadRun } from "./ghz.js";
import { runPerfAnalyzer } from "./perf-analyzer.js";
import { modelFor, payloadBytes, writeHttpRequest, writeRequest } from "./requests.js";
import { runStreamLoad } from "./streams.js";
import { CEILING_SIZES, type Scenario } from "./scenarios.js";
import { SERVER_LABELS, startBenchServer, type BenchServer, type ServerId } from "./servers.js";
import { runHttpLoad } from "./vegeta.js";

export interface RunSettings {
  readonly durationSeconds: number;
  readonly repetitions: number;
  readonly warmupSeconds: number;
  /** Only these servers (all of each scenario's when empty). */
  readonly only: readonly ServerId[];
  /** Also drive each gRPC tensor scenario with perf_analyzer (one run), beside ghz. */
  readonly perfAnalyzer?: boolean;
  readonly log: (line: string) => void;
}

export interface ServerResult extends Partial<LoadRun> {
  readonly server: ServerId;
  readonly label: string;
  /** The load generator when it is not the scenario's usual one (ghz, vegeta, ours). */
  readonly client?: "perf_analyzer";
  /** Tensor bytes per second (rps × payload), for bytes/s scenarios. */
  readonly bytesPerSecond?: number;
  /** Why this server has no numbers: it could not start here, or every request failed. */
  readonly error?: string;
}

export interface ScenarioResult {
  readonly id: string;
  readonly title: string;
  readonly unit: Scenario["unit"];
  readonly payloadBytes: number;
  readonly concurrency: number;
  readonly connections: number;
  readonly results: ServerResult[];
}

export interface BenchReport {
  readonly date: string;
  readonly machine: { cores: number; cpu: string; node: string; kernel: string };
  readonly settings: Omit<RunSettings, "log" | "only" | "perfAnalyzer"> & { pinning: string };
  readonly scenarios: ScenarioResult[];
}

/**
 * The cores: on two or more, the server gets core 0 and ghz the others, so they do not
 * fight; "all cores" servers (--grpc-workers 0) are left unpinned and share with ghz.
 */
export function pinning(): { server: string | undefined; client: string | undefined; describe: string } {
  const count = cpus().length;
  if (count < 2) return { server: undefined, client: undefined, describe: "none (1 core)" };
  const client = Array.from({ length: count - 1 }, (_, i) => String(i + 1)).join(",");
  return { server: "0", client, describe: `server on core 0, load on cores ${client}` };
}

/** Runs the scenarios: each server started once, every scenario it is in driven, then stopped. */
export async function runBenchmarks(scenarios: readonly Scenario[], settings: RunSettings): Promise<BenchReport> {
  const pins = pinning();
  const requestDir = mkdtempSync(join(tmpdir(), "dynamo-kserve-bench-"));
  const results = new Map<string, ServerResult[]>(scenarios.map((scenario) => [scenario.id, []]));
  const order = [...new Set(scenarios.flatMap((scenario) => scenario.servers))].filter(
    (server) => settings.only.length === 0 || settings.only.includes(server),
  );
  try {
    for (const id of order) {
      const mine = scenarios.filter((scenario) => scenario.servers.includes(id));
      const record = (scenario: Scenario, result: Omit<ServerResult, "server" | "label">) =>
        results.get(scenario.id)!.push({ server: id, label: SERVER_LABELS[id], ...result });
      let started: BenchServer[];
      try {
        started = await startWithUpstream(id, pins.server);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        settings.log(`${id}: cannot run here: ${message}`);
        for (const scenario of mine) record(scenario, { error: message });
        continue;
      }
      const server = started[started.length - 1]!;
      try {
        for (const scenario of mine) {
          const requestFile = writeRequest(requestDir, scenario.id, scenario.payload);
          const { streams, http } = scenario;
          const clientCpus = pins.client !== undefined ? { cpus: pins.client } : {};
          if (http !== undefined && server.httpAddress === undefined) throw new Error(`${id} has no HTTP endpoint`);
          const httpAddress = server.httpAddress ?? "";
          const load = (durationSeconds: number) =>
            streams !== undefined
              ? runStreamLoad(
                  {
                    address: http === undefined ? server.address : httpAddress,
                    model: streams.model,
                    streams: streams.count,
                    tokens: streams.tokens,
                    connections: scenario.connections,
                    warmupSeconds: 1,
                    durationSeconds,
                    ...clientCpus,
                  },
                  http === undefined ? "grpc" : "sse",
                )
              : http !== undefined && http.form !== "openai-sse"
                ? runHttpLoad({
                    vegeta: vegetaBinary(),
                    address: httpAddress,
                    request: writeHttpRequest(requestDir, scenario.id, scenario.payload, http.form),
                    concurrency: scenario.concurrency,
                    durationSeconds,
                    ...clientCpus,
                  })
                : runLoad({
                    ghz: ghzBinary(),
                    address: server.address,
                    requestFile,
                    concurrency: scenario.concurrency,
                    connections: scenario.connections,
                    durationSeconds,
                    ...(pins.client !== undefined ? { cpus: pins.client } : {}),
                  });
          await load(settings.warmupSeconds);
          const runs: LoadRun[] = [];
          for (let i = 0; i < settings.repetitions; i++) runs.push(await load(settings.durationSeconds));
          const run = medianRun(runs);
          const bytesPerSecond = run.rps * payloadBytes(scenario.payload);
          settings.log(
            `${scenario.id} ${id}: ${run.rps.toFixed(0)} ${scenario.streams ? "responses" : "req"}/s, p50 ${run.p50Ms.toFixed(2)} ms, p99 ${run.p99Ms.toFixed(2)} ms` +
              (run.errors > 0 ? `, ${run.errors} errors (${run.firstError})` : ""),
          );
          record(scenario, {
            ...run,
            ...(scenario.unit === "bytes/s" ? { bytesPerSecond } : {}),
            ...(run.ok === 0 ? { error: run.firstError ?? "no request succeeded" } : {}),
          });
          if (settings.perfAnalyzer === true && asksPerfAnalyzer(scenario, id)) {
            const second = await runPerfAnalyzer({
              binary: perfAnalyzerBinary(),
              address: server.address,
              model: modelFor(scenario.payload),
              shape: `INPUT0:1,${scenario.payload.elements}`,
              concurrency: scenario.concurrency,
              durationSeconds: settings.durationSeconds,
              // The identity models answer with what they were sent.
              responseBytes: payloadBytes(scenario.payload),
              ...clientCpus,
            });
            settings.log(
              `${scenario.id} ${id} (perf_analyzer): ${second.rps.toFixed(0)} req/s, p50 ${second.p50Ms.toFixed(2)} ms` +
                (second.errors > 0 ? `, failed: ${second.firstError}` : ""),
            );
            results.get(scenario.id)!.push({
              server: id,
              label: `${SERVER_LABELS[id]} · perf_analyzer`,
              client: "perf_analyzer",
              ...second,
              ...(scenario.unit === "bytes/s" ? { bytesPerSecond: second.rps * payloadBytes(scenario.payload) } : {}),
              ...(second.ok === 0 || second.errors > 0 ? { error: second.firstError ?? "no request succeeded" } : {}),
            });
          }
        }
      } finally {
        for (const running of started.reverse()) await running.stop();
      }
    }
  } finally {
    rmSync(requestDir, { recursive: true, force: true });
  }
  return {
    date: new Date().toISOString(),
    machine: { cores: cpus().length, cpu: cpus()[0]?.model ?? "unknown", node: process.version, kernel: release() },
    settings: {
      durationSeconds: settings.durationSeconds,
      repetitions: settings.repetitions,
      warmupSeconds: settings.warmupSeconds,
      pinning: pins.describe,
    },
    scenarios: scenarios.map((scenario) => ({
      id: scenario.id,
      title: scenario.title,
      unit: scenario.unit,
      payloadBytes: payloadBytes(scenario.payload),
      concurrency: scenario.concurrency,
      connections: scenario.connections,
      results: results.get(scenario.id)!,
    })),
  };
}

/**
 * perf_analyzer asks a model's metadata and config before it sends a request, which the bare
 * ceilings (ModelInfer only) do not answer; and it sends FP32 tensors by shape alone.
 */
function asksPerfAnalyzer(scenario: Scenario, server: ServerId): boolean {
  return (
    scenario.streams === undefined &&
    scenario.http === undefined &&
    scenario.payload.kind === "fp32" &&
    !server.endsWith("-ceiling")
  );
}

/** A server, preceded by the Triton it forwards to when it is the forwarding data plane. */
async function startWithUpstream(id: ServerId, cpus: string | undefined): Promise<BenchServer[]> {
  const common = { cpus: id === "dataplane-all-cores" ? undefined : cpus, ceilingSizes: CEILING_SIZES };
  if (id !== "dataplane-forward" && id !== "dataplane-pass-through") return [await startBenchServer(id, common)];
  // Both on the server's core: the forwarding hop's cost shows as Triton's loss.
  const triton = await startBenchServer("triton", common);
  try {
    return [triton, await startBenchServer(id, { ...common, upstream: triton.address })];
  } catch (error) {
    await triton.stop();
    throw error;
  }
}

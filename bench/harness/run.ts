import { cpus, release } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ghzBinary, perfAnalyzerBinary, vegetaBinary } from "../../e2e/support/prerequisites.js";
import { medianRun, runLoad, type LoadRun } from "./ghz.js";
import { runPerfAnalyzer } from "./perf-analyzer.js";
import { modelFor, payloadBytes, writeHttpRequest, writeRequest } from "./requests.js";
import { runStreamLoad } from "./streams.js";
import { CEILING_SIZES, type Layout, type Scenario, type UpstreamId } from "./scenarios.js";
import {
  DIRECT_SERVERS,
  forwards,
  SERVER_LABELS,
  startBenchServer,
  type BenchServer,
  type ServerId,
} from "./servers.js";
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
  /** What its forwarders forwarded to, and where its processes ran (Scenario's). */
  readonly upstream?: UpstreamId;
  readonly layout?: Layout;
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

/** The cores of each role in a run: the server measured, the upstream a forwarder sends to, the load generator. */
export interface Pins {
  readonly server: string | undefined;
  readonly upstream: string | undefined;
  readonly client: string | undefined;
  readonly describe: string;
}

/**
 * The cores per role. On two or more: in the "shared" layout the server gets core 0 (with
 * the upstream it forwards to, whose loss then shows forwarding's cost) and the load the
 * others, so they do not fight; in "own-core" a forwarder has core 0 to itself and its
 * upstream shares the others with the load — a server called directly runs where an upstream
 * would, so forwarding is measured against the same upstream on the same cores. "All cores"
 * servers (--grpc-workers 0) are left unpinned and share with the load.
 */
export function pinning(layout: Layout = "shared"): Pins {
  const count = cpus().length;
  if (count < 2) return { server: undefined, upstream: undefined, client: undefined, describe: "none (1 core)" };
  const rest = Array.from({ length: count - 1 }, (_, i) => String(i + 1)).join(",");
  return layout === "shared"
    ? {
        server: "0",
        upstream: "0",
        client: rest,
        describe: `server (and the upstream it forwards to) on core 0, load on cores ${rest}`,
      }
    : {
        server: "0",
        upstream: rest,
        client: rest,
        describe: `the forwarder alone on core 0, its upstream (or the server called directly) and the load on cores ${rest}`,
      };
}

/** One server started once for the scenarios it serves alike: same upstream, same cores. */
export interface Setup {
  readonly server: ServerId;
  readonly upstream: UpstreamId | undefined;
  readonly layout: Layout;
  readonly scenarios: Scenario[];
}

/** The servers to start, in order of first appearance, each with the scenarios it runs in. */
export function setupsOf(scenarios: readonly Scenario[], only: readonly ServerId[]): Setup[] {
  const setups = new Map<string, Setup>();
  for (const scenario of scenarios) {
    for (const server of scenario.servers.filter((id) => only.length === 0 || only.includes(id))) {
      const upstream = forwards(server) ? (scenario.upstream ?? "triton") : undefined;
      const layout = scenario.layout ?? "shared";
      const key = `${server} ${upstream ?? "-"} ${layout}`;
      const setup = setups.get(key) ?? { server, upstream, layout, scenarios: [] };
      setup.scenarios.push(scenario);
      setups.set(key, setup);
    }
  }
  return [...setups.values()];
}

/** Runs the scenarios: each server started once, every scenario it is in driven, then stopped. */
export async function runBenchmarks(scenarios: readonly Scenario[], settings: RunSettings): Promise<BenchReport> {
  const requestDir = mkdtempSync(join(tmpdir(), "dynamo-kserve-bench-"));
  const results = new Map<string, ServerResult[]>(scenarios.map((scenario) => [scenario.id, []]));
  try {
    for (const setup of setupsOf(scenarios, settings.only)) {
      const { server: id, scenarios: mine } = setup;
      const pins = pinning(setup.layout);
      const record = (scenario: Scenario, result: Omit<ServerResult, "server" | "label">) =>
        results.get(scenario.id)!.push({ server: id, label: SERVER_LABELS[id], ...result });
      let started: BenchServer[];
      try {
        started = await startWithUpstream(setup, pins);
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
          // A server (or the upstream behind it) that died mid-run: its exit, not the load's symptom.
          const lost = started.map((running) => running.exited()).find((why) => why !== undefined);
          const bytesPerSecond = run.rps * payloadBytes(scenario.payload);
          settings.log(
            `${scenario.id} ${id}: ${run.rps.toFixed(0)} ${scenario.streams ? "responses" : "req"}/s, p50 ${run.p50Ms.toFixed(2)} ms, p99 ${run.p99Ms.toFixed(2)} ms` +
              (run.errors > 0 ? `, ${run.errors} errors (${run.firstError})` : ""),
          );
          record(scenario, {
            ...run,
            ...(scenario.unit === "bytes/s" ? { bytesPerSecond } : {}),
            ...(lost !== undefined
              ? { error: lost }
              : run.ok === 0
                ? { error: run.firstError ?? "no request succeeded" }
                : {}),
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
      pinning: `${pinning("shared").describe}; -own-core scenarios: ${pinning("own-core").describe}`,
    },
    scenarios: scenarios.map((scenario) => ({
      id: scenario.id,
      title: scenario.title,
      unit: scenario.unit,
      ...(scenario.upstream !== undefined ? { upstream: scenario.upstream } : {}),
      ...(scenario.layout !== undefined ? { layout: scenario.layout } : {}),
      payloadBytes: payloadBytes(scenario.payload),
      concurrency: scenario.concurrency,
      connections: scenario.connections,
      results: results.get(scenario.id)!,
    })),
  };
}

/**
 * perf_analyzer asks a model's metadata and config before it sends a request, which the bare
 * ceilings (ModelInfer only) do not answer, nor a forwarder in front of one; and it sends FP32
 * tensors by shape alone. The proxies are ceilings too, and the -own-core rows are checked
 * by their main rows: perf_analyzer measures the real servers where they run as usual.
 */
function asksPerfAnalyzer(scenario: Scenario, server: ServerId): boolean {
  return (
    scenario.streams === undefined &&
    scenario.http === undefined &&
    scenario.payload.kind === "fp32" &&
    (scenario.upstream ?? "triton") === "triton" &&
    (scenario.layout ?? "shared") === "shared" &&
    !server.endsWith("-ceiling") &&
    !server.endsWith("-proxy") &&
    server !== "upstream-direct"
  );
}

/** A server, preceded by the upstream it forwards to when it is a forwarder; each on its role's cores. */
async function startWithUpstream(setup: Setup, pins: Pins): Promise<BenchServer[]> {
  const { server: id, upstream } = setup;
  const common = { ceilingSizes: CEILING_SIZES };
  if (upstream === undefined) {
    // Called directly: where an upstream runs (own-core), else the server's core.
    const cpus = id === "dataplane-all-cores" ? undefined : DIRECT_SERVERS.includes(id) ? pins.upstream : pins.server;
    return [await startBenchServer(id, { ...common, cpus })];
  }
  const first = await startBenchServer(upstream, { ...common, cpus: pins.upstream });
  try {
    return [first, await startBenchServer(id, { ...common, cpus: pins.server, upstream: first.address })];
  } catch (error) {
    await first.stop();
    throw error;
  }
}

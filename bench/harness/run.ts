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

/** One server, started once for the scenarios it serves alike: same upstream, same cores. */
export interface Setup {
  readonly server: ServerId;
  /** What it forwards to, when it is a forwarder. */
  readonly upstream: UpstreamId | undefined;
  readonly layout: Layout;
  readonly scenarios: Scenario[];
}

/**
 * Servers that are up together and take turns. A forwarding scenario's servers form one
 * group per upstream and layout — the upstream called directly and every forwarder in front
 * of that same upstream process — and each repetition measures them one after the other, so
 * what drifts on a shared machine moves them alike and their ratios hold. Any other server
 * is a group of its own, its scenarios back to back.
 */
export interface Group {
  /** The upstream the group's forwarders share (the direct server itself when the group has one). */
  readonly upstream: UpstreamId | undefined;
  readonly layout: Layout;
  readonly setups: Setup[];
  readonly scenarios: Scenario[];
}

/** The groups to start, in order of first appearance, each server with the scenarios it runs in. */
export function groupsOf(scenarios: readonly Scenario[], only: readonly ServerId[]): Group[] {
  const groups = new Map<string, Group>();
  const setups = new Map<string, Setup>();
  for (const scenario of scenarios) {
    const { upstream } = scenario;
    const layout = scenario.layout ?? "shared";
    for (const server of scenario.servers.filter((id) => only.length === 0 || only.includes(id))) {
      if (forwards(server) && upstream === undefined)
        throw new Error(`scenario ${scenario.id}: ${server} forwards, and the scenario names no upstream`);
      const groupKey = upstream !== undefined ? `forwarding to ${upstream} ${layout}` : `${server} alone ${layout}`;
      const group = groups.get(groupKey) ?? { upstream, layout, setups: [], scenarios: [] };
      groups.set(groupKey, group);
      if (!group.scenarios.includes(scenario)) group.scenarios.push(scenario);
      const setupKey = `${groupKey} ${server}`;
      let setup = setups.get(setupKey);
      if (setup === undefined) {
        setup = { server, upstream: forwards(server) ? upstream : undefined, layout, scenarios: [] };
        setups.set(setupKey, setup);
        group.setups.push(setup);
      }
      setup.scenarios.push(scenario);
    }
  }
  return [...groups.values()];
}

/** Runs the scenarios, group by group: its servers started once, every scenario they are in driven, then stopped. */
export async function runBenchmarks(scenarios: readonly Scenario[], settings: RunSettings): Promise<BenchReport> {
  const requestDir = mkdtempSync(join(tmpdir(), "dynamo-kserve-bench-"));
  const results = new Map<string, ServerResult[]>(scenarios.map((scenario) => [scenario.id, []]));
  const record = (scenario: Scenario, id: ServerId, result: Omit<ServerResult, "server" | "label">) =>
    results.get(scenario.id)!.push({ server: id, label: SERVER_LABELS[id], ...result });
  try {
    for (const group of groupsOf(scenarios, settings.only)) {
      const pins = pinning(group.layout);
      const { started, all } = await startGroup(group, pins, (setup, message) => {
        settings.log(`${setup.server}: cannot run here: ${message}`);
        for (const scenario of setup.scenarios) record(scenario, setup.server, { error: message });
      });
      try {
        for (const scenario of group.scenarios) {
          const here = group.setups.filter((setup) => setup.scenarios.includes(scenario) && started.has(setup));
          const loads = here.map((setup) => loadOf(scenario, started.get(setup)!, pins, requestDir));
          for (const load of loads) await load(settings.warmupSeconds);
          const runs = here.map((): LoadRun[] => []);
          for (let i = 0; i < settings.repetitions; i++)
            for (const [index, load] of loads.entries()) runs[index]!.push(await load(settings.durationSeconds));
          for (const [index, setup] of here.entries()) {
            const server = started.get(setup)!;
            // A server (or the upstream behind it) that died mid-run: its exit, not the load's symptom.
            const lost = [server, ...all].map((running) => running.exited()).find((why) => why !== undefined);
            recordRun(scenario, setup.server, medianRun(runs[index]!), lost, settings, record);
            if (settings.perfAnalyzer === true && asksPerfAnalyzer(scenario, setup.server))
              await perfAnalyzerRun(scenario, setup.server, server, pins, settings, results);
          }
        }
      } finally {
        for (const running of [...all].reverse()) await running.stop();
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

/**
 * A group's servers, each on its role's cores: a forwarding group's upstream first (the
 * server called directly, when the group has one, else the upstream by its own id), then
 * every other server, the forwarders pointed at that upstream. One that cannot start is
 * handed to `failed` and left out; if the upstream cannot, neither can its forwarders.
 */
async function startGroup(
  group: Group,
  pins: Pins,
  failed: (setup: Setup, message: string) => void,
): Promise<{ started: Map<Setup, BenchServer>; all: BenchServer[] }> {
  const started = new Map<Setup, BenchServer>();
  const all: BenchServer[] = [];
  const common = { ceilingSizes: CEILING_SIZES };
  const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));
  let upstream: BenchServer | undefined;
  if (group.upstream !== undefined) {
    const direct = group.setups.find((setup) => DIRECT_SERVERS.includes(setup.server));
    try {
      upstream = await startBenchServer(direct?.server ?? group.upstream, { ...common, cpus: pins.upstream });
      all.push(upstream);
      if (direct !== undefined) started.set(direct, upstream);
    } catch (error) {
      for (const setup of group.setups) failed(setup, `upstream ${group.upstream}: ${reason(error)}`);
      return { started, all };
    }
  }
  for (const setup of group.setups.filter((candidate) => !started.has(candidate))) {
    const cpus = setup.server === "dataplane-all-cores" ? undefined : pins.server;
    try {
      const server = await startBenchServer(setup.server, {
        ...common,
        cpus,
        ...(setup.upstream !== undefined ? { upstream: upstream!.address } : {}),
      });
      started.set(setup, server);
      all.push(server);
    } catch (error) {
      failed(setup, reason(error));
    }
  }
  return { started, all };
}

/** One load run of `durationSeconds` against a server, by the scenario's load client, on the load's cores. */
function loadOf(
  scenario: Scenario,
  server: BenchServer,
  pins: Pins,
  requestDir: string,
): (durationSeconds: number) => Promise<LoadRun> {
  const requestFile = writeRequest(requestDir, scenario.id, scenario.payload);
  const { streams, http } = scenario;
  const clientCpus = pins.client !== undefined ? { cpus: pins.client } : {};
  if (http !== undefined && server.httpAddress === undefined) throw new Error(`${server.id} has no HTTP endpoint`);
  const httpAddress = server.httpAddress ?? "";
  return (durationSeconds) =>
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
            ...clientCpus,
          });
}

/** A server's median run in a scenario, logged and recorded (an error when nothing succeeded or it died). */
function recordRun(
  scenario: Scenario,
  id: ServerId,
  run: LoadRun,
  lost: string | undefined,
  settings: RunSettings,
  record: (scenario: Scenario, id: ServerId, result: Omit<ServerResult, "server" | "label">) => void,
): void {
  settings.log(
    `${scenario.id} ${id}: ${run.rps.toFixed(0)} ${scenario.streams ? "responses" : "req"}/s, p50 ${run.p50Ms.toFixed(2)} ms, p99 ${run.p99Ms.toFixed(2)} ms` +
      (run.errors > 0 ? `, ${run.errors} errors (${run.firstError})` : ""),
  );
  record(scenario, id, {
    ...run,
    ...(scenario.unit === "bytes/s" ? { bytesPerSecond: run.rps * payloadBytes(scenario.payload) } : {}),
    ...(lost !== undefined ? { error: lost } : run.ok === 0 ? { error: run.firstError ?? "no request succeeded" } : {}),
  });
}

/** The second load client's one run against a server, recorded beside ghz's. */
async function perfAnalyzerRun(
  scenario: Scenario,
  id: ServerId,
  server: BenchServer,
  pins: Pins,
  settings: RunSettings,
  results: Map<string, ServerResult[]>,
): Promise<void> {
  const second = await runPerfAnalyzer({
    binary: perfAnalyzerBinary(),
    address: server.address,
    model: modelFor(scenario.payload),
    shape: `INPUT0:1,${scenario.payload.elements}`,
    concurrency: scenario.concurrency,
    durationSeconds: settings.durationSeconds,
    // The identity models answer with what they were sent.
    responseBytes: payloadBytes(scenario.payload),
    ...(pins.client !== undefined ? { cpus: pins.client } : {}),
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

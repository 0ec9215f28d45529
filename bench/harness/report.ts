import type { BenchReport, ScenarioResult, ServerResult } from "./run.js";
import { DIRECT_SERVERS, type ServerId } from "./servers.js";

/** One target (issues 9, 17, 20, 21, 39), as a ratio measured in one run. */
export interface TargetResult {
  readonly name: string;
  /** e.g. "≥ 1.0×" or "≤ 0.150 ms"; "reported" for a ratio shown beside a target, with no goal of its own. */
  readonly wanted: string;
  /** The measured ratio (or milliseconds); undefined when a side has no numbers. */
  readonly measured: number | undefined;
  readonly met: boolean | undefined;
  readonly detail: string;
}

/** The proxy every forwarding scenario is measured against: the least a forwarder on Node does per call. */
const PROXY: ServerId = "h2-proxy";

/** A server's result in a scenario, measured by the scenario's own load client. */
const resultOf = (report: BenchReport, scenario: string, server: ServerId): ServerResult | undefined =>
  report.scenarios
    .find((candidate) => candidate.id === scenario)
    ?.results.find((result) => result.server === server && result.client === undefined);

const usable = (result: ServerResult | undefined): result is ServerResult & { rps: number } =>
  result !== undefined && result.error === undefined && result.rps !== undefined && result.rps > 0;

/** `ours` against `theirs` in one scenario, or (`theirsIn`) the same kind of load in another. */
function ratioTarget(
  report: BenchReport,
  name: string,
  scenario: string,
  ours: ServerId,
  theirs: ServerId,
  wanted: number | "reported",
  theirsIn = scenario,
): TargetResult {
  const a = resultOf(report, scenario, ours);
  const b = resultOf(report, theirsIn, theirs);
  const wantedText = wanted === "reported" ? wanted : `≥ ${wanted}×`;
  if (!usable(a) || !usable(b)) {
    const missing = !usable(a) ? a : b;
    return {
      name,
      wanted: wantedText,
      measured: undefined,
      met: undefined,
      detail: `not measured: ${missing?.label ?? (!usable(a) ? ours : theirs)}: ${missing?.error ?? "not run"}`,
    };
  }
  const ratio = a.rps / b.rps;
  return {
    name,
    wanted: wantedText,
    measured: ratio,
    met: wanted === "reported" ? undefined : ratio >= wanted,
    detail: `${a.rps.toFixed(0)} vs ${b.rps.toFixed(0)} ${scenarioUnit(report, scenario)}`,
  };
}

const scenarioUnit = (report: BenchReport, scenario: string): string =>
  report.scenarios.find((candidate) => candidate.id === scenario)?.unit === "responses/s" ? "responses/s" : "req/s";

/** The targets of issues 9, 17, 20, 21 and 39, each from numbers of the same run. */
export function targetsOf(report: BenchReport): TargetResult[] {
  const c64 = "identity-1KiB-c64";
  return [
    ratioTarget(report, "identity 1 KiB c64: data plane vs Triton", c64, "dataplane", "triton", 1.0),
    ratioTarget(report, "identity 1 KiB c64: data plane vs KServe ModelServer", c64, "dataplane", "kserve", 2.0),
    ratioTarget(report, "identity 1 KiB c64: data plane vs MLServer", c64, "dataplane", "mlserver", 2.0),
    ratioTarget(report, "identity 1 KiB c64: data plane vs NVIDIA Dynamo's frontend", c64, "dataplane", "dynamo", 2.0),
    ratioTarget(report, "identity 1 KiB c64: data plane vs bare grpc-js", c64, "dataplane", "grpc-js-ceiling", 0.8),
    ratioTarget(report, "1 MiB tensors: bytes/s vs Triton", "raw-1MiB-c16", "dataplane", "triton", 0.9),
    ratioTarget(report, "16 MiB tensors: bytes/s vs Triton", "raw-16MiB-c4", "dataplane", "triton", 1.0),
    ratioTarget(report, "16 MiB tensors: bytes/s vs bare grpc-js", "raw-16MiB-c4", "dataplane", "grpc-js-ceiling", 0.8),
    ratioTarget(report, "1 MiB tensors: bytes/s vs bare grpc-js", "raw-1MiB-c16", "dataplane", "grpc-js-ceiling", 0.8),
    ...forwardingTargets(report),
    ...(["json", "binary"] as const).map((form) =>
      ratioTarget(
        report,
        `REST identity 1 KiB c64 (${form}): data plane vs Triton's HTTP endpoint`,
        `rest-${form}-1KiB-c64`,
        "dataplane",
        "triton",
        1.0,
      ),
    ),
    ...(["python-1KiB-c16", "python-1KiB-c64", "python-1MiB-c16"] as const).map((scenario) =>
      ratioTarget(
        report,
        `Python-backend model.py (${scenario.slice("python-".length)}): python engine vs Triton's Python backend`,
        scenario,
        "dataplane-python",
        "triton",
        1.0,
      ),
    ),
    ratioTarget(
      report,
      "OpenAI SSE, 1000 streams: responses/s vs the same load over ModelStreamInfer",
      "openai-stream-mocker-1000",
      "dataplane",
      "dataplane",
      0.8,
      "stream-mocker-1000",
    ),
  ];
}

/**
 * Issue 39's forwarding targets, each from one run: passed through at c64 against the bare
 * node:http2 proxy (forwarder and upstream sharing core 0) and against calling the upstream
 * directly with the forwarder on its own core; the latency it adds at c1 against the proxy's;
 * in front of the bare grpc-js server (the forwarder's own cost, nearly all of it) and of
 * Triton (what a user sees). At 1 MiB, the ratios to the proxy and to Triton are reported.
 */
function forwardingTargets(report: BenchReport): TargetResult[] {
  const pass = "dataplane-pass-through";
  const upstreams = [
    { scenarios: "forward-bare-1KiB", direct: "upstream-direct", name: "the bare grpc-js server" },
    { scenarios: "forward-1KiB", direct: "triton-direct", name: "Triton" },
  ] as const;
  return [
    ...upstreams.flatMap(({ scenarios, direct, name }) => [
      ratioTarget(
        report,
        `forwarding to ${name}, passed through, c64: vs the bare node:http2 proxy`,
        `${scenarios}-c64`,
        pass,
        PROXY,
        0.8,
      ),
      ratioTarget(
        report,
        `forwarding to ${name}, passed through, c64, forwarder on its own core: vs calling ${name} directly`,
        `${scenarios}-c64-own-core`,
        pass,
        direct,
        0.6,
      ),
      addedLatencyTarget(
        report,
        `forwarding to ${name}, passed through, c1: added p50 vs the node:http2 proxy's`,
        `${scenarios}-c1`,
        direct,
        1.2,
      ),
    ]),
    ratioTarget(
      report,
      "forwarding 1 MiB to Triton, passed through, c16: vs the node:http2 proxy",
      "forward-1MiB-c16",
      pass,
      PROXY,
      0.8,
    ),
    ratioTarget(
      report,
      "forwarding 1 MiB to Triton, passed through, c16: vs calling Triton",
      "forward-1MiB-c16",
      pass,
      "triton-direct",
      "reported",
    ),
  ];
}

/** The p50 the pass-through forwarder adds over calling `direct`, over what the node:http2 proxy adds, one run. */
function addedLatencyTarget(
  report: BenchReport,
  name: string,
  scenario: string,
  direct: ServerId,
  wanted: number,
): TargetResult {
  const forwarded = resultOf(report, scenario, "dataplane-pass-through");
  const proxied = resultOf(report, scenario, PROXY);
  const called = resultOf(report, scenario, direct);
  const missing = [forwarded, proxied, called].find((result) => !usable(result));
  const base = { name, wanted: `≤ ${wanted}×`, measured: undefined, met: undefined };
  if (!usable(forwarded) || !usable(proxied) || !usable(called))
    return { ...base, detail: `not measured: ${missing?.label ?? scenario}: ${missing?.error ?? "not run"}` };
  const ours = forwarded.p50Ms! - called.p50Ms!;
  const proxys = proxied.p50Ms! - called.p50Ms!;
  const detail = `added p50 ${ours.toFixed(3)} vs ${proxys.toFixed(3)} ms (direct p50 ${called.p50Ms!.toFixed(3)} ms); p99 ${forwarded.p99Ms!.toFixed(2)} vs ${proxied.p99Ms!.toFixed(2)} ms`;
  // The proxy adding nothing measurable leaves no ratio to state.
  if (!(proxys > 0)) return { ...base, detail: `no ratio: the proxy added ${proxys.toFixed(3)} ms; ${detail}` };
  const ratio = ours / proxys;
  return { ...base, measured: ratio, met: ratio <= wanted, detail };
}

const formatBytes = (bytesPerSecond: number): string =>
  bytesPerSecond >= 1e9 ? `${(bytesPerSecond / 1e9).toFixed(2)} GB/s` : `${(bytesPerSecond / 1e6).toFixed(1)} MB/s`;

function scenarioTable(scenario: ScenarioResult): string[] {
  const ranked = [...scenario.results].sort((a, b) => (b.rps ?? -1) - (a.rps ?? -1));
  const best = ranked.find((result) => result.error === undefined)?.rps;
  const references = forwardingReferences(scenario);
  // Ratios for the scenario's own load client only: the references are its rows.
  const comparable = (
    result: ServerResult,
    reference: ServerResult | undefined,
  ): reference is ServerResult & { rps: number } =>
    usable(reference) && result !== reference && result.client === undefined;
  const of = (result: ServerResult, reference: ServerResult | undefined) =>
    comparable(result, reference) ? `${(result.rps! / reference.rps).toFixed(2)}×` : "";
  const rows = ranked.map((result) => {
    const blanks = references === undefined ? 0 : 3;
    if (result.error !== undefined)
      return `| ${result.label} | — | — |${" — |".repeat(blanks)} — | — | ${oneLine(result.error)} |`;
    const throughput =
      scenario.unit === "bytes/s"
        ? formatBytes(result.bytesPerSecond ?? 0)
        : `${result.rps!.toFixed(0)} ${scenario.unit === "responses/s" ? "responses/s" : "req/s"}`;
    const relative = best !== undefined && best > 0 ? `${((100 * result.rps!) / best).toFixed(0)}%` : "";
    const errors = result.errors ? `${result.errors} errors` : "";
    const p50 = result.p50Ms!.toFixed(2);
    if (references === undefined)
      return `| ${result.label} | ${throughput} | ${relative} | ${p50} | ${result.p99Ms!.toFixed(2)} | ${errors} |`;
    const { proxy, direct } = references;
    const added = comparable(result, direct) ? `${(result.p50Ms! - direct.p50Ms!).toFixed(3)}` : "";
    return `| ${result.label} | ${throughput} | ${relative} | ${of(result, proxy)} | ${of(result, direct)} | ${p50} | ${added} | ${result.p99Ms!.toFixed(2)} | ${errors} |`;
  });
  const header =
    references !== undefined
      ? [
          "| server | throughput | of best | of h2-proxy | of direct | p50 ms | added p50 ms | p99 ms | notes |",
          "|---|---|---|---|---|---|---|---|---|",
        ]
      : scenario.unit === "responses/s"
        ? ["| server | throughput | of best | p50 gap ms | p99 gap ms | notes |", "|---|---|---|---|---|---|"]
        : ["| server | throughput | of best | p50 ms | p99 ms | notes |", "|---|---|---|---|---|---|"];
  return [
    `### ${scenario.title}`,
    "",
    `\`${scenario.id}\`: ${scenario.payloadBytes} tensor bytes per request, ${scenario.connections} connections.`,
    ...(references !== undefined
      ? [
          "",
          "Ratios to the bare node:http2 proxy and to the upstream called directly are this run's; " +
            `"added p50" is the p50 over the direct call's. ${scenario.layout === "own-core" ? "The forwarder alone on core 0; its upstream, the direct server and the load on the other cores." : "Forwarder and upstream share core 0; the load has the other cores."}`,
        ]
      : []),
    "",
    ...header,
    ...rows,
    "",
  ];
}

/** A forwarding scenario's references (ghz's rows): the node:http2 proxy and the upstream called directly. */
function forwardingReferences(
  scenario: ScenarioResult,
): { proxy: ServerResult | undefined; direct: ServerResult | undefined } | undefined {
  const mine = (ids: readonly ServerId[]) =>
    scenario.results.find((result) => ids.includes(result.server) && result.client === undefined);
  const proxy = mine([PROXY]);
  const direct = mine(DIRECT_SERVERS);
  return proxy === undefined && direct === undefined ? undefined : { proxy, direct };
}

/**
 * Where perf_analyzer measured too: its throughput over ghz's for the same server and
 * scenario. Near 1 means the number is the server's; far from it, one generator limits.
 */
export function clientAgreement(report: BenchReport): string[] {
  const rows = report.scenarios.flatMap((scenario) =>
    scenario.results
      .filter((result) => result.client === "perf_analyzer")
      .map((second) => {
        const first = resultOf(report, scenario.id, second.server);
        const both = usable(first) && usable(second);
        const ratio = both ? `${(second.rps / first.rps).toFixed(2)}×` : "—";
        const detail = both
          ? `${second.rps.toFixed(0)} vs ${first.rps.toFixed(0)} req/s; p50 ${second.p50Ms!.toFixed(2)} vs ${first.p50Ms!.toFixed(2)} ms`
          : oneLine(second.error ?? first?.error ?? "not measured");
        return `| \`${scenario.id}\` | ${first?.label ?? second.server} | ${ratio} | ${detail} |`;
      }),
  );
  if (rows.length === 0) return [];
  return [
    "## Two load clients",
    "",
    "perf_analyzer (Triton's C++ client) against ghz, same server and scenario, one run each after ghz's:",
    "",
    "| scenario | server | perf_analyzer / ghz | detail |",
    "|---|---|---|---|",
    ...rows,
    "",
  ];
}

const oneLine = (text: string): string => text.replace(/\s+/g, " ").replaceAll("|", "\\|").slice(0, 300);

/** The Markdown report: settings, the targets met or not, one table per scenario. */
export function markdownReport(report: BenchReport, command: string, chart: string | undefined): string {
  const targets = targetsOf(report);
  const verdict = (target: TargetResult) =>
    target.measured === undefined
      ? "not measured"
      : target.met === undefined
        ? target.wanted
        : target.met
          ? "met"
          : "NOT met";
  const measured = (target: TargetResult) =>
    target.measured === undefined
      ? "—"
      : target.wanted.endsWith("ms")
        ? `${target.measured.toFixed(3)} ms`
        : `${target.measured.toFixed(2)}×`;
  return [
    `Produced by \`${command}\` on ${report.date.slice(0, 10)}: ${report.machine.cores} cores (${report.machine.cpu}), Node ${report.machine.node}, kernel ${report.machine.kernel}.`,
    `Each number is the median of ${report.settings.repetitions} runs of ${report.settings.durationSeconds} s after a ${report.settings.warmupSeconds} s warm-up; ` +
      `load from ghz (gRPC; perf_analyzer beside it where marked), vegeta (REST) and our stream generators (ModelStreamInfer, SSE); pinning: ${report.settings.pinning}.`,
    "",
    ...(chart !== undefined ? [`![throughput and latency per scenario](${chart})`, ""] : []),
    "## Targets",
    "",
    "Why the unmet ones fall short, with profiles: [bench/README.md](bench/README.md#findings).",
    "",
    "| target | wanted | measured | verdict | detail |",
    "|---|---|---|---|---|",
    ...targets.map(
      (target) =>
        `| ${target.name} | ${target.wanted} | ${measured(target)} | ${verdict(target)} | ${oneLine(target.detail)} |`,
    ),
    "",
    ...clientAgreement(report),
    "## Scenarios",
    "",
    ...report.scenarios.flatMap(scenarioTable),
  ].join("\n");
}

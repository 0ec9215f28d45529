import type { BenchReport, ScenarioResult, ServerResult } from "./run.js";
import type { ServerId } from "./servers.js";

/** One target of issue 9, as a ratio measured in one run. */
export interface TargetResult {
  readonly name: string;
  /** e.g. "≥ 1.0×" or "≤ 0.150 ms". */
  readonly wanted: string;
  /** The measured ratio (or milliseconds); undefined when a side has no numbers. */
  readonly measured: number | undefined;
  readonly met: boolean | undefined;
  readonly detail: string;
}

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
  wanted: number,
  theirsIn = scenario,
): TargetResult {
  const a = resultOf(report, scenario, ours);
  const b = resultOf(report, theirsIn, theirs);
  if (!usable(a) || !usable(b)) {
    const missing = !usable(a) ? a : b;
    return {
      name,
      wanted: `≥ ${wanted}×`,
      measured: undefined,
      met: undefined,
      detail: `not measured: ${missing?.label ?? theirs}: ${missing?.error ?? "not run"}`,
    };
  }
  const ratio = a.rps / b.rps;
  return {
    name,
    wanted: `≥ ${wanted}×`,
    measured: ratio,
    met: ratio >= wanted,
    detail: `${a.rps.toFixed(0)} vs ${b.rps.toFixed(0)} ${scenarioUnit(report, scenario)}`,
  };
}

const scenarioUnit = (report: BenchReport, scenario: string): string =>
  report.scenarios.find((candidate) => candidate.id === scenario)?.unit === "responses/s" ? "responses/s" : "req/s";

/** The targets of issues 9, 17, 20 and 21, each from numbers of the same run. */
export function targetsOf(report: BenchReport): TargetResult[] {
  const c64 = "identity-1KiB-c64";
  const targets = [
    ratioTarget(report, "identity 1 KiB c64: data plane vs Triton", c64, "dataplane", "triton", 1.0),
    ratioTarget(report, "identity 1 KiB c64: data plane vs KServe ModelServer", c64, "dataplane", "kserve", 2.0),
    ratioTarget(report, "identity 1 KiB c64: data plane vs MLServer", c64, "dataplane", "mlserver", 2.0),
    ratioTarget(report, "identity 1 KiB c64: data plane vs NVIDIA Dynamo's frontend", c64, "dataplane", "dynamo", 2.0),
    ratioTarget(report, "identity 1 KiB c64: data plane vs bare grpc-js", c64, "dataplane", "grpc-js-ceiling", 0.8),
    ratioTarget(report, "1 MiB tensors: bytes/s vs Triton", "raw-1MiB-c16", "dataplane", "triton", 0.9),
    ratioTarget(report, "16 MiB tensors: bytes/s vs Triton", "raw-16MiB-c4", "dataplane", "triton", 1.0),
    ratioTarget(report, "16 MiB tensors: bytes/s vs bare grpc-js", "raw-16MiB-c4", "dataplane", "grpc-js-ceiling", 0.8),
    ratioTarget(
      report,
      "forwarding to Triton, passed through: throughput vs calling Triton (c64)",
      "forward-1KiB-c64",
      "dataplane-pass-through",
      "triton-direct",
      0.6,
    ),
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
  // Added latency where neither server is saturated: one request at a time.
  const forward = resultOf(report, "forward-1KiB-c1", "dataplane-pass-through");
  const direct = resultOf(report, "forward-1KiB-c1", "triton-direct");
  if (usable(forward) && usable(direct)) {
    const added = forward.p50Ms! - direct.p50Ms!;
    targets.push({
      name: "forwarding to Triton, passed through: added p50 latency (concurrency 1)",
      wanted: "≤ 0.300 ms",
      measured: added,
      met: added <= 0.3,
      detail: `p50 ${forward.p50Ms!.toFixed(3)} vs ${direct.p50Ms!.toFixed(3)} ms; p99 ${forward.p99Ms!.toFixed(2)} vs ${direct.p99Ms!.toFixed(2)} ms`,
    });
  }
  return targets;
}

const formatBytes = (bytesPerSecond: number): string =>
  bytesPerSecond >= 1e9 ? `${(bytesPerSecond / 1e9).toFixed(2)} GB/s` : `${(bytesPerSecond / 1e6).toFixed(1)} MB/s`;

function scenarioTable(scenario: ScenarioResult): string[] {
  const ranked = [...scenario.results].sort((a, b) => (b.rps ?? -1) - (a.rps ?? -1));
  const best = ranked.find((result) => result.error === undefined)?.rps;
  const rows = ranked.map((result) => {
    if (result.error !== undefined) return `| ${result.label} | — | — | — | — | ${oneLine(result.error)} |`;
    const throughput =
      scenario.unit === "bytes/s"
        ? formatBytes(result.bytesPerSecond ?? 0)
        : `${result.rps!.toFixed(0)} ${scenario.unit === "responses/s" ? "responses/s" : "req/s"}`;
    const relative = best !== undefined && best > 0 ? `${((100 * result.rps!) / best).toFixed(0)}%` : "";
    const errors = result.errors ? `${result.errors} errors` : "";
    return `| ${result.label} | ${throughput} | ${relative} | ${result.p50Ms!.toFixed(2)} | ${result.p99Ms!.toFixed(2)} | ${errors} |`;
  });
  return [
    `### ${scenario.title}`,
    "",
    `\`${scenario.id}\`: ${scenario.payloadBytes} tensor bytes per request, ${scenario.connections} connections.`,
    "",
    scenario.unit === "responses/s"
      ? "| server | throughput | of best | p50 gap ms | p99 gap ms | notes |"
      : "| server | throughput | of best | p50 ms | p99 ms | notes |",
    "|---|---|---|---|---|---|",
    ...rows,
    "",
  ];
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
    target.met === undefined ? "not measured" : target.met ? "met" : "NOT met";
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

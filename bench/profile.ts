import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { CLI, REPO_ROOT } from "../dataplane/test/fixtures/paths.js";
import { freePort } from "../e2e/support/ports.js";
import { ghzBinary } from "../e2e/support/prerequisites.js";
import { runLoad } from "./harness/ghz.js";
import { writeRequest } from "./harness/requests.js";
import { pinning } from "./harness/run.js";
import { CEILING_SIZES, SCENARIOS } from "./harness/scenarios.js";
import {
  dataplaneArgs,
  passThroughRepository,
  PYTHON_ARGS,
  PYTHON_REPOSITORY,
  SERVER_LABELS,
  startBenchServer,
} from "./harness/servers.js";

/**
 * `npm run bench:profile [-- scenario-id]`: the data plane under one scenario's load with
 * V8's CPU profiler on. Writes bench/results/<date>-<scenario>.cpuprofile (open it in Chrome
 * DevTools or speedscope for the flame graph) and a table of where the time goes, by
 * function (self time) and by file.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const scenarioId = process.argv[2] ?? "identity-1KiB-c64";
const scenario = SCENARIOS.find((candidate) => candidate.id === scenarioId);
if (scenario === undefined) throw new Error(`no scenario ${scenarioId}`);
const profileDir = mkdtempSync(join(tmpdir(), "dynamo-kserve-profile-"));
const port = await freePort();
// The scenario's cores per role (the data plane on core 0, ghz on the others).
const pins = pinning(scenario.layout);
const pinned = (cpus: string | undefined, command: readonly string[]): string[] =>
  cpus === undefined ? [...command] : ["taskset", "-c", cpus, ...command];
// A forwarding scenario profiles the pass-through data plane in front of the scenario's
// upstream (Triton, or the bare grpc-js server for forward-bare-*), placed as the scenario places it.
const upstream =
  scenario.upstream !== undefined
    ? await startBenchServer(scenario.upstream, { cpus: pins.upstream, ceilingSizes: CEILING_SIZES })
    : undefined;
// A python scenario profiles the python engine running the bench's Triton repository (its
// Python processes share core 0 and are not in the profile).
const python = scenario.id.startsWith("python-");
const repository =
  upstream !== undefined
    ? passThroughRepository(upstream.address)
    : python
      ? PYTHON_REPOSITORY
      : join(REPO_ROOT, "bench", "models");
const [program, ...programArgs] = pinned(pins.server, [
  ...[process.execPath, "--cpu-prof", "--cpu-prof-dir", profileDir, CLI],
  ...dataplaneArgs(repository, port),
  ...(python ? PYTHON_ARGS : []),
]);
const server = spawn(program!, programArgs, { stdio: "inherit" });
await new Promise((resolve) => setTimeout(resolve, 2000));
const requestFile = writeRequest(profileDir, scenario.id, scenario.payload);
const run = await runLoad({
  ghz: ghzBinary(),
  address: `127.0.0.1:${port}`,
  requestFile,
  concurrency: scenario.concurrency,
  connections: scenario.connections,
  durationSeconds: 10,
  ...(pins.client !== undefined ? { cpus: pins.client } : {}),
});
const exited = new Promise((resolve) => server.once("exit", resolve));
server.kill("SIGTERM");
await exited;
if (upstream !== undefined) {
  await upstream.stop();
  rmSync(repository, { recursive: true, force: true });
}

const file = readdirSync(profileDir).find((name) => name.endsWith(".cpuprofile"));
if (file === undefined) throw new Error(`no profile written in ${profileDir}`);
const profile = JSON.parse(readFileSync(join(profileDir, file), "utf8")) as CpuProfile;
const selfTime = new Map<number, number>();
profile.samples.forEach((node, i) => selfTime.set(node, (selfTime.get(node) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...selfTime.values()].reduce((sum, value) => sum + value, 0);
const byFunction = new Map<string, number>();
const byFile = new Map<string, number>();
for (const node of profile.nodes) {
  const time = selfTime.get(node.id) ?? 0;
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url === "" ? "(native)" : url.startsWith("file://") ? relative(REPO_ROOT, url.slice(7)) : url;
  const name = `${functionName || "(anonymous)"} ${where}${url ? `:${lineNumber + 1}` : ""}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + time);
  const group = where.startsWith("node_modules/") ? where.split("/").slice(0, 2).join("/") : where;
  byFile.set(group, (byFile.get(group) ?? 0) + time);
}
const top = (map: Map<string, number>, count: number) =>
  [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, time]) => `| ${((100 * time) / total).toFixed(1)}% | \`${name.replaceAll("|", "\\|")}\` |`);

const stem = `${new Date().toISOString().slice(0, 10)}-${scenario.id}`;
const resultsDir = join(REPO_ROOT, "bench", "results");
mkdirSync(resultsDir, { recursive: true });
renameSync(join(profileDir, file), join(resultsDir, `${stem}.cpuprofile`));
const report = [
  `# CPU profile: ${scenario.title}`,
  "",
  `\`npm run bench:profile -- ${scenario.id}\`: the data plane (one worker; ${upstream === undefined ? "" : `passing requests through to ${SERVER_LABELS[upstream.id]}; `}${pins.describe}) under ghz for 10 s: ` +
    `${run.rps.toFixed(0)} req/s, p50 ${run.p50Ms.toFixed(2)} ms, p99 ${run.p99Ms.toFixed(2)} ms (with the profiler on). ` +
    `Flame graph: open \`${stem}.cpuprofile\` in Chrome DevTools or speedscope.`,
  "",
  "## Self time by file (node_modules grouped by package)",
  "",
  "| share | file |",
  "|---|---|",
  ...top(byFile, 20),
  "",
  "## Self time by function",
  "",
  "| share | function |",
  "|---|---|",
  ...top(byFunction, 30),
  "",
].join("\n");
writeFileSync(join(resultsDir, `${stem}-profile.md`), report);
console.error(`profile: wrote bench/results/${stem}-profile.md and ${stem}.cpuprofile`);

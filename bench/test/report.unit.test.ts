import assert from "node:assert/strict";
import { cpus } from "node:os";
import { measurementArgs } from "../harness/perf-analyzer.js";
import { markdownReport, targetsOf } from "../harness/report.js";
import { groupsOf, pinning, type BenchReport, type ServerResult } from "../harness/run.js";
import { SCENARIOS } from "../harness/scenarios.js";
import { SERVER_LABELS, type ServerId } from "../harness/servers.js";

/** The forwarding rows of the report and the run's plan: ratios of one run, each server started once per upstream and cores. */

const row = (server: ServerId, rps: number, p50Ms: number): ServerResult => ({
  server,
  label: SERVER_LABELS[server],
  ok: rps * 5,
  errors: 0,
  rps,
  p50Ms,
  p99Ms: 2 * p50Ms,
});

const scenario = (id: string, results: ServerResult[]) => ({
  id,
  title: id,
  unit: "requests/s" as const,
  payloadBytes: 1024,
  concurrency: 64,
  connections: 8,
  results,
});

const report: BenchReport = {
  date: "2026-11-26T00:00:00.000Z",
  machine: { cores: 2, cpu: "test", node: "v24", kernel: "test" },
  settings: { durationSeconds: 5, repetitions: 1, warmupSeconds: 1, pinning: "test" },
  scenarios: [
    scenario("forward-bare-1KiB-c64", [
      row("upstream-direct", 2000, 10),
      row("h2-proxy", 1000, 20),
      row("grpcjs-proxy", 700, 30),
      row("dataplane-pass-through", 900, 25),
    ]),
    scenario("forward-bare-1KiB-c64-own-core", [
      row("upstream-direct", 3000, 10),
      row("dataplane-pass-through", 1500, 40),
    ]),
    scenario("forward-bare-1KiB-c1", [
      row("upstream-direct", 3000, 0.3),
      row("h2-proxy", 1500, 0.6),
      row("dataplane-pass-through", 1000, 0.7),
    ]),
  ],
};

describe("bench report: forwarding beside its ceilings", () => {
  const target = (name: string) => {
    const found = targetsOf(report).find((candidate) => candidate.name === name);
    assert.ok(found, `no target ${name}`);
    return found;
  };

  it("states pass-through against the node:http2 proxy and, on its own core, against the upstream called directly", () => {
    const proxy = target("forwarding to the bare grpc-js server, passed through, c64: vs the bare node:http2 proxy");
    assert.equal(proxy.measured, 0.9);
    assert.equal(proxy.met, true);
    assert.equal(proxy.detail, "900 vs 1000 req/s");
    const own = target(
      "forwarding to the bare grpc-js server, passed through, c64, forwarder on its own core: vs calling the bare grpc-js server directly",
    );
    assert.equal(own.measured, 0.5);
    assert.equal(own.met, false);
  });

  it("compares the p50 pass-through adds at c1 with the p50 the proxy adds, over the same direct call", () => {
    const added = target(
      "forwarding to the bare grpc-js server, passed through, c1: added p50 vs the node:http2 proxy's",
    );
    assert.ok(Math.abs(added.measured! - 0.4 / 0.3) < 1e-9, String(added.measured));
    assert.equal(added.wanted, "≤ 1.2×");
    assert.equal(added.met, false);
    assert.match(added.detail, /^added p50 0\.400 vs 0\.300 ms \(direct p50 0\.300 ms\)/);
  });

  it("says which side is missing when a scenario did not run, and reports the 1 MiB Triton ratio without a verdict", () => {
    const triton = target("forwarding to Triton, passed through, c64: vs the bare node:http2 proxy");
    assert.equal(triton.met, undefined);
    assert.match(triton.detail, /^not measured: dataplane-pass-through: not run/);
    assert.equal(target("forwarding 1 MiB to Triton, passed through, c16: vs calling Triton").wanted, "reported");
  });

  it("puts the ratios to h2-proxy and to direct, and the added p50, in each forwarding table", () => {
    const markdown = markdownReport(report, "npm run bench", undefined);
    assert.match(
      markdown,
      /\| server \| throughput \| of best \| of h2-proxy \| of direct \| p50 ms \| added p50 ms \| p99 ms \| notes \|/,
    );
    assert.match(
      markdown,
      /\| dynamo-kserve forwarding \(no tensors declared: passed through\) \| 900 req\/s \| 45% \| 0\.90× \| 0\.45× \| 25\.00 \| 15\.000 \| 50\.00 \| {2}\|/,
    );
    assert.match(
      markdown,
      /\| bare node:http2 stream proxy \(ceiling\) \| 1000 req\/s \| 50% \| {2}\| 0\.50× \| 20\.00 \| 10\.000 \|/,
    );
  });
});

describe("bench run plan: forwarders per upstream and cores", () => {
  it("puts the upstream called directly and the forwarders in front of it in one group per upstream and layout", () => {
    const forwarding = SCENARIOS.filter((candidate) => /^forward-(bare-)?1KiB-c(1|64)/.test(candidate.id));
    const groups = groupsOf(forwarding, []).map(
      (group) =>
        `${group.upstream} ${group.layout}: ${group.setups.map((setup) => setup.server).join(",")} for ${group.scenarios.map((s) => s.id).join(",")}`,
    );
    assert.deepEqual(groups, [
      "triton shared: triton-direct,h2-proxy,grpcjs-proxy,dataplane-forward,dataplane-pass-through for forward-1KiB-c1,forward-1KiB-c64",
      "triton own-core: triton-direct,h2-proxy,grpcjs-proxy,dataplane-forward,dataplane-pass-through for forward-1KiB-c1-own-core,forward-1KiB-c64-own-core",
      "grpc-js-ceiling shared: upstream-direct,h2-proxy,grpcjs-proxy,dataplane-pass-through for forward-bare-1KiB-c1,forward-bare-1KiB-c64",
      "grpc-js-ceiling own-core: upstream-direct,h2-proxy,grpcjs-proxy,dataplane-pass-through for forward-bare-1KiB-c1-own-core,forward-bare-1KiB-c64-own-core",
    ]);
    const [triton] = groupsOf(forwarding, []);
    assert.deepEqual(
      triton!.setups.map((setup) => setup.upstream),
      [undefined, "triton", "triton", "triton", "triton"],
    );
  });

  it("keeps every other server a group of its own, and refuses a forwarder without an upstream", () => {
    const identity = SCENARIOS.filter((candidate) => candidate.id.startsWith("identity-1KiB"));
    const groups = groupsOf(identity, ["dataplane", "triton"]);
    assert.deepEqual(
      groups.map((group) => [group.upstream, group.setups.map((setup) => setup.server), group.scenarios.length]),
      [
        [undefined, ["dataplane"], 4],
        [undefined, ["triton"], 4],
      ],
    );
    // Triton and the bare grpc-js server alone are not the forwarding groups' upstreams.
    const every = groupsOf(SCENARIOS, []);
    for (const group of every) {
      const forwarding = group.setups.some((setup) => setup.upstream !== undefined);
      assert.equal(forwarding, group.upstream !== undefined, group.setups.map((setup) => setup.server).join(","));
      if (!forwarding) assert.equal(group.setups.length, 1, group.setups.map((setup) => setup.server).join(","));
    }
    assert.equal(every.filter((group) => group.upstream !== undefined).length, 4);
    const loose = { ...identity[0]!, id: "loose", servers: ["h2-proxy" as const] };
    assert.throws(() => groupsOf([loose], []), /scenario loose: h2-proxy forwards, and the scenario names no upstream/);
  });

  it("gives a forwarder on its own core a core its upstream and the load do not use", () => {
    if (cpus().length < 2) {
      assert.deepEqual([pinning("own-core").server, pinning("own-core").upstream], [undefined, undefined]);
      return;
    }
    const shared = pinning("shared");
    assert.equal(shared.server, shared.upstream);
    const own = pinning("own-core");
    assert.ok(own.server !== undefined && own.upstream !== undefined && own.client !== undefined);
    assert.ok(!own.upstream.split(",").includes(own.server) && !own.client.split(",").includes(own.server));
  });

  it("bounds perf_analyzer by a count of requests where responses are large, by windows otherwise", () => {
    assert.deepEqual(measurementArgs({ durationSeconds: 5, responseBytes: 1024 ** 2, concurrency: 16 }), [
      "--request-count",
      "682",
    ]);
    assert.deepEqual(measurementArgs({ durationSeconds: 5, responseBytes: 16 * 1024 ** 2, concurrency: 4 }), [
      "--request-count",
      "42",
    ]);
    assert.deepEqual(measurementArgs({ durationSeconds: 6, responseBytes: 1024, concurrency: 64 }), [
      ...["--measurement-interval", "2000"],
      ...["--max-trials", "10"],
    ]);
  });
});

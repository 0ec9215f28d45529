import assert from "node:assert/strict";
import { ghzBinary, perfAnalyzerBinary, requireProgram, vegetaBinary } from "../../e2e/support/prerequisites.js";
import { markdownReport, targetsOf } from "../harness/report.js";
import { runBenchmarks } from "../harness/run.js";
import { SCENARIOS, SMOKE_SCENARIO } from "../harness/scenarios.js";

/**
 * The benchmark harness, run for seconds so it cannot rot: one scenario, the data plane and
 * the bare grpc-js ceiling, driven by the real ghz. Asserts the harness works, not speed.
 */
describe("benchmark harness smoke run (npm run bench, one scenario, one second)", function () {
  this.timeout(120_000);

  before(function () {
    requireProgram(this, ghzBinary(), "ghz", "run bash e2e/tools/build.sh");
    requireProgram(this, vegetaBinary(), "vegeta", "run bash e2e/tools/build.sh");
    requireProgram(this, perfAnalyzerBinary(), "perf_analyzer", "run bash e2e/tools/build.sh");
  });

  it("drives the data plane's REST endpoint with vegeta (JSON and binary) and SSE streams with our generator", async () => {
    // The data plane's own HTTP scenarios (the forwarding one needs Triton behind it).
    const own = SCENARIOS.filter((scenario) => scenario.http !== undefined && scenario.servers.includes("dataplane"));
    const http = own.map((scenario) => ({
      ...scenario,
      servers: ["dataplane" as const],
      ...(scenario.streams !== undefined
        ? { concurrency: 20, streams: { ...scenario.streams, count: 20, tokens: 4 } }
        : {}),
    }));
    assert.deepEqual(
      http.map((scenario) => scenario.id),
      ["rest-json-1KiB-c64", "rest-binary-1KiB-c64", "openai-stream-mocker-1000"],
    );
    const report = await runBenchmarks(http, {
      durationSeconds: 1,
      repetitions: 1,
      warmupSeconds: 1,
      only: [],
      log: () => undefined,
    });
    for (const scenario of report.scenarios) {
      const result = scenario.results[0]!;
      assert.equal(result.error, undefined, `${scenario.id}: ${result.error}`);
      assert.equal(result.errors, 0, `${scenario.id}: ${result.firstError}`);
      assert.ok(result.rps! > 50, `${scenario.id}: ${result.rps}/s`);
      assert.ok(result.p50Ms! > 0 && result.p99Ms! >= result.p50Ms!, JSON.stringify(result));
    }
  });

  it("forwards to the bare grpc-js server through both proxies and the data plane, the forwarder on its own core, with the ratios", async () => {
    const forwarding = SCENARIOS.find((scenario) => scenario.id === "forward-bare-1KiB-c64-own-core")!;
    const report = await runBenchmarks([forwarding], {
      durationSeconds: 1,
      repetitions: 1,
      warmupSeconds: 1,
      only: [],
      perfAnalyzer: true,
      log: () => undefined,
    });
    const [scenario] = report.scenarios;
    // perf_analyzer asks metadata, which neither the bare upstream nor a forwarder in front of it answers.
    assert.deepEqual(
      scenario?.results.map((result) => [result.server, result.client]),
      [
        ["upstream-direct", undefined],
        ["h2-proxy", undefined],
        ["grpcjs-proxy", undefined],
        ["dataplane-pass-through", undefined],
      ],
    );
    for (const result of scenario!.results) {
      assert.equal(result.error, undefined, `${result.server}: ${result.error}`);
      assert.equal(result.errors, 0, `${result.server}: ${result.firstError}`);
      assert.ok(result.rps! > 50, `${result.server} answered: ${result.rps} req/s`);
    }
    const own = targetsOf(report).find((target) =>
      target.name.includes("bare grpc-js server, passed through, c64, forwarder on its own core"),
    );
    assert.ok(own?.measured !== undefined && own.measured > 0, JSON.stringify(own));
    assert.match(
      markdownReport(report, "npm run bench", undefined),
      /\| bare node:http2 stream proxy \(ceiling\) \| \d+ req\/s \| \d+% \| {2}\| \d+\.\d\d× \|/,
    );
  });

  it("drives the data plane and the ceiling with ghz, the data plane also with perf_analyzer, and reports all, with ratios", async () => {
    const logged: string[] = [];
    const report = await runBenchmarks([SMOKE_SCENARIO], {
      durationSeconds: 1,
      repetitions: 1,
      warmupSeconds: 1,
      only: [],
      perfAnalyzer: true,
      log: (line) => logged.push(line),
    });
    const [scenario] = report.scenarios;
    assert.equal(scenario?.id, SMOKE_SCENARIO.id);
    // The ceilings answer ModelInfer only; perf_analyzer asks metadata first, so it drives the data plane alone.
    assert.deepEqual(
      scenario.results.map((result) => [result.server, result.client]),
      [
        ["dataplane", undefined],
        ["dataplane", "perf_analyzer"],
        ["grpc-js-ceiling", undefined],
      ],
    );
    for (const result of scenario.results) {
      assert.equal(result.error, undefined, `${result.server}: ${result.error}`);
      assert.ok(result.rps! > 50, `${result.server} answered: ${result.rps} req/s`);
      assert.equal(result.errors, 0, `${result.server}: ${result.firstError}`);
      assert.ok(result.p50Ms! > 0 && result.p99Ms! >= result.p50Ms!, JSON.stringify(result));
    }
    assert.equal(logged.length, 3);
    const markdown = markdownReport(report, "npm run bench", undefined);
    assert.match(
      markdown,
      /\| `smoke-identity-1KiB-c16` \| dynamo-kserve \(1 worker\) \| \d+\.\d\d× \| \d+ vs \d+ req\/s/,
    );
    assert.match(markdown, /\| dynamo-kserve \(1 worker\) · perf_analyzer \| \d+ req\/s \|/);
    assert.match(markdown, /\| dynamo-kserve \(1 worker\) \| \d+ req\/s \|/);
    assert.match(markdown, /\| bare grpc-js \(ceiling\) \| \d+ req\/s \|/);
    // Targets whose servers were not in this run say so instead of passing silently.
    const triton = targetsOf(report).find((target) => target.name.endsWith("vs Triton"));
    assert.equal(triton?.met, undefined);
    assert.match(triton!.detail, /not measured/);
  });
});

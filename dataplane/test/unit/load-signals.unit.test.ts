import assert from "node:assert/strict";
import { AggregatorRegistry, Registry } from "prom-client";
import { parseMetrics, type Sample } from "../../../e2e/support/prometheus.js";
import { MODEL_LOAD_SIGNALS, POD_LOAD_SIGNALS } from "../../../lib/contract/load-signals.js";
import type { EngineLoad } from "../../src/engines/engine.js";
import { loadSignals } from "../../src/metrics/load.js";

/**
 * The load signals as an endpoint picker scrapes them, from a registry fed fixed loads: the
 * per-model series, and the pod's totals a picker of a many-model pool reads (one series per
 * pod, no labels). The gRPC tier (metrics.grpc.test.ts) shows the same with mocker models
 * holding real requests; this one covers what a served repository rarely shows: no model at
 * all, models that report no KV cache, and the --grpc-workers primary's join of its workers.
 */

type Loads = { name: string; load: EngineLoad }[];

/** A registry with the load signals of whatever `loads` holds at each scrape. */
function signalsOf(loads: () => Loads): Registry {
  const register = new Registry();
  loadSignals(register, loads);
  return register;
}

/** The pod's three totals; undefined for a series that is not there. */
function podTotals(samples: readonly Sample[]): Record<keyof typeof POD_LOAD_SIGNALS, number | undefined> {
  const of = (name: string): number | undefined => {
    const found = samples.filter((sample) => sample.name === name);
    assert.ok(found.length <= 1, `${name}: ${found.length} series, not one per pod`);
    assert.deepEqual(found[0]?.labels ?? {}, {}, `${name} has no labels`);
    return found[0]?.value;
  };
  return {
    waiting: of(POD_LOAD_SIGNALS.waiting),
    running: of(POD_LOAD_SIGNALS.running),
    kvCacheUsage: of(POD_LOAD_SIGNALS.kvCacheUsage),
  };
}

const scrape = async (register: { metrics(): Promise<string> }): Promise<Sample[]> =>
  parseMetrics(await register.metrics());

describe("load signals: the pod's totals over its models (GAIE's one series per pod)", () => {
  it("sums waiting and running over the models and reports the largest KV-cache ratio", async () => {
    const register = signalsOf(() => [
      { name: "llm_a", load: { waiting: 3, running: 2, kvCacheUsage: 0.25 } },
      { name: "llm_b", load: { waiting: 1, running: 4, kvCacheUsage: 0.75 } },
      { name: "tensors", load: { waiting: 2, running: 5 } },
    ]);
    const samples = await scrape(register);
    assert.deepEqual(podTotals(samples), { waiting: 6, running: 11, kvCacheUsage: 0.75 });
    // The per-model series are still there, each labelled with its model.
    const perModel = samples.filter((sample) => sample.name === MODEL_LOAD_SIGNALS.waiting);
    assert.deepEqual(
      perModel.map(({ labels, value }) => [labels["model"], value]),
      [
        ["llm_a", 3],
        ["llm_b", 1],
        ["tensors", 2],
      ],
    );
  });

  it("publishes 0 waiting and running and no KV-cache total while no model is loaded", async () => {
    const samples = await scrape(signalsOf(() => []));
    assert.deepEqual(podTotals(samples), { waiting: 0, running: 0, kvCacheUsage: undefined });
    assert.equal(samples.filter((sample) => sample.name === MODEL_LOAD_SIGNALS.waiting).length, 0);
  });

  it("publishes no KV-cache total when no model keeps a KV cache, and 0 when one keeps an empty one", async () => {
    let loads: Loads = [{ name: "tensors", load: { waiting: 0, running: 1 } }];
    const register = signalsOf(() => loads);
    assert.deepEqual(podTotals(await scrape(register)), { waiting: 0, running: 1, kvCacheUsage: undefined });
    loads = [...loads, { name: "llm", load: { waiting: 0, running: 0, kvCacheUsage: 0 } }];
    assert.deepEqual(podTotals(await scrape(register)), { waiting: 0, running: 1, kvCacheUsage: 0 });
    // The model with the KV cache unloaded again: the series goes with it, read at the next scrape.
    loads = loads.slice(0, 1);
    assert.deepEqual(podTotals(await scrape(register)), { waiting: 0, running: 1, kvCacheUsage: undefined });
  });

  it("joins --grpc-workers' totals as the pod's: waiting and running summed, the largest KV-cache ratio", async () => {
    // Each worker loads every model with engines of its own (workers.ts): the primary's /metrics joins them.
    const workerA = signalsOf(() => [{ name: "llm", load: { waiting: 2, running: 1, kvCacheUsage: 0.5 } }]);
    const workerB = signalsOf(() => [{ name: "llm", load: { waiting: 1, running: 3, kvCacheUsage: 0.125 } }]);
    const joined = AggregatorRegistry.aggregate([await workerA.getMetricsAsJSON(), await workerB.getMetricsAsJSON()]);
    assert.deepEqual(podTotals(await scrape(joined)), { waiting: 3, running: 4, kvCacheUsage: 0.5 });
  });
});

import assert from "node:assert/strict";
import { scrape, type Sample } from "../../../e2e/support/prometheus.js";
import { identityRequest } from "../fixtures/requests.js";
import { call, infer, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

/**
 * The per-series slots (metrics/series.ts) as /metrics shows them: counters never go back
 * across scrapes, a histogram's buckets, _sum and _count agree while requests and scrapes run
 * at once, and a model's series stay while it is unloaded (as before the slots: nothing
 * removes them) and keep counting from where they were when it is loaded again.
 */

const MODEL = "identity_fp32";

/** Every sample of the model's series, by name and labels. */
function seriesOf(samples: readonly Sample[]): Map<string, number> {
  const series = new Map<string, number>();
  for (const { name, labels, value } of samples) {
    if (labels["model"] !== MODEL) continue;
    series.set(`${name}${JSON.stringify(labels)}`, value);
  }
  return series;
}

/** Counters (…_total, histogram _count and _bucket) must not go back between two scrapes. */
function assertMonotonic(before: Map<string, number>, after: Map<string, number>): void {
  for (const [key, value] of before) {
    if (!/_total|_count|_bucket/.test(key)) continue;
    const later = after.get(key);
    assert.notEqual(later, undefined, `${key} disappeared`);
    assert.ok(later! >= value, `${key} went back from ${value} to ${later}`);
  }
}

/** Each histogram series: its buckets rise to +Inf, which equals _count. */
function assertHistogramsConsistent(samples: readonly Sample[]): void {
  const buckets = new Map<string, number[]>();
  const counts = new Map<string, number>();
  for (const { name, labels, value } of samples) {
    const { le, ...rest } = labels;
    if (name.endsWith("_bucket")) {
      const key = `${name.slice(0, -"_bucket".length)}${JSON.stringify(rest)}`;
      buckets.set(key, [...(buckets.get(key) ?? []), value]);
      if (le === "+Inf") counts.set(`${key}:inf`, value);
    } else if (name.endsWith("_count")) counts.set(`${name.slice(0, -"_count".length)}${JSON.stringify(rest)}`, value);
  }
  for (const [key, values] of buckets) {
    for (let i = 1; i < values.length; i++) assert.ok(values[i]! >= values[i - 1]!, `${key} buckets fall`);
    if (counts.has(key)) assert.equal(counts.get(`${key}:inf`), counts.get(key), `${key}: +Inf bucket is not _count`);
  }
}

describe("metric slots across scrapes, concurrent requests, and a model unloaded and loaded again", function () {
  this.timeout(60_000);
  const serving = useServer({}, ["--model-control-mode", "explicit", "--load-model", MODEL]);
  let server: ServerProcess;
  before(() => ({ server } = serving));
  const metrics = (): Promise<Sample[]> => scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);

  it("keeps counters monotonic and histograms consistent while requests and scrapes run at once", async () => {
    let previous = seriesOf(await metrics());
    const requests = Promise.all(
      Array.from({ length: 200 }, (_, index) => infer(server.client, identityRequest({ id: String(index) }))),
    );
    let scrapes = 0;
    let done = false;
    void requests.finally(() => (done = true));
    while (!done || scrapes < 3) {
      const samples = await metrics();
      assertHistogramsConsistent(samples);
      const current = seriesOf(samples);
      assertMonotonic(previous, current);
      previous = current;
      scrapes++;
    }
    await requests;
    const samples = await metrics();
    assertHistogramsConsistent(samples);
    const successes = samples.find(
      ({ name, labels }) =>
        name === "nv_inference_request_success" && labels["model"] === MODEL && labels["version"] === "1",
    );
    assert.equal(successes?.value, 200);
  });

  it("keeps an unloaded model's series, and counts on from them once it is loaded again", async () => {
    const before = seriesOf(await metrics());
    const requestsBefore = [...before].find(([key]) => key.startsWith("dynamo_frontend_requests_total"));
    assert.ok(requestsBefore !== undefined);
    await call(server.client, "repositoryModelUnload", { repositoryName: "", modelName: MODEL, parameters: {} });
    const unloaded = seriesOf(await metrics());
    // The frontend and component families keep the series (counts as they were); Triton's nv_* are read from the served models.
    for (const [key, value] of before) {
      if (key.startsWith("nv_")) continue;
      if (/_total|_count|_bucket|_sum/.test(key)) assert.equal(unloaded.get(key), value, key);
    }
    await call(server.client, "repositoryModelLoad", { repositoryName: "", modelName: MODEL, parameters: {} });
    await infer(server.client, identityRequest());
    const reloaded = seriesOf(await metrics());
    const kept = (series: Map<string, number>) => new Map([...series].filter(([key]) => !key.startsWith("nv_")));
    assertMonotonic(kept(before), kept(reloaded));
    const [key, value] = requestsBefore;
    assert.equal(reloaded.get(key), value + 1, key);
  });
});

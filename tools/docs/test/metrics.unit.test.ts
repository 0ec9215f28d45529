import assert from "node:assert/strict";
import { collectDefaultMetrics, Counter, Histogram, Registry } from "prom-client";
import { familiesOf, metricsPage } from "../metrics.js";

describe("the metric reference (tools/docs/metrics.ts)", () => {
  it("lists a registry's own families by name, with type, help and labels, and not prom-client's defaults", () => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    new Histogram({ name: "b_seconds", help: "time", labelNames: ["model"], registers: [registry] });
    new Counter({ name: "a_total", help: "count", labelNames: ["model", "status"], registers: [registry] });
    assert.deepEqual(familiesOf(registry), [
      { name: "a_total", type: "counter", help: "count", labels: ["model", "status"] },
      { name: "b_seconds", type: "histogram", help: "time", labels: ["model"] },
    ]);
  });

  it("writes a section per source with a row per family", () => {
    const registry = new Registry();
    new Counter({ name: "x_total", help: "a | b", registers: [registry] });
    const page = metricsPage([{ title: "Thing", served: "at /metrics", registry }]);
    assert.match(page, /^## Thing\n\nat \/metrics\n\n\| Family \| Type \| Labels \| Help \|$/m);
    assert.match(page, /^\| <code>x&#95;total<\/code> \| counter \| {3}\| a &#124; b \|$/m);
  });
});

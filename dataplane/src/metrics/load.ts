import { Gauge, type Registry } from "prom-client";
import { MODEL_LOAD_SIGNALS, POD_LOAD_SIGNALS } from "../../../lib/contract/load-signals.js";
import type { EngineLoad } from "../engines/engine.js";

/**
 * The load signals of the Gateway API Inference Extension's model-server protocol
 * (lib/contract/load-signals.ts names them): requests waiting, requests running, and KV-cache
 * usage for engines that know theirs, per model and as the pod's totals. An endpoint picker
 * scrapes them from every pod of an InferencePool and sends the next request to the least
 * loaded one (its EndpointPickerConfig names them: docs/guides/gateways.md, "Load signals").
 * Tensor models publish them too: a request is running once its engine has it; for a model
 * the data plane schedules (dataplane/src/scheduling/), waiting is what its scheduler queues
 * and running what its executions hold (ModelRegistry.loads).
 */

type ModelLoads = () => readonly { readonly name: string; readonly load: EngineLoad }[];

/** A signal's value in a model's load; undefined where its engine has none (a KV cache). */
type Reading = (load: EngineLoad) => number | undefined;

const sum = (values: readonly number[]): number => values.reduce((total, value) => total + value, 0);

const largest = (values: readonly number[]): number | undefined =>
  values.length === 0 ? undefined : Math.max(...values);

export function loadSignals(register: Registry, loads: ModelLoads): void {
  const perModel = (name: string, help: string, value: Reading): void => {
    new Gauge({
      name,
      help,
      labelNames: ["model"],
      registers: [register],
      // Read at each scrape; a model unloaded since the last one leaves no series behind.
      collect() {
        this.reset();
        for (const { name: model, load } of loads()) {
          const current = value(load);
          if (current !== undefined) this.set({ model }, current);
        }
      },
    });
  };
  /**
   * The pod's total of a signal: `total` of what the models report (a model whose engine
   * reports none adds nothing), read at each scrape like the per-model series; no series
   * while `total` says undefined. `aggregator` joins the workers' totals under --grpc-workers
   * (each worker loads every model with engines of its own).
   */
  const podTotal = (
    name: string,
    help: string,
    value: Reading,
    total: (values: readonly number[]) => number | undefined,
    aggregator: "sum" | "max",
  ): void => {
    new Gauge({
      name,
      help,
      registers: [register],
      aggregator,
      collect() {
        const values: number[] = [];
        for (const { load } of loads()) {
          const current = value(load);
          if (current !== undefined) values.push(current);
        }
        const current = total(values);
        // prom-client keeps an unlabelled gauge's series at 0 from its creation: removed, it shows none.
        if (current === undefined) this.remove({});
        else this.set(current);
      },
    });
  };
  const waiting: Reading = (load) => load.waiting;
  const running: Reading = (load) => load.running;
  const kvCacheUsage: Reading = (load) => load.kvCacheUsage;
  perModel(
    MODEL_LOAD_SIGNALS.waiting,
    "Requests the model's engine holds that wait for it (a free instance, a sequence slot): TotalQueuedRequests",
    waiting,
  );
  perModel(MODEL_LOAD_SIGNALS.running, "Requests the model's engine is executing: TotalRunningRequests", running);
  perModel(
    MODEL_LOAD_SIGNALS.kvCacheUsage,
    "Share of the model's KV cache in use, 0 to 1, for engines that keep one: KVCacheUtilization",
    kvCacheUsage,
  );
  // Waiting and running are sums, 0 while no model reports one (none loaded yet): a picker
  // scores a pod only on a series it finds, and a pod that holds no request holds none
  // waiting or running, so 0 is exact where an absent series would leave the pod unscored.
  // KV-cache usage has no such value: a pod whose models keep no KV cache has no usage to
  // report, as a model without one has no per-model series.
  podTotal(
    POD_LOAD_SIGNALS.waiting,
    "Requests waiting, summed over every model the pod serves: TotalQueuedRequests of a pod serving many models",
    waiting,
    sum,
    "sum",
  );
  podTotal(
    POD_LOAD_SIGNALS.running,
    "Requests executing, summed over every model the pod serves: TotalRunningRequests of a pod serving many models",
    running,
    sum,
    "sum",
  );
  podTotal(
    POD_LOAD_SIGNALS.kvCacheUsage,
    "The largest share of a KV cache in use, 0 to 1, among the pod's models that keep one (absent when none does): KVCacheUtilization of a pod serving many models",
    kvCacheUsage,
    largest,
    "max",
  );
}

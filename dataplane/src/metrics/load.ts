import { Gauge, type Registry } from "prom-client";
import type { EngineLoad } from "../engines/engine.js";

/**
 * The load signals of the Gateway API Inference Extension's model-server protocol, per
 * model: requests waiting, requests running, and KV-cache usage for engines that know
 * theirs. An endpoint picker scrapes them from every pod of an InferencePool and sends the
 * next request to the least loaded one (its EndpointPickerConfig names them:
 * docs/guides/gateways.md, "Load signals"). Tensor models publish them too: a request is running once its engine
 * has it; for a model the data plane schedules (dataplane/src/scheduling/), waiting is what
 * its scheduler queues and running what its executions hold (ModelRegistry.loads).
 */
const LOAD_SIGNAL_NAMES = {
  waiting: "dynamo_kserve_requests_waiting",
  running: "dynamo_kserve_requests_running",
  kvCacheUsage: "dynamo_kserve_kv_cache_usage_ratio",
} as const;

type ModelLoads = () => readonly { readonly name: string; readonly load: EngineLoad }[];

export function loadSignals(register: Registry, loads: ModelLoads): void {
  const signal = (name: string, help: string, value: (load: EngineLoad) => number | undefined): void => {
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
  signal(
    LOAD_SIGNAL_NAMES.waiting,
    "Requests the model's engine holds that wait for it (a free instance, a sequence slot): TotalQueuedRequests",
    (load) => load.waiting,
  );
  signal(
    LOAD_SIGNAL_NAMES.running,
    "Requests the model's engine is executing: TotalRunningRequests",
    (load) => load.running,
  );
  signal(
    LOAD_SIGNAL_NAMES.kvCacheUsage,
    "Share of the model's KV cache in use, 0 to 1, for engines that keep one: KVCacheUtilization",
    (load) => load.kvCacheUsage,
  );
}

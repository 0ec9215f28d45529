import { Counter, Gauge, type Registry } from "prom-client";
import type { ModelStatistics } from "../../../proto/gen/ts/grpc_service.js";

/**
 * Triton's nv_inference_* families, labelled model/version as Triton labels them, so a
 * migrating user's dashboards and alerts keep working. They are read at scrape time
 * from the statistics ModelStatistics reports: one source for both.
 */

type Source = () => readonly ModelStatistics[];

/** Requests queued and not yet executing, per served (model, version). */
type PendingSource = () => readonly { readonly name: string; readonly version: string; readonly pending: number }[];

type Reading = (statistics: ModelStatistics) => bigint;

const NS_PER_US = 1000n;

const FAMILIES: readonly { name: string; help: string; read: Reading }[] = [
  {
    name: "nv_inference_request_success",
    help: "Number of successful inference requests, all batch sizes",
    read: (s) => s.inferenceStats?.success?.count ?? 0n,
  },
  {
    name: "nv_inference_request_failure",
    help: "Number of failed inference requests, all batch sizes",
    read: (s) => s.inferenceStats?.fail?.count ?? 0n,
  },
  {
    name: "nv_inference_count",
    help: "Number of inferences performed (does not include cached requests)",
    read: (s) => s.inferenceCount,
  },
  {
    name: "nv_inference_exec_count",
    help: "Number of model executions performed (does not include cached requests)",
    read: (s) => s.executionCount,
  },
  {
    name: "nv_inference_request_duration_us",
    help: "Cumulative inference request duration in microseconds (includes cached requests)",
    read: (s) => (s.inferenceStats?.success?.ns ?? 0n) / NS_PER_US,
  },
  {
    name: "nv_inference_queue_duration_us",
    help: "Cumulative inference queuing duration in microseconds (includes cached requests)",
    read: (s) => (s.inferenceStats?.queue?.ns ?? 0n) / NS_PER_US,
  },
  {
    name: "nv_inference_compute_input_duration_us",
    help: "Cumulative compute input duration in microseconds (does not include cached requests)",
    read: (s) => (s.inferenceStats?.computeInput?.ns ?? 0n) / NS_PER_US,
  },
  {
    name: "nv_inference_compute_infer_duration_us",
    help: "Cumulative compute inference duration in microseconds (does not include cached requests)",
    read: (s) => (s.inferenceStats?.computeInfer?.ns ?? 0n) / NS_PER_US,
  },
  {
    name: "nv_inference_compute_output_duration_us",
    help: "Cumulative inference compute output duration in microseconds (does not include cached requests)",
    read: (s) => (s.inferenceStats?.computeOutput?.ns ?? 0n) / NS_PER_US,
  },
];

export function tritonMetrics(register: Registry, source: Source, pending: PendingSource): void {
  new Gauge({
    name: "nv_inference_pending_request_count",
    help: "Instantaneous number of pending requests awaiting execution per-model.",
    labelNames: ["model", "version"],
    registers: [register],
    collect() {
      this.reset();
      for (const row of pending()) this.set({ model: row.name, version: row.version }, row.pending);
    },
  });
  for (const family of FAMILIES) {
    new Counter({
      name: family.name,
      help: family.help,
      labelNames: ["model", "version"],
      registers: [register],
      collect() {
        this.reset();
        for (const statistics of source()) {
          this.inc({ model: statistics.name, version: statistics.version }, Number(family.read(statistics)));
        }
      },
    });
  }
}

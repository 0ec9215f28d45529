import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { QueueMetrics } from "./queue.js";

/**
 * The operator's Prometheus metrics, named as controller-runtime names them so existing
 * dashboards and alerts for Kubernetes controllers apply.
 */
export class OperatorMetrics {
  readonly registry = new Registry();
  readonly reconcileTotal = new Counter({
    name: "controller_runtime_reconcile_total",
    help: "Reconciliations per controller and result (success, requeue_after, error).",
    labelNames: ["controller", "result"] as const,
    registers: [this.registry],
  });
  readonly reconcileErrors = new Counter({
    name: "controller_runtime_reconcile_errors_total",
    help: "Reconciliations that failed.",
    labelNames: ["controller"] as const,
    registers: [this.registry],
  });
  readonly reconcileTime = new Histogram({
    name: "controller_runtime_reconcile_time_seconds",
    help: "Time per reconciliation.",
    labelNames: ["controller"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly apiWrites = new Counter({
    name: "dynamo_operator_api_writes_total",
    help: "Writes the operator sent to the API server, by verb and resource.",
    labelNames: ["verb", "resource"] as const,
    registers: [this.registry],
  });
  readonly eventsDropped = new Counter({
    name: "dynamo_operator_events_dropped_total",
    help: "Kubernetes Events not sent because too many were waiting (the API server was behind).",
    registers: [this.registry],
  });
  private readonly depth = new Gauge({
    name: "workqueue_depth",
    help: "Keys waiting in the work queue.",
    labelNames: ["name"] as const,
    registers: [this.registry],
  });
  private readonly adds = new Counter({
    name: "workqueue_adds_total",
    help: "Keys added to the work queue.",
    labelNames: ["name"] as const,
    registers: [this.registry],
  });
  private readonly retries = new Counter({
    name: "workqueue_retries_total",
    help: "Keys re-queued after a failure.",
    labelNames: ["name"] as const,
    registers: [this.registry],
  });

  private readonly leader = new Gauge({
    name: "leader_election_master_status",
    help: "1 while this replica holds the leader Lease (client-go's name), else 0.",
    labelNames: ["name"] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  leaderStatus(name: string): { set(value: 0 | 1): void } {
    return { set: (value) => this.leader.set({ name }, value) };
  }

  queue(name: string): QueueMetrics {
    return {
      depth: (value) => this.depth.set({ name }, value),
      added: () => this.adds.inc({ name }),
      retried: () => this.retries.inc({ name }),
    };
  }
}

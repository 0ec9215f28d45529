import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { HoldingEvents } from "./holding.js";

/**
 * The activator's metric families (its --metrics-port /metrics, in the model's ServiceMonitor):
 * what waits, how each wait ended, and how long cold starts take.
 */
export function activatorMetrics(): { registry: Registry; events: HoldingEvents } {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const held = new Gauge({
    name: "dynamo_activator_held_requests",
    help: "Requests held now, waiting for a ready data-plane pod of the model",
    registers: [registry],
  });
  const ended = new Counter({
    name: "dynamo_activator_held_requests_total",
    help: "Requests held (or refused a hold), by how the hold ended: relayed (a pod became ready), deadline (their time ran out), cancelled (their client left), refused (too many held)",
    labelNames: ["outcome"],
    registers: [registry],
  });
  const coldStart = new Histogram({
    name: "dynamo_activator_cold_start_seconds",
    help: "From the first request held while the model had no ready pod to the first ready pod",
    buckets: [1, 2, 5, 10, 20, 30, 60, 120, 300, 600],
    registers: [registry],
  });
  for (const outcome of ["relayed", "deadline", "cancelled", "refused"]) ended.labels(outcome);
  return {
    registry,
    events: {
      held: (count) => held.set(count),
      ended: (outcome) => ended.inc({ outcome }),
      coldStart: (seconds) => coldStart.observe(seconds),
    },
  };
}

import { HealthImplementation, type ServingStatus } from "grpc-health-check";
import { READINESS_SERVICE } from "../../../lib/contract/layout.js";
import type { ModelRegistry } from "../models/registry.js";

/** How often readiness is re-read: engines (e.g. an upstream going away) change it on their own. */
const REFRESH_MS = 1000;

/**
 * grpc.health.v1 for Kubernetes' native gRPC probes and grpc_health_probe: "" is the
 * process (liveness); the inference service is SERVING once the start-up loads are done
 * and while at least one model is ready (readiness, ModelRegistry.serving); each model's
 * name is a service of its own, SERVING while it is.
 * Watch streams every change. `stopping` turns everything NOT_SERVING except "".
 */
export class GrpcHealth {
  readonly implementation = new HealthImplementation({ "": "SERVING" });
  /** Last status set per service: Watch streams a status each time it is set, so only changes are. */
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly timer: NodeJS.Timeout;
  private readonly readyListeners: ((ready: boolean) => void)[] = [];

  constructor(
    private readonly registry: ModelRegistry,
    private readonly stopping: () => boolean,
  ) {
    registry.onChange(() => this.update());
    this.timer = setInterval(() => this.update(), REFRESH_MS);
    this.timer.unref();
    // Known from the start: the ports open before the start-up loads, and a readiness probe
    // meanwhile must read NOT_SERVING, not "unknown service".
    this.update();
  }

  /** True while the data plane takes inference requests. */
  ready(): boolean {
    return !this.stopping() && this.registry.serving();
  }

  update(): void {
    this.set(READINESS_SERVICE, this.ready());
    const names = new Set([...this.statuses.keys(), ...this.registry.modelNames()]);
    names.delete(READINESS_SERVICE);
    for (const name of names) this.set(name, !this.stopping() && this.registry.isReady(name, ""));
  }

  /** Calls `listener` whenever the data plane's readiness changes. */
  onReadyChange(listener: (ready: boolean) => void): void {
    this.readyListeners.push(listener);
  }

  private set(service: string, serving: boolean): void {
    const status: ServingStatus = serving ? "SERVING" : "NOT_SERVING";
    if (this.statuses.get(service) === status) return;
    this.statuses.set(service, status);
    this.implementation.setStatus(service, status);
    if (service === READINESS_SERVICE) for (const listener of this.readyListeners) listener(serving);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

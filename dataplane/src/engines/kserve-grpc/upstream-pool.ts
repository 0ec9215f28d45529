import type { Routing } from "../../../../lib/engines/kserve-grpc.js";
import { unavailable } from "../../../../lib/errors.js";
import { sequenceIdText, type SequenceId } from "../../tensors/parameters.js";
import type { EngineRuntime } from "../engine.js";
import { Endpoint, isTransportFailure, probeLive, resolveAddresses } from "./endpoints.js";
import type { UpstreamTlsMaterial } from "./h2-upstream.js";
import { SequenceAffinity } from "./sequences.js";

const RESOLVE_EVERY_MS = 30_000;

export interface UpstreamPoolSettings {
  /** The model forwarded, for messages. */
  readonly model: string;
  readonly targets: readonly string[];
  readonly routing: Routing;
  /** How long a sequence may be idle before its binding is forgotten, and how many are kept. */
  readonly sequenceIdleMs: number;
  readonly maxSequences: number;
  readonly runtime: EngineRuntime;
  /** TLS material for new connections (absent: plaintext). */
  readonly tls?: () => UpstreamTlsMaterial;
}

/**
 * The upstream servers of one forwarded model: their addresses (a DNS name stands for all
 * its addresses, resolved again every 30 s), their reused connections, their health (an
 * endpoint that fails is taken out and probed back within a second; requests try it too
 * while none is healthy), the routing policy, and which endpoint holds each open sequence.
 */
export class UpstreamPool {
  private endpoints: Endpoint[] = [];
  private resolvedAt = 0;
  private resolving: Promise<void> | undefined;
  private nextIndex = 0;
  private readonly sequences: SequenceAffinity<Endpoint>;
  private closed = false;

  constructor(private readonly settings: UpstreamPoolSettings) {
    this.sequences = new SequenceAffinity(settings.sequenceIdleMs, settings.maxSequences);
  }

  /** Ready while some endpoint is healthy (or none has been tried yet). */
  ready(): boolean {
    void this.refresh();
    return this.endpoints.length === 0 || this.endpoints.some((endpoint) => endpoint.healthy);
  }

  get size(): number {
    return this.endpoints.length;
  }

  /** Whether a request refused by one endpoint may be tried on another. */
  hasHealthy(): boolean {
    return this.endpoints.some((endpoint) => endpoint.healthy);
  }

  /** The endpoint for a request: the sequence's own, else one chosen by the routing policy (which the sequence then keeps). */
  pick(sequence: SequenceId | undefined): Endpoint {
    if (sequence !== undefined) {
      const bound = this.sequences.get(sequence);
      if (bound !== undefined) {
        if (!bound.available) {
          throw unavailable(
            `model '${this.settings.model}': sequence ${sequenceIdText(sequence)} is bound to upstream ${bound.address}, which is unavailable (${bound.lastError})`,
          );
        }
        return bound;
      }
    }
    // With none healthy, those known down are tried by the request itself (Endpoint.available).
    const healthy = this.endpoints.filter((endpoint) => endpoint.healthy);
    const candidates = healthy.length > 0 ? healthy : this.endpoints.filter((endpoint) => endpoint.available);
    if (candidates.length === 0) {
      const reasons = this.endpoints.map((endpoint) => `${endpoint.address}: ${endpoint.lastError || "unreachable"}`);
      throw unavailable(
        `model '${this.settings.model}': no healthy upstream (${reasons.join("; ") || this.settings.targets.join(", ")})`,
      );
    }
    let chosen: Endpoint;
    if (this.settings.routing === "least_outstanding") {
      chosen = candidates.reduce((best, candidate) => (candidate.outstanding < best.outstanding ? candidate : best));
    } else {
      chosen = candidates[this.nextIndex % candidates.length]!;
      this.nextIndex++;
    }
    if (sequence !== undefined) this.sequences.bind(sequence, chosen);
    return chosen;
  }

  endSequence(sequence: SequenceId): void {
    this.sequences.end(sequence);
  }

  /** A failed call: a transport failure takes the endpoint out until a probe finds it live. Returns whether it was one. */
  failed(endpoint: Endpoint, error: { readonly code: number; readonly details: string }): boolean {
    if (!isTransportFailure(error)) return false;
    endpoint.markFailed(error.details, probeLive);
    return true;
  }

  /** A call reached the endpoint: it is healthy (again). */
  succeeded(endpoint: Endpoint): void {
    if (!endpoint.healthy) endpoint.markHealthy();
  }

  /** Resolves the upstream addresses on first use and every 30 s (or when all are down). */
  refresh(): Promise<void> {
    const stale = Date.now() - this.resolvedAt > RESOLVE_EVERY_MS;
    const allDown = this.endpoints.length > 0 && this.endpoints.every((endpoint) => !endpoint.healthy);
    if (this.closed || this.resolving !== undefined || (this.endpoints.length > 0 && !stale && !allDown)) {
      return this.resolving ?? Promise.resolve();
    }
    this.resolving = resolveAddresses(this.settings.targets, undefined, this.endpoints)
      .then((addresses) => {
        // Closed while resolving: no new endpoints (nothing would close them).
        if (this.closed) return;
        const current = new Set(addresses.map(({ address }) => address));
        const kept = this.endpoints.filter((endpoint) => current.has(endpoint.address));
        for (const endpoint of this.endpoints) if (!kept.includes(endpoint)) endpoint.close();
        const known = new Set(kept.map((endpoint) => endpoint.address));
        const added = addresses.filter(({ address }) => !known.has(address));
        this.endpoints = [...kept, ...added.map(({ address, target }) => new Endpoint(address, this.settings, target))];
        this.resolvedAt = Date.now();
      })
      .finally(() => (this.resolving = undefined));
    return this.resolving;
  }

  close(): void {
    this.closed = true;
    for (const endpoint of this.endpoints) endpoint.close();
  }
}

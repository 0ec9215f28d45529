import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { connectivityState, credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { unaryCall } from "../../../../lib/grpc/unary-call.js";
import { GRPCInferenceServiceClient, type ServerLiveResponse } from "../../../../proto/gen/ts/grpc_service.js";
import type { EngineRuntime } from "../engine.js";

/**
 * How soon an upstream that went down is tried again: probes after 250 ms, 500 ms, then
 * every second, on a channel whose own reconnect back-off is as short. (A 30 s cap on
 * the probes and grpc-js's default back-off, up to 120 s, kept a restarted upstream
 * unused for 20-60 s after it was back.)
 */
const PROBE_FIRST_MS = 250;
const PROBE_EVERY_MS = 1000;
const CHANNEL_BACKOFF = {
  "grpc.initial_reconnect_backoff_ms": PROBE_FIRST_MS,
  "grpc.max_reconnect_backoff_ms": PROBE_EVERY_MS,
};

/** One upstream server address with its reused channel and what we know of its health. */
export class Endpoint {
  readonly client: GRPCInferenceServiceClient;
  outstanding = 0;
  healthy = true;
  lastError = "";
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly address: string,
    runtime: EngineRuntime,
  ) {
    this.client = new GRPCInferenceServiceClient(address, credentials.createInsecure(), {
      "grpc.max_receive_message_length": runtime.maxMessageSize,
      "grpc.max_send_message_length": runtime.maxMessageSize,
      ...CHANNEL_BACKOFF,
      ...(runtime.upstreamFlowControlWindow === undefined
        ? {}
        : { "grpc-node.flow_control_window": runtime.upstreamFlowControlWindow }),
    });
  }

  /**
   * Whether a request may go here: a healthy endpoint, or one known down whose channel is
   * not in the middle of a connection attempt — the request then tries it, a probe of its
   * own, rather than being refused until the next probe. (Mid-attempt, to an address that
   * never answers, it would wait out gRPC's 20 s connect timeout.)
   */
  get available(): boolean {
    return this.healthy || this.client.getChannel().getConnectivityState(false) !== connectivityState.CONNECTING;
  }

  /** Takes the endpoint out after a transport failure and probes it back, soon and then every second. */
  markFailed(error: string, probe: (endpoint: Endpoint) => Promise<boolean>): void {
    this.healthy = false;
    this.lastError = error;
    if (this.retryTimer !== undefined) return;
    const delay = Math.min(PROBE_EVERY_MS, PROBE_FIRST_MS * 2 ** this.failures);
    this.failures++;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void probe(this).then((ok) => (ok ? this.markHealthy() : this.markFailed(this.lastError, probe)));
    }, delay);
    this.retryTimer.unref();
  }

  /** A probe or a request reached it. */
  markHealthy(): void {
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.healthy = true;
    this.failures = 0;
    this.lastError = "";
  }

  close(): void {
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.client.close();
  }
}

/** Upstream errors that mean the endpoint itself is unreachable (not that a request was bad). */
export function isTransportFailure(error: ServiceError): boolean {
  return (
    error.code === status.UNAVAILABLE || (error.code === status.DEADLINE_EXCEEDED && error.details.includes("connect"))
  );
}

/** ServerLive on an endpoint, with a short deadline: the health probe. */
export function probeLive(endpoint: Endpoint, timeoutMs = 1000): Promise<boolean> {
  return unaryCall<ServerLiveResponse>(
    (options, done) => endpoint.client.serverLive({}, new Metadata(), options, done),
    { deadline: Date.now() + timeoutMs },
  ).then(
    (reply) => reply.live,
    () => false,
  );
}

/**
 * Expands `host:port` entries into addresses: an IP stays as it is; a DNS name becomes
 * one address per A/AAAA record (a headless Service resolves to every pod).
 */
export type HostLookup = (host: string) => Promise<readonly { address: string; family: number }[]>;

const systemLookup: HostLookup = (host) => lookup(host, { all: true });

export async function resolveAddresses(
  targets: readonly string[],
  lookupHost: HostLookup = systemLookup,
): Promise<string[]> {
  const addresses: string[] = [];
  for (const target of targets) {
    const separator = target.lastIndexOf(":");
    const host = target.slice(0, separator).replace(/^\[|\]$/g, "");
    const port = target.slice(separator + 1);
    if (isIP(host) !== 0) {
      addresses.push(target);
      continue;
    }
    const records = await lookupHost(host).catch(() => []);
    if (records.length === 0) addresses.push(target);
    for (const record of records) {
      addresses.push(record.family === 6 ? `[${record.address}]:${port}` : `${record.address}:${port}`);
    }
  }
  return [...new Set(addresses)];
}

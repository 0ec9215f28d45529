import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { unaryCall } from "../../../../lib/grpc/unary-call.js";
import { GRPCInferenceServiceClient, type ServerLiveResponse } from "../../../../proto/gen/ts/grpc_service.js";
import type { EngineRuntime } from "../engine.js";

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
      ...(runtime.upstreamFlowControlWindow === undefined
        ? {}
        : { "grpc-node.flow_control_window": runtime.upstreamFlowControlWindow }),
    });
  }

  /** Takes the endpoint out after a transport failure and probes it back with exponential backoff. */
  markFailed(error: string, probe: (endpoint: Endpoint) => Promise<boolean>): void {
    this.healthy = false;
    this.lastError = error;
    if (this.retryTimer !== undefined) return;
    const delay = Math.min(30_000, 250 * 2 ** this.failures);
    this.failures++;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void probe(this).then((ok) => (ok ? this.markHealthy() : this.markFailed(this.lastError, probe)));
    }, delay);
    this.retryTimer.unref();
  }

  markHealthy(): void {
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

import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { credentials, status, type ChannelCredentials, type ChannelOptions } from "@grpc/grpc-js";
import {
  GRPCInferenceServiceClient,
  GRPCInferenceServiceService,
  ServerLiveResponse,
} from "../../../../proto/gen/ts/grpc_service.js";
import type { EngineRuntime } from "../engine.js";
import { certificateName, H2Upstream, type UpstreamTlsMaterial } from "./h2-upstream.js";

/**
 * How soon an upstream that went down is tried again: probes after 250 ms, 500 ms, then
 * every second, on a describe channel whose own reconnect back-off is as short. (A 30 s cap
 * on the probes and grpc-js's default back-off, up to 120 s, kept a restarted upstream
 * unused for 20-60 s after it was back.)
 */
const PROBE_FIRST_MS = 250;
const PROBE_EVERY_MS = 1000;
const CHANNEL_BACKOFF = {
  "grpc.initial_reconnect_backoff_ms": PROBE_FIRST_MS,
  "grpc.max_reconnect_backoff_ms": PROBE_EVERY_MS,
};

/** How an endpoint's connections are made: the process-wide limits and, for TLS upstreams, the current material. */
export interface EndpointSettings {
  readonly runtime: EngineRuntime;
  /** Absent: plaintext HTTP/2. */
  readonly tls?: () => UpstreamTlsMaterial;
}

/**
 * One upstream server address: its HTTP/2 sessions for requests (h2-upstream.ts), a grpc-js
 * client for the rare describe calls (made when first needed), and what we know of its health.
 */
export class Endpoint {
  readonly upstream: H2Upstream;
  outstanding = 0;
  healthy = true;
  lastError = "";
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private describeClient: { client: GRPCInferenceServiceClient; tls: UpstreamTlsMaterial | undefined } | undefined;

  /**
   * @param address where to connect (an IP address and port, or a name that did not resolve)
   * @param target the `upstream` entry it came from (host:port): the name the upstream's TLS
   *   certificate carries and `:authority`, as grpc-js's client sends its target's name
   */
  constructor(
    readonly address: string,
    private readonly settings: EndpointSettings,
    readonly target: string = address,
  ) {
    const { runtime, tls } = settings;
    this.upstream = new H2Upstream({
      address,
      authority: target,
      maxMessageSize: runtime.maxMessageSize,
      ...(runtime.upstreamFlowControlWindow === undefined
        ? {}
        : { flowControlWindow: runtime.upstreamFlowControlWindow }),
      ...(tls === undefined ? {} : { tls }),
    });
  }

  /** The grpc-js client for ModelMetadata, ModelConfig and ModelReady; made again when the TLS files changed. */
  get client(): GRPCInferenceServiceClient {
    const tls = this.settings.tls?.();
    if (this.describeClient !== undefined && this.describeClient.tls === tls) return this.describeClient.client;
    this.describeClient?.client.close();
    const { runtime } = this.settings;
    const serverName = tls === undefined ? undefined : (tls.serverName ?? certificateName(this.target));
    const options: ChannelOptions = {
      "grpc.max_receive_message_length": runtime.maxMessageSize,
      "grpc.max_send_message_length": runtime.maxMessageSize,
      ...CHANNEL_BACKOFF,
      ...(serverName === undefined
        ? {}
        : { "grpc.ssl_target_name_override": serverName, "grpc.default_authority": tls?.serverName ?? this.target }),
    };
    const client = new GRPCInferenceServiceClient(this.address, channelCredentials(tls), options);
    this.describeClient = { client, tls };
    return client;
  }

  /**
   * Whether a request may go here: a healthy endpoint, or one known down that is not in
   * the middle of a connection attempt — the request then tries it, a probe of its own,
   * rather than being refused until the next probe. (Mid-attempt, to an address that never
   * answers, it would wait out the 20 s connect bound.)
   */
  get available(): boolean {
    return this.healthy || !this.upstream.connecting;
  }

  /** Takes the endpoint out after a transport failure and probes it back, soon and then every second. */
  markFailed(error: string, probe: (endpoint: Endpoint) => Promise<boolean>): void {
    this.healthy = false;
    this.lastError = error;
    // Closed (model unloaded, address gone from DNS): a probe that was in flight ends here,
    // else it would go on every second for the life of the process, holding the engine.
    if (this.retryTimer !== undefined || this.closed) return;
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
    this.closed = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.upstream.close();
    this.describeClient?.client.close();
  }
}

function channelCredentials(tls: UpstreamTlsMaterial | undefined): ChannelCredentials {
  if (tls === undefined) return credentials.createInsecure();
  return credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null);
}

/** Upstream answers that mean the endpoint itself is unreachable (not that a request was bad). */
export function isTransportFailure(error: { readonly code: number; readonly details: string }): boolean {
  return (
    error.code === status.UNAVAILABLE || (error.code === status.DEADLINE_EXCEEDED && error.details.includes("connect"))
  );
}

const SERVER_LIVE_PATH = GRPCInferenceServiceService.serverLive.path;
const EMPTY_REQUEST = new Uint8Array(0);

/** ServerLive on an endpoint's own HTTP/2 sessions (the connection requests use), with a short deadline: the health probe. */
export function probeLive(endpoint: Endpoint, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    let live = false;
    endpoint.upstream.call(
      {
        path: SERVER_LIVE_PATH,
        message: EMPTY_REQUEST,
        unary: true,
        deadline: Date.now() + timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
        metadata: [],
        traceHeaders: {},
      },
      {
        metadata: () => undefined,
        message: (bytes) => (live = ServerLiveResponse.decode(bytes).live),
        end: (end) => resolve(end.code === status.OK && live),
      },
    );
  });
}

/** One address to connect to, and the `upstream` entry (host:port) it came from. */
export interface UpstreamAddress {
  readonly address: string;
  readonly target: string;
}

/**
 * Expands `host:port` entries into addresses: an IP stays as it is; a DNS name becomes
 * one address per A/AAAA record (a headless Service resolves to every pod). A name whose
 * lookup fails keeps its `previous` addresses (a DNS blip would otherwise fold every pod
 * into the one name for the 30 s until the next lookup, closing their connections), or,
 * with none, stands for itself (so errors name it).
 */
export type HostLookup = (host: string) => Promise<readonly { address: string; family: number }[]>;

const systemLookup: HostLookup = (host) => lookup(host, { all: true });

export async function resolveAddresses(
  targets: readonly string[],
  lookupHost: HostLookup = systemLookup,
  previous: readonly UpstreamAddress[] = [],
): Promise<UpstreamAddress[]> {
  const resolved = new Map<string, UpstreamAddress>();
  const add = (address: string, target: string): void => {
    if (!resolved.has(address)) resolved.set(address, { address, target });
  };
  for (const target of targets) {
    const separator = target.lastIndexOf(":");
    const host = target.slice(0, separator).replace(/^\[|\]$/g, "");
    const port = target.slice(separator + 1);
    if (isIP(host) !== 0) {
      add(target, target);
      continue;
    }
    const records = await lookupHost(host).catch(() => []);
    const known = records.length === 0 ? previous.filter((one) => one.target === target) : [];
    for (const one of known) add(one.address, target);
    if (records.length === 0 && known.length === 0) add(target, target);
    for (const record of records) {
      add(record.family === 6 ? `[${record.address}]:${port}` : `${record.address}:${port}`, target);
    }
  }
  return [...resolved.values()];
}

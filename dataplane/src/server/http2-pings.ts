import { constants, type Http2Session, type Http2Server, type ServerHttp2Stream } from "node:http2";
import type { Server } from "@grpc/grpc-js";

/**
 * HTTP/2 PINGs both ways on the gRPC server's connections, as a gRPC (core) server — Triton —
 * handles them, where grpc-js has only a plain keepalive timer and polices nothing:
 *   - the server's keepalive pings: `grpc.keepalive_time_ms` / `grpc.keepalive_timeout_ms`,
 *     shaped by `grpc.http2.max_pings_without_data` and `grpc.http2.min_time_between_pings_ms`;
 *   - the client's pings: `grpc.keepalive_permit_without_calls`,
 *     `grpc.http2.min_ping_interval_without_data_ms` and `grpc.http2.max_ping_strikes`.
 * "Data" is approximated by calls: a call starting (headers in) or ending (trailers out)
 * counts as data sent; reading every DATA frame would cost every call for this.
 */

/** The keepalive pings the server sends. */
export interface KeepalivePolicy {
  /** A ping after this long without one. */
  readonly timeMs: number;
  /** No answer this fast and the connection is dropped. */
  readonly timeoutMs: number;
  /** Pings sent with no data between them before the server waits for data; 0: no limit. */
  readonly maxPingsWithoutData: number;
  /** The shortest gap between two pings the server sends. */
  readonly minTimeBetweenPingsMs: number;
}

/** How often a client may ping. */
export interface ClientPingPolicy {
  /** Pings on a connection with no call open are fine (else one per 2 hours is). */
  readonly permitWithoutCalls: boolean;
  /** The shortest gap between two pings with no call started or finished between them. */
  readonly minIntervalWithoutDataMs: number;
  /** Pings that come too soon tolerated; one more and the connection gets GOAWAY. */
  readonly maxStrikes: number;
}

export interface PingPolicies {
  readonly keepalive?: KeepalivePolicy;
  readonly clientPings?: ClientPingPolicy;
}

/** gRPC core's interval for pings on an idle connection when they are not permitted. */
const IDLE_PING_INTERVAL_MS = 2 * 60 * 60 * 1000;

/** The GOAWAY debug data gRPC clients look for: grpc-js and gRPC core double their keepalive time on it. */
const TOO_MANY_PINGS = Buffer.from("too_many_pings");

/**
 * Applies `policies` to every connection `server` accepts from now on. grpc-js has no public
 * hook for its HTTP/2 sessions; its map of HTTP/2 servers (one per bound address) is the one
 * place they show, so this reads it and fails loudly if a grpc-js upgrade moves it.
 */
export function applyPingPolicies(server: Server, policies: PingPolicies): void {
  if (policies.keepalive === undefined && policies.clientPings === undefined) return;
  const http2Servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(http2Servers instanceof Map) || http2Servers.size === 0) {
    throw new Error("the HTTP/2 ping policies need grpc-js's HTTP/2 servers (Server.http2Servers); grpc-js changed");
  }
  for (const http2Server of http2Servers.keys() as Iterable<Http2Server>) {
    http2Server.on("session", (session: Http2Session) => watchSession(session, policies));
  }
}

function watchSession(session: Http2Session, { keepalive, clientPings }: PingPolicies): void {
  const calls = new CallActivity(session);
  if (keepalive !== undefined) sendKeepalives(session, keepalive, calls);
  if (clientPings !== undefined) policeClientPings(session, clientPings, calls);
}

/** Open calls on a session, and a signal each time one starts or ends (data went out). */
class CallActivity {
  open = 0;
  private readonly listeners: (() => void)[] = [];

  constructor(session: Http2Session) {
    session.on("stream", (stream: ServerHttp2Stream) => {
      this.open++;
      this.changed();
      stream.once("close", () => {
        this.open--;
        this.changed();
      });
    });
  }

  onData(listener: () => void): void {
    this.listeners.push(listener);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

function sendKeepalives(session: Http2Session, policy: KeepalivePolicy, calls: CallActivity): void {
  let timer: NodeJS.Timeout | undefined;
  let pingsWithoutData = 0;
  let lastSentAt = Number.NEGATIVE_INFINITY;
  const schedule = (delayMs: number): void => {
    clearTimeout(timer);
    timer = setTimeout(ping, delayMs).unref();
  };
  const ping = (): void => {
    if (session.closed || session.destroyed) return;
    // Out of pings until data flows again: the next call starting or ending re-arms the timer.
    if (policy.maxPingsWithoutData > 0 && pingsWithoutData >= policy.maxPingsWithoutData) return;
    const wait = lastSentAt + policy.minTimeBetweenPingsMs - performance.now();
    if (wait > 0) return schedule(wait);
    lastSentAt = performance.now();
    pingsWithoutData++;
    const unanswered = setTimeout(() => session.destroy(), policy.timeoutMs).unref();
    const sent = session.ping((error) => {
      clearTimeout(unanswered);
      if (error !== null) session.destroy();
      else schedule(policy.timeMs);
    });
    if (!sent) {
      clearTimeout(unanswered);
      session.destroy();
    }
  };
  calls.onData(() => {
    const wasHeld = policy.maxPingsWithoutData > 0 && pingsWithoutData >= policy.maxPingsWithoutData;
    pingsWithoutData = 0;
    if (wasHeld) schedule(policy.timeMs);
  });
  session.once("close", () => clearTimeout(timer));
  schedule(policy.timeMs);
}

/**
 * Counts a strike for each ping that comes sooner than the policy allows, as gRPC core's
 * ping-abuse policy does; pings while a call is open are not counted.
 */
function policeClientPings(session: Http2Session, policy: ClientPingPolicy, calls: CallActivity): void {
  let lastPingAt = Number.NEGATIVE_INFINITY;
  let strikes = 0;
  calls.onData(() => {
    lastPingAt = Number.NEGATIVE_INFINITY;
    strikes = 0;
  });
  session.on("ping", () => {
    if (calls.open > 0) return;
    const now = performance.now();
    const allowedGap = policy.permitWithoutCalls ? policy.minIntervalWithoutDataMs : IDLE_PING_INTERVAL_MS;
    const tooSoon = now - lastPingAt < allowedGap;
    lastPingAt = now;
    if (!tooSoon) return;
    strikes++;
    if (strikes > policy.maxStrikes && !session.closed) {
      session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, TOO_MANY_PINGS);
      session.close();
    }
  });
}

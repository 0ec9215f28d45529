import { constants, type Http2Session, type Http2Server, type ServerHttp2Stream } from "node:http2";
import type { Server } from "@grpc/grpc-js";

/**
 * How often a client may send HTTP/2 PINGs, as a gRPC (core) server enforces it with
 * `grpc.keepalive_permit_without_calls`, `grpc.http2.min_ping_interval_without_data_ms` and
 * `grpc.http2.max_ping_strikes` — Triton's `--grpc-keepalive-permit-without-calls`,
 * `--grpc-http2-min-recv-ping-interval-without-data` and `--grpc-http2-max-ping-strikes`.
 * grpc-js answers every ping and enforces none of this, so a client configured for Triton
 * would not learn here that it pings too often.
 */
export interface ClientPingPolicy {
  /** Pings on a connection with no call open are fine (else one per 2 hours is). */
  readonly permitWithoutCalls: boolean;
  /** The shortest gap between two pings with no call started or finished between them. */
  readonly minIntervalWithoutDataMs: number;
  /** Pings that come too soon tolerated; one more and the connection gets GOAWAY. 0: never. */
  readonly maxStrikes: number;
}

/** gRPC core's interval for pings on an idle connection when they are not permitted. */
const IDLE_PING_INTERVAL_MS = 2 * 60 * 60 * 1000;

/** The GOAWAY debug data gRPC clients look for: grpc-js and gRPC core double their keepalive time on it. */
const TOO_MANY_PINGS = Buffer.from("too_many_pings");

/**
 * Enforces `policy` on every connection `server` accepts from now on. grpc-js has no public
 * hook for its HTTP/2 sessions; its map of HTTP/2 servers (one per bound address) is the one
 * place they show, so this reads it and fails loudly if a grpc-js upgrade moves it.
 */
export function enforceClientPingPolicy(server: Server, policy: ClientPingPolicy): void {
  const http2Servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(http2Servers instanceof Map) || http2Servers.size === 0) {
    throw new Error("the client ping policy needs grpc-js's HTTP/2 servers (Server.http2Servers); grpc-js changed");
  }
  for (const http2Server of http2Servers.keys() as Iterable<Http2Server>) {
    http2Server.on("session", (session: Http2Session) => watchPings(session, policy));
  }
}

/**
 * Counts a strike for each ping that comes sooner than the policy allows, as gRPC core's
 * ping-abuse policy does. Core forgets strikes whenever it sends headers or data; a call
 * starting or ending (headers out, trailers out) stands in for that here, and pings while a
 * call is open are not counted: reading every DATA frame would cost every call for this.
 */
function watchPings(session: Http2Session, policy: ClientPingPolicy): void {
  let openCalls = 0;
  let lastPingAt = Number.NEGATIVE_INFINITY;
  let strikes = 0;
  const forget = (): void => {
    lastPingAt = Number.NEGATIVE_INFINITY;
    strikes = 0;
  };
  session.on("stream", (stream: ServerHttp2Stream) => {
    openCalls++;
    forget();
    stream.once("close", () => {
      openCalls--;
      forget();
    });
  });
  session.on("ping", () => {
    if (openCalls > 0) return;
    const now = performance.now();
    const allowedGap = policy.permitWithoutCalls ? policy.minIntervalWithoutDataMs : IDLE_PING_INTERVAL_MS;
    const tooSoon = now - lastPingAt < allowedGap;
    lastPingAt = now;
    if (!tooSoon) return;
    strikes++;
    if (policy.maxStrikes !== 0 && strikes > policy.maxStrikes && !session.closed) {
      session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, TOO_MANY_PINGS);
      session.close();
    }
  });
}

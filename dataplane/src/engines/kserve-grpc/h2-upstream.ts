import { status } from "@grpc/grpc-js";
import {
  connect,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type SecureClientSessionOptions,
} from "node:http2";
import { isIP } from "node:net";
import { DEFAULT_CONNECTION_WINDOW } from "../../../../lib/contract/dataplane.js";
import { abortedError, errorMessage } from "../../../../lib/errors.js";
import { GRPC_CODE_OF } from "../../../../lib/grpc/status-codes.js";
import type { ForwardCall, ForwardMetadataEntry, ForwardStatus } from "../engine.js";
import {
  addMetadataHeaders,
  decodeGrpcMessage,
  FrameError,
  grpcTimeout,
  H2_CODE,
  MessageReader,
  metadataOf,
  statusOfHttp,
  statusOfReset,
  writeMessage,
} from "../../../../lib/grpc/frames.js";

/**
 * The upstream client of the kserve-grpc engine: one `node:http2` stream per request on a
 * few pooled sessions per endpoint, the gRPC framing of lib/grpc/frames.ts, nothing more.
 *
 * Why not grpc-js's client: measured on the forwarding path (design/issue-39.md §0.1-0.2,
 * 1 KiB ModelInfer at concurrency 64), the grpc-js client call was about 30 % of the data
 * plane's CPU (its call stack, load-balancing and resolving layers, header building), and
 * a grpc-js server that sent the bytes on a raw `node:http2` stream instead ran as fast as
 * a bare HTTP/2 proxy (5,648 vs 5,625 req/s), where the same server with a grpc-js client
 * managed 3,828. grpc-js stays the server and the describe calls' client; requests take this.
 */

/** TLS to an upstream: the PEM files' current contents (the engine rereads them as they change). */
export interface UpstreamTlsMaterial {
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  /** SNI and `:authority`; default: the endpoint's host. */
  readonly serverName?: string;
}

export interface H2UpstreamOptions {
  /** host:port to connect to */
  readonly address: string;
  /** The name it is known by (host:port; default: `address`): `:authority`, and the TLS name to check when it is a DNS name. */
  readonly authority?: string;
  /** Largest upstream message accepted; checked on each message's length prefix. */
  readonly maxMessageSize: number;
  /** HTTP/2 receive window per stream, in bytes (unset: node's 64 KiB); the session's is at least the server's default. */
  readonly flowControlWindow?: number;
  /** TLS for new sessions, read when one opens (absent: plaintext HTTP/2). */
  readonly tls?: () => UpstreamTlsMaterial;
  /** How long a new connection may take, up to the peer's SETTINGS (default 20 s). */
  readonly connectTimeoutMs?: number;
  /** Streams one session carries before new ones go on another (default STREAMS_PER_SESSION). */
  readonly streamsPerSession?: number;
}

/** One gRPC call to send. */
export interface UpstreamRequest {
  readonly path: string;
  /** The request message (no frame header), sent as it is. */
  readonly message: Uint8Array;
  /** A unary method: exactly one reply (a second, or an OK end without one, is the upstream's fault). */
  readonly unary: boolean;
  /** ms since the epoch; Infinity for none. Sent as `grpc-timeout`. */
  readonly deadline: number;
  /** Aborting resets the stream (RST_STREAM CANCEL). */
  readonly signal?: AbortSignal;
  /** The client's custom metadata; reserved names are dropped here whatever the caller passed. */
  readonly metadata: readonly ForwardMetadataEntry[];
  /** Trace context headers (they win over a client's metadata of the same name). */
  readonly traceHeaders: Readonly<Record<string, string>>;
}

/** How a call ended: the status a client gets, and what it says of the endpoint. */
export interface UpstreamEnd extends ForwardStatus {
  /** Nothing came back (no response headers): the request never ran and may go to another endpoint. */
  readonly refused: boolean;
  /** The endpoint itself failed (connection refused or lost): take it out until a probe finds it. */
  readonly transport: boolean;
  /**
   * The upstream's connection is going away (REFUSED_STREAM, a GOAWAY below our stream): a
   * healthy endpoint draining a connection; the request may go again, to it too (on a new one).
   */
  readonly drained: boolean;
}

export interface UpstreamHandlers {
  metadata(entries: readonly ForwardMetadataEntry[]): void;
  message(bytes: Uint8Array): void;
  /** Exactly once, last. */
  end(end: UpstreamEnd): void;
}

/** How long a new connection may take before the endpoint counts as unreachable (grpc-js's own bound). */
const CONNECT_TIMEOUT_MS = 20_000;
/**
 * Most sessions to one endpoint: more than one only when its peer limits concurrent streams
 * (SETTINGS_MAX_CONCURRENT_STREAMS); a limit of 1 (or 0) must not become a connection per request.
 */
const MAX_SESSIONS = 8;
/**
 * Streams a session carries in its life. Client stream ids are odd and end at 2^31 - 1, so a
 * session has about 2^30 of them; at 5,000 requests/s that is 2.5 days, after which node
 * destroys the session (ERR_HTTP2_OUT_OF_STREAMS), failing every call on it. Before that, new
 * streams go on a new session and the old one closes once its own are done.
 */
const STREAMS_PER_SESSION = 1_000_000_000;
const NO_METADATA: readonly ForwardMetadataEntry[] = [];
const UNAVAILABLE: number = status.UNAVAILABLE;
const OK: number = status.OK;
const INTERNAL: number = status.INTERNAL;

/** A session and how many of our streams it carries. */
interface PooledSession {
  readonly session: ClientHttp2Session;
  open: number;
  /** Streams it has carried in all. */
  opened: number;
  /** False once it is going away (GOAWAY, error, close, stream ids running out): no new streams. */
  usable: boolean;
  /** Its peer's SETTINGS arrived. */
  settled: boolean;
}

export class H2Upstream {
  private readonly sessions: PooledSession[] = [];
  private readonly authority: string;
  /**
   * The peer's limit on concurrent streams as its last SETTINGS gave it: a new session
   * keeps to it before its own SETTINGS arrive (streams sent over the limit are refused).
   */
  private peerMaxStreams = Number.POSITIVE_INFINITY;
  private closed = false;

  constructor(private readonly options: H2UpstreamOptions) {
    this.authority = options.authority ?? options.address;
  }

  /** Whether a session to the endpoint is being opened right now. */
  get connecting(): boolean {
    return this.sessions.some(({ session }) => session.connecting);
  }

  /** Sends one request; what comes back goes to `handlers`. */
  call(request: UpstreamRequest, handlers: UpstreamHandlers): ForwardCall {
    return new UpstreamStream(this, request, handlers);
  }

  /**
   * A stream on a session with room for it: a new session when every one is at its peer's
   * limit, up to MAX_SESSIONS; past that, the least busy one, where the stream waits (in
   * nghttp2) for one of its streams to end, as all of them would on grpc-js's one connection.
   */
  openStream(headers: OutgoingHttpHeaders): { stream: ClientHttp2Stream; pooled: PooledSession } {
    if (this.closed) throw new Error("the engine is closed");
    const pooled = this.sessions.find((one) => this.hasRoom(one)) ?? this.leastBusy() ?? this.connect();
    const stream = pooled.session.request(headers, { endStream: false });
    if (pooled.open++ === 0) pooled.session.ref();
    if (++pooled.opened >= (this.options.streamsPerSession ?? STREAMS_PER_SESSION)) this.retire(pooled);
    stream.once("close", () => {
      if (--pooled.open > 0 || pooled.session.destroyed) return;
      // Idle: it never holds the process; out of the pool, it closes (closed at once, streams
      // not yet sent on it would be refused).
      if (pooled.usable) pooled.session.unref();
      else if (!pooled.session.closed) pooled.session.close();
    });
    return { stream, pooled };
  }

  /** The headers every call sends, then the call's own. */
  requestHeaders(path: string): OutgoingHttpHeaders {
    return {
      [constants.HTTP2_HEADER_METHOD]: "POST",
      [constants.HTTP2_HEADER_PATH]: path,
      [constants.HTTP2_HEADER_AUTHORITY]: this.options.tls?.().serverName ?? this.authority,
      [constants.HTTP2_HEADER_CONTENT_TYPE]: "application/grpc",
      [constants.HTTP2_HEADER_TE]: "trailers",
      "grpc-accept-encoding": "identity",
    };
  }

  get maxMessageSize(): number {
    return this.options.maxMessageSize;
  }

  get address(): string {
    return this.options.address;
  }

  /** No new streams; open ones finish, then the sessions close. */
  close(): void {
    this.closed = true;
    for (const pooled of this.sessions.splice(0)) {
      pooled.usable = false;
      if (!pooled.session.closed) pooled.session.close();
    }
  }

  /** No new streams on this session (it is out of the pool); those open on it finish. */
  private retire(pooled: PooledSession): void {
    pooled.usable = false;
    const index = this.sessions.indexOf(pooled);
    if (index >= 0) this.sessions.splice(index, 1);
  }

  /** At MAX_SESSIONS (all full): the usable session with the fewest streams; undefined below it. */
  private leastBusy(): PooledSession | undefined {
    const usable = this.sessions.filter((one) => this.isUsable(one));
    if (usable.length < MAX_SESSIONS) return undefined;
    return usable.reduce((best, one) => (one.open < best.open ? one : best));
  }

  private isUsable(pooled: PooledSession): boolean {
    return pooled.usable && !pooled.session.closed && !pooled.session.destroyed;
  }

  /** Whether a new stream may go on this session: open, not going away, under its peer's limit. */
  private hasRoom(pooled: PooledSession): boolean {
    return this.isUsable(pooled) && pooled.open < this.maxStreams(pooled);
  }

  /** The peer's limit on this session's concurrent streams (until its SETTINGS come: the last one seen). */
  private maxStreams(pooled: PooledSession): number {
    return pooled.settled ? (pooled.session.remoteSettings.maxConcurrentStreams ?? Infinity) : this.peerMaxStreams;
  }

  private connect(): PooledSession {
    const tls = this.options.tls?.();
    const window = this.options.flowControlWindow;
    // No server push (gRPC has none): node's client accepts pushed streams and buffers their
    // DATA whether read or not, past any window (200 pushes of 1 MiB: 200 MiB held).
    const settings = window === undefined ? { enablePush: false } : { enablePush: false, initialWindowSize: window };
    // No session memory bound of node's own (10 MB by default, past which it resets streams
    // with ENHANCE_YOUR_CALM: four 16 MiB requests at once): what a session holds is bounded by
    // the message size limit and flow control, as with grpc-js's client, which does the same.
    const options: SecureClientSessionOptions = { settings, maxSessionMemory: Number.MAX_SAFE_INTEGER };
    if (tls !== undefined) {
      Object.assign(options, { ca: tls.ca, cert: tls.cert, key: tls.key, ALPNProtocols: ["h2"] });
      // The name the certificate must carry: the configured one, else the DNS name the
      // address was resolved from (checked against the IP we connect to, a name never matches).
      const serverName = tls.serverName ?? certificateName(this.authority);
      if (serverName !== undefined) options.servername = serverName;
    }
    const session = connect(`${tls === undefined ? "http" : "https"}://${this.options.address}`, options);
    const pooled: PooledSession = { session, open: 0, opened: 0, usable: true, settled: false };
    session.once("remoteSettings", (settings) => {
      clearTimeout(connectTimer);
      pooled.settled = true;
      this.peerMaxStreams = settings.maxConcurrentStreams ?? Number.POSITIVE_INFINITY;
    });
    this.sessions.push(pooled);
    const retire = (): void => this.retire(pooled);
    // The connection is up once the peer's SETTINGS come, as grpc-js's client counts it: a
    // peer that takes the TCP connection (or TLS) and then says nothing would otherwise hold
    // every request sent to it, with no deadline forever, the endpoint still counted healthy.
    const connectTimeoutMs = this.options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    const connectTimer = setTimeout(
      () => session.destroy(new Error(`no HTTP/2 connection within ${connectTimeoutMs / 1000} s`)),
      connectTimeoutMs,
    );
    connectTimer.unref();
    session.once("connect", () => {
      // The connection's window as the server's own default (a connection carries many calls;
      // one window of one call's size would let a large reply hold up the rest), never below a call's.
      if (window !== undefined) session.setLocalWindowSize(Math.max(window, DEFAULT_CONNECTION_WINDOW));
    });
    session.on("goaway", retire);
    session.on("close", () => {
      clearTimeout(connectTimer);
      retire();
    });
    // The streams on it end with the error (UpstreamStream); nothing else to do here.
    session.on("error", retire);
    session.unref();
    return pooled;
  }
}

/** The host of a `host:port` target when it is a DNS name (the name a certificate carries); undefined for an IP. */
export function certificateName(target: string): string | undefined {
  const host = target.slice(0, target.lastIndexOf(":")).replace(/^\[|\]$/g, "");
  return isIP(host) === 0 ? host : undefined;
}

/** One gRPC call on an HTTP/2 stream, from the request's first byte to the status. */
class UpstreamStream implements ForwardCall {
  private stream: ClientHttp2Stream | undefined;
  private pooled: PooledSession | undefined;
  private gotHeaders = false;
  /** The status came in the only header block: the upstream refused the call without running it. */
  private trailersOnly = false;
  private trailers: IncomingHttpHeaders | undefined;
  private failure: { code: status; details: string } | undefined;
  private streamError: Error | undefined;
  private ended = false;
  private replies = 0;
  private readonly reader: MessageReader;

  constructor(
    private readonly upstream: H2Upstream,
    private readonly request: UpstreamRequest,
    private readonly handlers: UpstreamHandlers,
  ) {
    this.reader = new MessageReader(upstream.maxMessageSize, (message) => this.onMessage(message));
    const { signal } = request;
    if (signal?.aborted === true) {
      this.finish({ ...this.abortStatus(), metadata: NO_METADATA, refused: false, transport: false, drained: false });
      return;
    }
    try {
      this.start();
    } catch (error) {
      this.finish(isHeaderError(error) ? this.headerEnd(error) : this.transportEnd((error as Error).message, true));
    }
  }

  pause(): void {
    this.stream?.pause();
  }

  resume(): void {
    this.stream?.resume();
  }

  private start(): void {
    const { request, upstream } = this;
    const headers = upstream.requestHeaders(request.path);
    if (Number.isFinite(request.deadline)) headers["grpc-timeout"] = grpcTimeout(request.deadline - Date.now());
    addMetadataHeaders(headers, request.metadata);
    Object.assign(headers, request.traceHeaders);
    const { stream, pooled } = upstream.openStream(headers);
    this.stream = stream;
    this.pooled = pooled;
    stream.on("response", (responseHeaders) => this.onResponse(responseHeaders));
    stream.on("data", (chunk: Buffer) => this.onData(chunk));
    stream.on("trailers", (trailers) => (this.trailers = trailers));
    stream.on("error", (error) => (this.streamError = error));
    stream.on("close", () => this.onClose());
    request.signal?.addEventListener("abort", this.onAbort, { once: true });
    writeMessage(stream, request.message);
    stream.end();
  }

  private readonly onAbort = (): void => {
    this.failure = this.abortStatus();
    this.stream?.close(constants.NGHTTP2_CANCEL);
  };

  private onResponse(headers: IncomingHttpHeaders): void {
    this.gotHeaders = true;
    const httpStatus = Number(headers[constants.HTTP2_HEADER_STATUS]);
    // Trailers-Only: the status came in the only header block.
    if (headers["grpc-status"] !== undefined) {
      this.trailers = headers;
      this.trailersOnly = true;
      return;
    }
    if (httpStatus !== 200) {
      this.failure = {
        code: statusOfHttp(httpStatus),
        details: `upstream ${this.upstream.address} answered HTTP ${httpStatus}`,
      };
      this.stream?.close(constants.NGHTTP2_CANCEL);
      return;
    }
    try {
      this.handlers.metadata(metadataOf(headers));
    } catch (error) {
      this.fail(error);
    }
  }

  private onData(chunk: Buffer): void {
    if (this.failure !== undefined) return;
    try {
      this.reader.push(chunk);
    } catch (error) {
      this.fail(error);
    }
  }

  /** A reply message; a unary call's second one ends the call (as grpc-js's client refused it), passing on nothing more. */
  private onMessage(message: Uint8Array): void {
    if (this.request.unary && this.replies > 0) {
      throw new FrameError(
        status.INTERNAL,
        `upstream ${this.upstream.address} sent more than one reply to a unary call`,
      );
    }
    this.replies++;
    this.handlers.message(message);
  }

  /**
   * A fault while reading the reply (its framing, or a message the caller cannot take, e.g.
   * one too malformed to rename): the call ends with it and the upstream stream is reset;
   * thrown on, inside an HTTP/2 event, it would end the process.
   */
  private fail(error: unknown): void {
    this.failure =
      error instanceof FrameError
        ? { code: error.code, details: error.message }
        : { code: status.INTERNAL, details: `upstream ${this.upstream.address}: ${errorMessage(error)}` };
    this.stream?.close(constants.NGHTTP2_CANCEL);
  }

  private onClose(): void {
    this.request.signal?.removeEventListener("abort", this.onAbort);
    this.finish(this.outcome());
  }

  /** The call's status from what happened on the stream, in order of precedence. */
  private outcome(): UpstreamEnd {
    const plain = { refused: false, transport: false, drained: false };
    if (this.failure !== undefined) return { ...this.failure, metadata: NO_METADATA, ...plain };
    const stream = this.stream!;
    if (this.trailers !== undefined) {
      const status = this.statusOf(this.trailers);
      if (status.code === OK && this.request.unary && this.replies === 0) {
        return {
          code: INTERNAL,
          details: `upstream ${this.upstream.address} sent no reply`,
          metadata: NO_METADATA,
          ...plain,
        };
      }
      // Trailers-Only UNAVAILABLE: the upstream turned it away (draining, overloaded) unrun.
      return { ...status, refused: this.trailersOnly && status.code === UNAVAILABLE, transport: false, drained: false };
    }
    const session = this.pooled?.session;
    // The connection went (refused, reset, GOAWAY with an error): the endpoint failed.
    if (
      session === undefined ||
      session.destroyed ||
      (this.streamError !== undefined && !isStreamReset(this.streamError))
    ) {
      const why = this.streamError?.message ?? "the connection closed";
      return this.transportEnd(why, !this.gotHeaders);
    }
    if (stream.rstCode !== undefined && stream.rstCode !== H2_CODE.NO_ERROR) {
      const code = statusOfReset(stream.rstCode);
      return {
        code,
        details: `upstream ${this.upstream.address} reset the stream (HTTP/2 error ${stream.rstCode})`,
        metadata: NO_METADATA,
        // REFUSED_STREAM (a GOAWAY below our stream too): it never ran.
        refused: stream.rstCode === H2_CODE.REFUSED_STREAM && !this.gotHeaders,
        transport: false,
        drained: stream.rstCode === H2_CODE.REFUSED_STREAM,
      };
    }
    if (this.reader.midMessage) {
      return {
        code: status.INTERNAL,
        details: `upstream ${this.upstream.address} ended a message early`,
        metadata: NO_METADATA,
        ...plain,
      };
    }
    return {
      code: status.INTERNAL,
      details: `upstream ${this.upstream.address} sent no status`,
      metadata: NO_METADATA,
      ...plain,
    };
  }

  private statusOf(trailers: IncomingHttpHeaders): ForwardStatus {
    const code = trailers["grpc-status"];
    const message = trailers["grpc-message"];
    const details = typeof message === "string" ? decodeGrpcMessage(message) : "";
    if (typeof code !== "string" || !/^\d+$/.test(code)) {
      // The HTTP status's mapping (UNKNOWN for 200), and a message that says what was missing.
      return {
        code: statusOfHttp(Number(trailers[constants.HTTP2_HEADER_STATUS] ?? 200)),
        details: `upstream ${this.upstream.address} sent no valid grpc-status${details === "" ? "" : `: ${details}`}`,
        metadata: metadataOf(trailers),
      };
    }
    return { code: Number(code), details, metadata: metadataOf(trailers) };
  }

  private transportEnd(why: string, refused: boolean): UpstreamEnd {
    return {
      code: status.UNAVAILABLE,
      details: `upstream ${this.upstream.address} is unavailable: ${why}`,
      metadata: NO_METADATA,
      refused,
      transport: true,
      drained: false,
    };
  }

  /** Metadata HTTP/2 cannot carry (node refused the header block): the client's fault, never the endpoint's. */
  private headerEnd(error: Error): UpstreamEnd {
    return {
      code: status.INVALID_ARGUMENT,
      details: `metadata not accepted: ${error.message}`,
      metadata: NO_METADATA,
      refused: false,
      transport: false,
      drained: false,
    };
  }

  /** The status of a call its client gave up on (cancelled, or past its deadline), as the data plane reports it. */
  private abortStatus(): { code: status; details: string } {
    const error = abortedError(this.request.signal!);
    return { code: GRPC_CODE_OF[error.kind], details: error.message };
  }

  private finish(end: UpstreamEnd): void {
    if (this.ended) return;
    this.ended = true;
    this.handlers.end(end);
  }
}

/** A stream error that is the peer's RST_STREAM, not the connection's loss. */
const isStreamReset = (error: Error): boolean => (error as NodeJS.ErrnoException).code === "ERR_HTTP2_STREAM_ERROR";

/** Why node refuses a header block it was given: a name or value HTTP/2 cannot carry, or a repeated single-value field. */
const HEADER_ERRORS: ReadonlySet<string> = new Set([
  "ERR_HTTP2_HEADER_SINGLE_VALUE",
  "ERR_HTTP2_INVALID_CONNECTION_HEADERS",
  "ERR_HTTP2_INVALID_HEADER_VALUE",
  "ERR_HTTP2_INVALID_PSEUDOHEADER",
  "ERR_INVALID_HTTP_TOKEN",
  "ERR_INVALID_CHAR",
]);

const isHeaderError = (error: unknown): error is Error =>
  error instanceof Error && HEADER_ERRORS.has((error as NodeJS.ErrnoException).code ?? "");

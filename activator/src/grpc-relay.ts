import { status } from "@grpc/grpc-js";
import {
  constants,
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from "node:http2";
import { authenticationFailure } from "../../lib/auth/bearer-tokens.js";
import { grpcTimeout, H2_CODE, parseGrpcTimeout, statusOfReset, trailersOnly } from "../../lib/grpc/frames.js";
import { endToEndHeaders } from "./hop-by-hop.js";
import type { ReadyPod } from "./pods.js";
import { ReplayableBody } from "./replay.js";
import { holdRefusal, RETRY_PAUSE_MS, sleep, type RelayOptions } from "./refusals.js";
import type { Identity } from "./tls.js";
import { UpstreamSessions } from "./upstream-sessions.js";

/** The gRPC relay's options: both relays' and the HTTP/2 stream bound. */
export interface GrpcRelayOptions extends RelayOptions {
  readonly maxConcurrentStreams: number;
  /** How long a client connection may have no stream open before it is closed. */
  readonly idleSessionMs: number;
}

/** How one attempt to relay a call to a pod ended. */
type Attempt = "done" | "refused";

/**
 * The model's gRPC port (h2c) as a transparent relay: each stream is held until a pod is
 * ready (its body unread: HTTP/2 flow control holds the client), then relayed to the pod's
 * same port on a shared session, headers, DATA and trailers as they come both ways.
 */
export class GrpcRelay {
  readonly server: Http2Server | Http2SecureServer;
  private readonly upstream: UpstreamSessions;
  private readonly sessions = new Set<ServerHttp2Session>();

  constructor(private readonly options: GrpcRelayOptions) {
    this.upstream = new UpstreamSessions(
      options.upstreamPort,
      options.upstreamTls,
      options.upstreamConnectTimeoutMs,
      (ip, error) => options.logger.warn({ ip, err: error.message }, "cannot reach a ready pod's gRPC port"),
    );
    const settings = {
      maxConcurrentStreams: options.maxConcurrentStreams,
      maxHeaderListSize: options.maxHeaderBytes,
    };
    this.server =
      options.identity === undefined
        ? createServer({ settings, maxSessionInvalidFrames: 100 })
        : createSecureServer({ ...options.identity, settings, maxSessionInvalidFrames: 100, ALPNProtocols: ["h2"] });
    this.server.on("session", (session: ServerHttp2Session) => {
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
      session.on("error", () => undefined);
      closeWhenIdle(session, options.idleSessionMs);
    });
    this.server.on("stream", (stream, headers) => void this.serve(stream, headers));
  }

  /** Sends GOAWAY to every client connection: its streams finish, new ones go elsewhere. */
  handOver(): void {
    for (const session of this.sessions) if (!session.closed) session.close();
  }

  /** New TLS connections get `identity` (a rotated Secret). */
  setIdentity(identity: Identity): void {
    if ("setSecureContext" in this.server) this.server.setSecureContext(identity);
  }

  /** The pods' CA changed: new calls go on new sessions (open ones finish). */
  reconnectUpstream(): void {
    this.upstream.close();
  }

  /** Stops accepting connections; those open finish their streams. */
  stop(): void {
    this.server.close();
    this.handOver();
  }

  /** Ends whatever is left (after the grace). */
  destroy(): void {
    for (const session of this.sessions) session.destroy();
    this.upstream.close();
  }

  private async serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): Promise<void> {
    stream.on("error", () => undefined);
    // The advertised SETTINGS_MAX_HEADER_LIST_SIZE binds a client only once it acknowledged it
    // (and a hostile one never does): checked here too, before a call is held with its headers.
    const headerBytes = headerListSize(headers);
    if (headerBytes > this.options.maxHeaderBytes) {
      const bound = this.options.maxHeaderBytes;
      return end(
        stream,
        status.RESOURCE_EXHAUSTED,
        `the call's metadata is ${headerBytes} bytes, more than the ${bound} bytes the activator accepts (--max-header-bytes)`,
      );
    }
    const tokens = this.options.tokens();
    if (tokens !== undefined) {
      const given = headers["authorization"];
      const failure = authenticationFailure(given === undefined ? [] : [given], tokens);
      if (failure !== undefined) return end(stream, status.UNAUTHENTICATED, failure);
    }
    const clientTimeoutMs = parseGrpcTimeout(headers["grpc-timeout"] as string | undefined);
    const start = performance.now();
    const deadline = clientTimeoutMs === undefined ? Infinity : start + clientTimeoutMs;
    const holdUntil = Math.min(deadline, start + this.options.holdTimeoutMs);
    const body = new ReplayableBody(stream);
    const cancelled = new AbortController();
    const closed = new Promise<void>((resolve) =>
      stream.once("close", () => {
        cancelled.abort();
        resolve();
      }),
    );
    // Counted until the client's stream is closed: its last frames are sent before a stop ends the session.
    const done = this.relay(stream, headers, body, deadline, holdUntil, cancelled.signal).then(() => closed);
    this.options.holding.track(done);
    await done;
  }

  private async relay(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    body: ReplayableBody,
    deadline: number,
    holdUntil: number,
    signal: AbortSignal,
  ): Promise<void> {
    for (;;) {
      const result = await this.options.holding.acquire(holdUntil - performance.now(), signal);
      if (result.kind !== "pod") {
        const refusal = holdRefusal(result.kind, this.options.holdTimeoutMs, holdUntil < deadline);
        if (refusal !== undefined) end(stream, GRPC_OF_REFUSAL[refusal.kind], refusal.message);
        return;
      }
      if ((await this.attempt(result.pod, stream, headers, body, deadline)) === "done") return;
      if (!body.replayable || performance.now() + RETRY_PAUSE_MS >= holdUntil) {
        return end(stream, status.UNAVAILABLE, `the model's pod ${result.pod.name} refused the call`);
      }
      await sleep(RETRY_PAUSE_MS);
    }
  }

  /** Relays the call to `pod` once; "refused" when the pod never saw it (it may go elsewhere). */
  private attempt(
    pod: ReadyPod,
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    body: ReplayableBody,
    deadline: number,
  ): Promise<Attempt> {
    if (stream.closed || stream.destroyed) return Promise.resolve("done");
    const outgoing = endToEndHeaders(headers, true) as Record<string, string | string[] | number>;
    if (headers["te"] !== undefined) outgoing["te"] = "trailers";
    // The scheme is this hop's (h2c or TLS to the pod), which node writes: not the client's.
    delete outgoing[":scheme"];
    if (Number.isFinite(deadline)) outgoing["grpc-timeout"] = grpcTimeout(deadline - performance.now());
    let upstream;
    try {
      upstream = this.upstream.request(pod.ip, outgoing);
    } catch {
      return Promise.resolve("refused");
    }
    return new Promise((resolve) => {
      let responded = false;
      let trailers: OutgoingHttpHeaders | undefined;
      upstream.on("error", () => undefined);
      const cancel = (): void => upstream.close(constants.NGHTTP2_CANCEL);
      stream.once("close", cancel);
      upstream.once("response", (responseHeaders, flags) => {
        responded = true;
        body.committed();
        if (stream.closed || stream.destroyed) return;
        const trailersOnlyReply = (flags & constants.NGHTTP2_FLAG_END_STREAM) !== 0;
        stream.respond(endToEndHeaders(responseHeaders, true), {
          endStream: trailersOnlyReply,
          waitForTrailers: !trailersOnlyReply,
        });
        stream.once("wantTrailers", () => stream.sendTrailers(trailers ?? {}));
        upstream.on("data", (chunk: Buffer) => {
          if (!stream.write(chunk)) {
            upstream.pause();
            stream.once("drain", () => upstream.resume());
          }
        });
      });
      upstream.once("trailers", (received) => (trailers = endToEndHeaders(received)));
      upstream.once("close", () => {
        stream.off("close", cancel);
        if (!responded) {
          body.detach();
          const refused = upstream.rstCode === H2_CODE.REFUSED_STREAM;
          if (this.upstream.neverProcessed(upstream, refused)) return resolve("refused");
          end(stream, statusOfReset(upstream.rstCode ?? 0), `the model's pod ${pod.name} ended the call`);
          return resolve("done");
        }
        if (trailers === undefined && upstream.rstCode !== H2_CODE.NO_ERROR) {
          trailers = {
            "grpc-status": String(status.UNAVAILABLE),
            "grpc-message": `the model's pod ${pod.name} reset the call (HTTP/2 code ${upstream.rstCode})`,
          };
        }
        if (!stream.closed && !stream.destroyed && stream.headersSent && !stream.writableEnded) stream.end();
        resolve("done");
      });
      body.attach(upstream);
    });
  }
}

/** After an idle connection's GOAWAY, how long its client gets to close it before it is cut. */
const GOAWAY_GRACE_MS = 1_000;

/** A header block's size as HTTP/2 counts it against SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2). */
function headerListSize(headers: IncomingHttpHeaders): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(headers)) {
    for (const one of Array.isArray(value) ? value : [value ?? ""]) bytes += name.length + Buffer.byteLength(one) + 32;
  }
  return bytes;
}

/**
 * Closes `session` once it has had no stream open for `idleMs` (from its start, or since its
 * last stream ended): a connection that never sends its preface, or sends it and nothing more,
 * would otherwise hold a socket forever (Node's HTTP/2 server has no such bound). A held call
 * is an open stream, so it is never cut by this, however long it waits.
 */
function closeWhenIdle(session: ServerHttp2Session, idleMs: number): void {
  let open = 0;
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    timer = setTimeout(() => {
      // GOAWAY first: a call the client sends at this very moment is refused unseen (clients retry that).
      session.close();
      setTimeout(() => session.destroy(), GOAWAY_GRACE_MS).unref();
    }, idleMs).unref();
  };
  session.on("stream", (stream: ServerHttp2Stream) => {
    open++;
    clearTimeout(timer);
    stream.once("close", () => {
      if (--open === 0 && !session.destroyed) arm();
    });
  });
  session.once("close", () => clearTimeout(timer));
  arm();
}

const GRPC_OF_REFUSAL = {
  full: status.RESOURCE_EXHAUSTED,
  deadline: status.DEADLINE_EXCEEDED,
  stopping: status.UNAVAILABLE,
} as const;

/**
 * Ends a call that never reached a pod with `code` (trailers only), unless its client left.
 * Whatever of its body still comes is read and dropped, so the stream closes.
 */
function end(stream: ServerHttp2Stream, code: status, message: string): void {
  if (stream.closed || stream.destroyed || stream.headersSent) return;
  stream.respond(trailersOnly(code, message), { endStream: true });
  stream.resume();
}

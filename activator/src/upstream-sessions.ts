import type { UpstreamTls } from "./tls.js";
import { connect, type ClientHttp2Session, type ClientHttp2Stream, type Http2Session } from "node:http2";

/**
 * One HTTP/2 session per ready pod, kept open and shared by every relayed call (h2c), with what
 * the relay needs to know of it: whether it ever connected, and the last stream a GOAWAY said
 * the pod would still process (a later stream was never seen by the pod, so is safe to send
 * elsewhere).
 */
export class UpstreamSessions {
  private readonly sessions = new Map<string, ClientHttp2Session>();
  private readonly connected = new WeakSet<Http2Session>();
  private readonly goawayLast = new WeakMap<Http2Session, number>();
  private readonly lastFailure = new Map<string, string>();

  /** `tls`: how to reach the pods over TLS, read at each new session (undefined: h2c). */
  constructor(
    private readonly port: number,
    private readonly tls: () => UpstreamTls | undefined,
    /** How long a session may take to connect; then it is given up, its streams never seen by the pod. */
    private readonly connectTimeoutMs: number,
    /** Hears why a pod's session failed (a refused connection, a certificate that does not verify). */
    private readonly failed: (ip: string, error: Error) => void,
  ) {}

  /** Opens a stream to the pod at `ip`; throws if its session cannot take one. */
  request(ip: string, headers: Record<string, string | string[] | number>): ClientHttp2Stream {
    return this.session(ip).request(headers, { endStream: false });
  }

  /** Whether `stream` (which got no response) never reached its pod: safe to send again. */
  neverProcessed(stream: ClientHttp2Stream, refusedStream: boolean): boolean {
    const session = stream.session;
    if (refusedStream || session === undefined || !this.connected.has(session)) return true;
    const last = this.goawayLast.get(session);
    return last !== undefined && (stream.id === undefined || stream.id > last);
  }

  /** Closes every session gracefully (their calls finish); the next call opens a new one (a new CA). */
  close(): void {
    for (const session of this.sessions.values()) session.close();
    this.sessions.clear();
  }

  private session(ip: string): ClientHttp2Session {
    const existing = this.sessions.get(ip);
    if (existing !== undefined && !existing.closed && !existing.destroyed) return existing;
    const host = ip.includes(":") ? `[${ip}]` : ip;
    const tls = this.tls();
    const session =
      tls === undefined
        ? connect(`http://${host}:${this.port}`)
        : connect(`https://${host}:${this.port}`, {
            ca: tls.ca,
            // Without a name, the certificate is checked against the pod's IP (SNI carries no IP).
            ...(tls.servername === undefined ? {} : { servername: tls.servername }),
            ALPNProtocols: ["h2"],
          });
    const connecting = setTimeout(
      () => session.destroy(new Error(`no connection to the pod within ${this.connectTimeoutMs} ms`)),
      this.connectTimeoutMs,
    ).unref();
    session.once("close", () => clearTimeout(connecting));
    session.once("connect", () => {
      clearTimeout(connecting);
      this.connected.add(session);
      this.lastFailure.delete(ip);
    });
    session.on("goaway", (_code: number, lastStreamId: number) => {
      this.goawayLast.set(session, lastStreamId);
      this.forget(ip, session);
    });
    // A failed session fails its streams, which the relay reads; why it failed is only said here.
    session.on("error", (error: Error) => {
      // Said once per pod and reason, not at every retry.
      if (this.lastFailure.get(ip) === error.message) return;
      this.lastFailure.set(ip, error.message);
      this.failed(ip, error);
    });
    session.once("close", () => this.forget(ip, session));
    session.unref();
    this.sessions.set(ip, session);
    return session;
  }

  private forget(ip: string, session: ClientHttp2Session): void {
    if (this.sessions.get(ip) === session) this.sessions.delete(ip);
  }
}

import {
  Agent,
  createServer,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import {
  Agent as HttpsAgent,
  createServer as createHttpsServer,
  request as httpsRequest,
  type Server as HttpsServer,
} from "node:https";
import type { Socket } from "node:net";
import { authenticationFailure } from "../../lib/auth/bearer-tokens.js";
import { endToEndHeaders } from "./hop-by-hop.js";
import type { ReadyPod } from "./pods.js";
import { ReplayableBody } from "./replay.js";
import type { Identity } from "./tls.js";
import { holdRefusal, RETRY_PAUSE_MS, sleep, type RelayOptions } from "./refusals.js";

type Attempt = "done" | "refused";

const STATUS_OF_REFUSAL = { full: 503, deadline: 504, stopping: 503 } as const;

/**
 * The model's HTTP port (HTTP/1.1) as a transparent relay: each request is held until a pod is
 * ready (its body unread: TCP holds the client), then relayed to the pod's same port on a
 * keep-alive agent, the response streamed back as it comes (server-sent events included).
 * Refusals are KServe v2's error shape, `{"error": "..."}`.
 */
export class HttpRelay {
  readonly server: Server | HttpsServer;
  private agent: Agent;
  private handedOver = false;

  constructor(private readonly options: RelayOptions) {
    const server = {
      maxHeaderSize: options.maxHeaderBytes,
      // Node's bound on receiving a whole request (300 s) would end a request held longer, its body unread.
      requestTimeout: Math.max(300_000, options.holdTimeoutMs + 60_000),
    };
    const serve = (request: IncomingMessage, response: ServerResponse): void => {
      // Counted until the reply is closed (sent or cut): a stop waits for its last bytes.
      const closed = new Promise<void>((resolve) => response.once("close", resolve));
      options.holding.track(this.serve(request, response).then(() => closed));
    };
    this.server =
      options.identity === undefined
        ? createServer(server, serve)
        : createHttpsServer({ ...server, ...options.identity }, serve);
    this.agent = this.newAgent();
    this.server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) =>
      refuseMalformed(error, socket, options.maxHeaderBytes),
    );
  }

  /** New TLS connections get `identity` (a rotated Secret). */
  setIdentity(identity: Identity): void {
    if ("setSecureContext" in this.server) this.server.setSecureContext(identity);
  }

  /** The pods' CA changed: new requests go on new connections (open ones finish). */
  reconnectUpstream(): void {
    const old = this.agent;
    this.agent = this.newAgent();
    old.destroy();
  }

  private newAgent(): Agent {
    const tls = this.options.upstreamTls();
    const common = { keepAlive: true, maxFreeSockets: 64 };
    return tls === undefined
      ? new Agent(common)
      : new HttpsAgent({
          ...common,
          ca: tls.ca,
          // "": no SNI (it carries no IP), the certificate then checked against the pod's IP.
          servername: tls.servername ?? "",
        });
  }

  /** From now on replies close their connections, and idle ones are closed: clients reconnect to the pods. */
  handOver(): void {
    this.handedOver = true;
    this.server.closeIdleConnections();
  }

  /** The activator serves again (no pod ready): connections are kept alive. */
  takeBack(): void {
    this.handedOver = false;
  }

  stop(): void {
    this.handedOver = true;
    this.server.close();
    this.server.closeIdleConnections();
  }

  destroy(): void {
    this.server.closeAllConnections();
    this.agent.destroy();
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    response.on("error", () => undefined);
    const tokens = this.options.tokens();
    if (tokens !== undefined) {
      const given = request.headers.authorization;
      const failure = authenticationFailure(given === undefined ? [] : [given], tokens, "header");
      if (failure !== undefined) return this.refuse(response, 401, failure, { "www-authenticate": "Bearer" });
    }
    const holdUntil = performance.now() + this.options.holdTimeoutMs;
    const body = new ReplayableBody(request);
    const cancelled = new AbortController();
    response.once("close", () => cancelled.abort());
    for (;;) {
      const result = await this.options.holding.acquire(holdUntil - performance.now(), cancelled.signal);
      if (result.kind !== "pod") {
        const refusal = holdRefusal(result.kind, this.options.holdTimeoutMs, true);
        if (refusal !== undefined) this.refuse(response, STATUS_OF_REFUSAL[refusal.kind], refusal.message);
        return;
      }
      if ((await this.attempt(result.pod, request, response, body)) === "done") return;
      if (!body.replayable || performance.now() + RETRY_PAUSE_MS >= holdUntil) {
        return this.refuse(response, 502, `the model's pod ${result.pod.name} refused the request`);
      }
      await sleep(RETRY_PAUSE_MS);
    }
  }

  private attempt(
    pod: ReadyPod,
    request: IncomingMessage,
    response: ServerResponse,
    body: ReplayableBody,
  ): Promise<Attempt> {
    if (response.destroyed) return Promise.resolve("done");
    return new Promise((resolve) => {
      let responded = false;
      const send = this.options.upstreamTls() === undefined ? httpRequest : httpsRequest;
      const upstream: ClientRequest = send({
        host: pod.ip,
        port: this.options.upstreamPort,
        method: request.method,
        path: request.url,
        headers: endToEndHeaders(request.headers),
        agent: this.agent,
      });
      boundConnect(upstream, this.options.upstreamConnectTimeoutMs);
      const cancel = (): void => {
        if (!response.writableFinished) upstream.destroy();
      };
      response.once("close", cancel);
      upstream.once("response", (reply: IncomingMessage) => {
        responded = true;
        body.committed();
        const headers = endToEndHeaders(reply.headers);
        if (this.handedOver) headers["connection"] = "close";
        response.writeHead(reply.statusCode ?? 502, reply.statusMessage, headers);
        response.flushHeaders();
        reply.pipe(response);
        reply.once("error", () => response.destroy());
        reply.once("aborted", () => response.destroy());
        reply.once("end", () => resolve("done"));
        reply.once("close", () => resolve("done"));
      });
      upstream.once("error", (error: NodeJS.ErrnoException) => {
        if (responded) return;
        response.off("close", cancel);
        body.detach();
        const unseen =
          error.code === "ECONNREFUSED" ||
          error.code === CONNECT_TIMED_OUT ||
          (upstream.reusedSocket && error.code === "ECONNRESET");
        if (unseen) {
          this.options.logger.warn({ pod: pod.name, err: error.message }, "cannot reach a ready pod's HTTP port");
          return resolve("refused");
        }
        this.refuse(response, 502, `the model's pod ${pod.name} failed the request: ${error.message}`);
        resolve("done");
      });
      body.attach(upstream);
    });
  }

  private refuse(response: ServerResponse, code: number, message: string, extra: Record<string, string> = {}): void {
    if (response.headersSent || response.destroyed) return;
    const text = JSON.stringify({ error: message });
    response.writeHead(code, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
      // The body was not read: the connection cannot carry another request.
      connection: "close",
      ...extra,
    });
    response.end(text);
  }
}

/** The error code of a connection to a pod that took longer than the connect bound. */
const CONNECT_TIMED_OUT = "ACTIVATOR_CONNECT_TIMEOUT";

/** Ends `upstream` with CONNECT_TIMED_OUT if its socket has not connected within `timeoutMs` (a pooled one has). */
function boundConnect(upstream: ClientRequest, timeoutMs: number): void {
  upstream.once("socket", (socket: Socket) => {
    if (!socket.connecting) return;
    const timer = setTimeout(() => {
      const error: NodeJS.ErrnoException = new Error(`no connection to the pod within ${timeoutMs} ms`);
      error.code = CONNECT_TIMED_OUT;
      upstream.destroy(error);
    }, timeoutMs).unref();
    socket.once("connect", () => clearTimeout(timer));
    socket.once("close", () => clearTimeout(timer));
  });
}

/**
 * A request Node's parser refused (nothing was held, nothing relayed): answered with a status
 * and KServe v2's error shape saying why, then the connection is closed, unless it is already
 * gone. 431 for a header block over the bound, 408 for one that came too slowly, else 400.
 */
function refuseMalformed(error: NodeJS.ErrnoException, socket: Socket, maxHeaderBytes: number): void {
  if (!socket.writable || error.code === "ECONNRESET") {
    socket.destroy();
    return;
  }
  const [code, reason, message] =
    error.code === "HPE_HEADER_OVERFLOW"
      ? [
          431,
          "Request Header Fields Too Large",
          `the request's header block exceeds ${maxHeaderBytes} bytes (--max-header-bytes)`,
        ]
      : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? [408, "Request Timeout", "the request's headers did not arrive in time"]
        : [400, "Bad Request", `the request is not valid HTTP/1.1: ${error.message}`];
  const body = JSON.stringify({ error: message });
  socket.end(
    `HTTP/1.1 ${code} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

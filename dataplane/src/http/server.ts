import type { IncomingMessage, Server } from "node:http";
import { VARIANT_HEADER } from "../../../lib/contract/dataplane.js";
import type { AddressInfo } from "node:net";
import compress from "@fastify/compress";
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { HttpServerMetrics } from "../metrics/http.js";
import { authenticationFailure } from "../../../lib/auth/bearer-tokens.js";
import { requiredTokens, type AccessTokens } from "../server/auth.js";
import { isModelControlRoute } from "../../../lib/contract/model-control.js";
import type { TlsMaterial } from "../server/tls.js";
import { errorBody, httpErrorOf } from "./errors.js";
import type { FrontDoor } from "./front-door.js";
import { sendJson } from "./json.js";
import { closeDecodePool } from "./kserve/decode-pool.js";
import { kserveRoutes } from "./kserve/routes.js";
import { openaiRoutes } from "./openai/routes.js";

export interface FrontDoorOptions {
  readonly host: string;
  readonly port: number;
  /** The largest request body, decompressed (the data plane's max message size). */
  readonly bodyLimit: number;
  readonly tls: TlsMaterial | undefined;
  readonly access: AccessTokens;
  readonly metrics: HttpServerMetrics;
  readonly logger: Logger;
  /** --variant: every reply says it (VARIANT_HEADER). */
  readonly variant?: string;
}

export interface RunningFrontDoor {
  readonly port: number;
  readonly server: Server;
  /** Stops taking connections and waits for the replies in progress (streams included). */
  close(): Promise<void>;
}

/**
 * Bodies are JSON, or JSON followed by binary tensor data. Clients label them variously
 * (tritonclient: none or octet-stream; curl -d: form-urlencoded); anything else is refused.
 */
const BODY_TYPES = new Set([
  "application/json",
  "application/octet-stream",
  "text/plain",
  "application/x-www-form-urlencoded",
]);
const BODY_TYPES_HINT = "send application/json (application/octet-stream for a body with binary tensor data)";

/** The status a request is counted with when its client went away before the reply was complete. */
const CLIENT_CLOSED_REQUEST = 499;

/** Routes that need no token: the probes Kubernetes and load balancers send. */
const OPEN_ROUTES = new Set(["/v2/health/live", "/v2/health/ready"]);

/**
 * The HTTP front door (fastify): KServe v2 REST with Triton's extensions and binary tensor
 * data, Triton's generate extension, and the OpenAI-compatible routes, all over the same
 * operations and inference pipeline as the gRPC server. Bodies arrive as bytes (each route
 * reads its own JSON, so binary tensor data and JSON share one path) up to the max message
 * size, gzip/deflate bodies decompressed first; replies compressed when the client asks.
 */
export async function startFrontDoor(door: FrontDoor, options: FrontDoorOptions): Promise<RunningFrontDoor> {
  const tls = options.tls;
  const app = Fastify({
    bodyLimit: options.bodyLimit,
    ...(tls === undefined
      ? {}
      : {
          https: {
            cert: tls.current.cert,
            key: tls.current.key,
            ...(tls.mutual ? { ca: tls.current.ca, requestCert: true, rejectUnauthorized: true } : {}),
          },
        }),
    // Model names are path segments; Triton allows long ones. (Router settings go in
    // routerOptions: fastify 5 deprecates them at the top level, FSTDEP022.)
    routerOptions: { maxParamLength: 1024 },
    return503OnClosing: true,
    loggerInstance: options.logger.child({ server: "http" }),
    // No line per request (the route metrics count them); fastify 5 takes this from a
    // LogController, the top-level disableRequestLogging being deprecated (FSTDEP023).
    logController: new LogController({ disableRequestLogging: true }),
  }) as unknown as FastifyInstance;
  if (tls !== undefined) {
    tls.onChange((files) =>
      (app.server as unknown as import("node:tls").Server).setSecureContext({
        cert: files.cert,
        key: files.key,
        ...(files.ca === undefined ? {} : { ca: files.ca }),
      }),
    );
  }
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (request, body, done) => {
    const type = request.headers["content-type"]?.split(";")[0]?.trim().toLowerCase();
    if (type === undefined || BODY_TYPES.has(type)) done(null, body);
    else
      done(
        Object.assign(new Error(`Content-Type '${type}' is not accepted; ${BODY_TYPES_HINT}`), { statusCode: 415 }),
        undefined,
      );
  });
  await app.register(compress, {
    encodings: ["gzip", "deflate"],
    requestEncodings: ["gzip", "deflate"],
    // Binary tensor replies are worth compressing when a client asks, as Triton does.
    customTypes: /^application\/(json|octet-stream)/,
    onInvalidRequestPayload: (encoding, _request, error) =>
      Object.assign(new Error(`the request body is not valid ${encoding}: ${error.message}`), { statusCode: 400 }),
    onUnsupportedRequestEncoding: (encoding) =>
      Object.assign(new Error(`Content-Encoding '${encoding}' is not supported; use gzip or deflate`), {
        statusCode: 415,
      }),
  });
  // Counted when the response closes, finished or not: fastify's onResponse misses replies a
  // client hung up on (an SSE stream midway), which are 499 here, as nginx says it.
  app.addHook("onRequest", async (request, reply) => {
    reply.raw.once("close", () => {
      const status = reply.raw.writableFinished ? reply.statusCode : CLIENT_CLOSED_REQUEST;
      options.metrics.observe(request.method, routeOf(request), status, reply.elapsedTime / 1000);
    });
  });
  // On the raw response, so replies written past fastify (SSE streams) carry it too.
  const { variant } = options;
  if (variant !== undefined) {
    app.addHook("onRequest", async (_request, reply) => {
      reply.raw.setHeader(VARIANT_HEADER, variant);
    });
  }
  // Draining: the pod's endpoint is going away. Each reply closes its connection, so a
  // keep-alive client reconnects (to a pod that stays) instead of racing the port's close.
  app.addHook("onRequest", async (_request, reply) => {
    if (door.draining()) void reply.header("connection", "close");
  });
  const { inference, modelControl } = options.access;
  // No hook on every request when no token is asked for (as the gRPC server adds no interceptor).
  if (inference !== undefined || modelControl !== undefined) app.addHook("onRequest", authenticate(options.access));
  app.setErrorHandler(async (error: unknown, request, reply) => {
    if (!isBodyTooLarge(error)) return replyError(request, reply, error);
    await drainBody(request.raw, options.bodyLimit);
    return replyError(request, reply, bodyTooLarge(options.bodyLimit));
  });
  app.setNotFoundHandler(async (request, reply) =>
    replyError(
      request,
      reply,
      Object.assign(new Error(`no route for ${request.method} ${pathOf(request)}`), { statusCode: 404 }),
    ),
  );
  kserveRoutes(app, door);
  openaiRoutes(app, door);
  await app.listen({ host: options.host, port: options.port });
  const server = app.server as Server;
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: async () => {
      await app.close();
      await closeDecodePool();
    },
  };
}

/**
 * Checks the bearer token a request needs, by the route the router matched, never by the path
 * as sent: the router decodes escapes (`%6coad`) and reads absolute URLs and fragments, so two
 * spellings of one route must need one token.
 */
function authenticate(access: AccessTokens) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const route = routeOf(request);
    const required = OPEN_ROUTES.has(route) ? undefined : requiredTokens(access, isModelControlRoute(route));
    if (required === undefined) return;
    const header = request.headers.authorization;
    const failure = authenticationFailure(
      header === undefined ? [] : [header],
      required.tokens,
      "header",
      required.purpose,
    );
    if (failure === undefined) return;
    reply.header("www-authenticate", 'Bearer realm="dynamo-kserve"');
    await replyError(request, reply, Object.assign(new Error(failure), { statusCode: 401 }));
  };
}

/** An error reply in the shape the route's clients read. */
async function replyError(request: FastifyRequest, reply: FastifyReply, error: unknown): Promise<void> {
  const failure = httpErrorOf(error);
  if (failure.status >= 500 && failure.status !== 501 && failure.status !== 503) {
    request.log.warn({ err: failure.message, route: routeOf(request) }, "HTTP request failed");
  }
  await sendJson(reply.code(failure.status), errorBody(failure, pathOf(request).startsWith("/v1/")));
}

const isBodyTooLarge = (error: unknown): boolean =>
  (error as { code?: unknown } | undefined)?.code === "FST_ERR_CTP_BODY_TOO_LARGE";

/**
 * Fastify's "Request body is too large", with the limit a client must keep to. It counts
 * bytes as they arrive, after decompression: a compressed body is refused as soon as it
 * inflates past the limit, never inflated whole.
 */
const bodyTooLarge = (bodyLimit: number): Error =>
  Object.assign(
    new Error(
      `the request body is larger than the limit of ${bodyLimit} bytes (--max-message-size; a compressed body counts by its decompressed size)`,
    ),
    { statusCode: 413 },
  );

/** How long, and how much more than the body limit (at least), a refused body is read and dropped before its reply goes out regardless. */
const DRAIN_MS = 5_000;
const DRAIN_BYTES = 16 * 1024 * 1024;

/**
 * Reads and drops what is left of a refused body, up to `limit` (or DRAIN_BYTES) more bytes and DRAIN_MS,
 * before the reply (which closes the connection) is sent. Clients that write the whole body
 * before reading (Python's requests and tritonclient.http) otherwise never see the 413:
 * closing a connection with bytes unread resets it, and they get an EOF (an SSL EOF over TLS).
 */
async function drainBody(raw: IncomingMessage, limit: number): Promise<void> {
  if (raw.complete || raw.destroyed) return;
  // A compressed body is piped into its decompressor, which stopped reading.
  raw.unpipe();
  await new Promise<void>((resolve) => {
    let left = Math.max(limit, DRAIN_BYTES);
    const onData = (chunk: Buffer): void => {
      left -= chunk.length;
      if (left < 0) done();
    };
    const timer = setTimeout(() => done(), DRAIN_MS);
    const done = (): void => {
      clearTimeout(timer);
      raw.off("data", onData).off("end", done).off("close", done).off("error", done);
      resolve();
    };
    raw.on("data", onData).once("end", done).once("close", done).once("error", done);
    raw.resume();
  });
}

const pathOf = (request: FastifyRequest): string => request.url.split("?")[0] ?? "/";

/** The route's template (never the path a client sent), for metric labels. */
const routeOf = (request: FastifyRequest): string => request.routeOptions.url ?? "unmatched";

import {
  Client,
  credentials,
  type ClientDuplexStream,
  status,
  type ServiceError,
  type StatusObject,
} from "@grpc/grpc-js";
import type { FastifyInstance } from "fastify";
import { DATAPLANE_OPTIONS } from "../../lib/contract/dataplane.js";
import { code, generatedNote, page, prose, table } from "./markdown.js";
import type { GrpcMethod, HttpRoute, ServedDataPlane } from "./served.js";

/**
 * docs/reference/protocols.md: what a running data plane serves. Every gRPC method its server
 * registered and every route of its HTTP front door is called once with an empty request;
 * one that answers UNIMPLEMENTED (gRPC) or 501 (HTTP) is listed as not implemented, with the
 * reason it gives. Any other answer (a missing model, an invalid request) means it is served.
 */

/** What one call answered: served, or not implemented and why. */
export type Support = { readonly served: true } | { readonly served: false; readonly reason: string };

const PROBE_DEADLINE_MS = 5000;
const identity = (value: Buffer): Buffer => value;
const EMPTY = Buffer.alloc(0);

/** Support from the status a call ended with (an empty protobuf message is every field's default). */
const supportOfStatus = ({ code: statusCode, details }: Pick<StatusObject, "code" | "details">): Support =>
  statusCode === status.UNIMPLEMENTED ? { served: false, reason: details } : { served: true };

/** Calls `method` with an empty message and waits for its first answer: a message, or the call's end. */
function probeGrpc(client: Client, method: GrpcMethod): Promise<Support> {
  const options = { deadline: Date.now() + PROBE_DEADLINE_MS };
  return new Promise((resolve) => {
    if (!method.requestStream && !method.responseStream) {
      client.makeUnaryRequest(method.path, identity, identity, EMPTY, options, (error: ServiceError | null) =>
        resolve(error === null ? { served: true } : supportOfStatus(error)),
      );
      return;
    }
    if (method.requestStream && !method.responseStream) {
      const call = client.makeClientStreamRequest(method.path, identity, identity, options, (error) =>
        resolve(error === null ? { served: true } : supportOfStatus(error)),
      );
      call.end(EMPTY);
      return;
    }
    const call = method.requestStream
      ? client.makeBidiStreamRequest(method.path, identity, identity, options)
      : client.makeServerStreamRequest(method.path, identity, identity, EMPTY, options);
    call.on("data", () => {
      resolve({ served: true });
      call.cancel();
    });
    call.on("status", (end: StatusObject) =>
      resolve(end.code === status.CANCELLED ? { served: true } : supportOfStatus(end)),
    );
    call.on("error", () => undefined); // the status says it all
    if (method.requestStream) (call as ClientDuplexStream<Buffer, Buffer>).end(EMPTY);
  });
}

/** A path with its parameters filled (`:model` -> `model`, `*` -> `any`), to be called. */
const concreteUrl = (url: string): string => url.replace(/:([A-Za-z_]\w*)/g, "$1").replace(/\*/g, "any");

async function probeHttp(frontDoor: FastifyInstance, route: HttpRoute): Promise<Support> {
  const withBody = route.method !== "GET" && route.method !== "HEAD";
  const reply = await frontDoor.inject({
    method: route.method as "GET",
    url: concreteUrl(route.url),
    ...(withBody ? { payload: "{}", headers: { "content-type": "application/json" } } : {}),
  });
  if (reply.statusCode !== 501) return { served: true };
  const body: unknown = reply.body === "" ? {} : JSON.parse(reply.body);
  const reason = typeof body === "object" && body !== null && "error" in body ? String(body.error) : reply.body;
  return { served: false, reason };
}

const KINDS = ["unary", "client streaming", "server streaming", "bidirectional streaming"] as const;
const kindOf = (method: GrpcMethod): string => KINDS[(method.requestStream ? 1 : 0) + (method.responseStream ? 2 : 0)]!;

const supportCells = (support: Support): string[] =>
  support.served ? ["served", ""] : ["UNIMPLEMENTED", prose(support.reason)];

/** `/package.Service/Method` -> its service and method. */
export function splitPath(path: string): { service: string; method: string } {
  const [, service = "", method = ""] = path.split("/");
  return { service, method };
}

async function grpcSection(served: ServedDataPlane): Promise<string[]> {
  const client = new Client(served.grpcAddress, credentials.createInsecure());
  try {
    const services = new Map<string, string[][]>();
    for (const method of served.grpcMethods) {
      const { service, method: name } = splitPath(method.path);
      const [answer, reason] = supportCells(await probeGrpc(client, method));
      const rows = services.get(service) ?? [];
      services.set(service, [...rows, [code(name), kindOf(method), answer!, reason!]]);
    }
    const port = String(DATAPLANE_OPTIONS.grpcPort.default);
    return [
      "## gRPC",
      `On ${code(DATAPLANE_OPTIONS.grpcPort.flags.split(" ")[0]!)} (default ${port}), plain HTTP/2 or TLS. Every service the server registers, with each method and what it answers.`,
      ...[...services].flatMap(([service, rows]) => [
        `### ${code(service)}`,
        table(["RPC", "Kind", "Answer", "Reason"], rows),
      ]),
    ];
  } finally {
    client.close();
  }
}

/** KServe v2 under /v2 (Triton's extensions included), the OpenAI-compatible API under /v1. */
export function apiOf(url: string): string {
  if (url === "/v2" || url.startsWith("/v2/")) return "KServe v2";
  if (url === "/v1" || url.startsWith("/v1/")) return "OpenAI";
  return "";
}

/** Each route once; a HEAD fastify adds beside a GET is shown on the GET's row. */
export function routeRows(routes: readonly HttpRoute[]): { route: HttpRoute; methods: string }[] {
  const hasGet = new Set(routes.filter(({ method }) => method === "GET").map(({ url }) => url));
  return routes
    .filter(({ method, url }) => !(method === "HEAD" && hasGet.has(url)))
    .map((route) => ({
      route,
      methods:
        route.method === "GET" && routes.some((other) => other.method === "HEAD" && other.url === route.url)
          ? "GET, HEAD"
          : route.method,
    }));
}

async function httpSection(served: ServedDataPlane): Promise<string[]> {
  const rows: string[][] = [];
  for (const { route, methods } of routeRows(served.httpRoutes)) {
    const [answer, reason] = supportCells(await probeHttp(served.frontDoor, route));
    rows.push([
      methods,
      code(route.url),
      apiOf(route.url),
      answer === "served" ? answer : "501 Not Implemented",
      reason!,
    ]);
  }
  const port = String(DATAPLANE_OPTIONS.httpPort.default);
  return [
    "## HTTP",
    `On ${code(DATAPLANE_OPTIONS.httpPort.flags.split(" ")[0]!)} (default ${port}), HTTP/1.1 or TLS: KServe v2 REST (with Triton's extensions and binary tensors), and the OpenAI-compatible API for LLM models. Path parameters are written ${code(":name")}.`,
    table(["Method", "Path", "API", "Answer", "Reason"], rows),
  ];
}

/** The page for a data plane started to be read (served.ts). */
export async function protocolsPage(served: ServedDataPlane): Promise<string> {
  return page([
    "# Protocols",
    generatedNote(
      "a data plane started with its defaults: its gRPC server's services and its HTTP front door's routes, each called once",
    ),
    "What a data plane answers on each RPC and route. Served means it is implemented; whether a call succeeds depends on the model and the request.",
    ...(await grpcSection(served)),
    ...(await httpSection(served)),
  ]);
}

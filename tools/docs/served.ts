import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, type ServiceDefinition } from "@grpc/grpc-js";
import type { FastifyInstance, RouteOptions } from "fastify";
import { pino } from "pino";
import type { Registry } from "prom-client";
import { dataplaneCommand, parsedDataPlaneArguments } from "../../cli/dataplane.js";
import type { DataPlaneArguments } from "../../lib/contract/dataplane.js";
import { startDataPlane } from "../../dataplane/src/dataplane.js";
import { dataPlaneOptions } from "../../dataplane/src/main.js";

/**
 * A data plane started as `dynamo-kserve dataplane` starts it (its defaults, an empty model
 * repository, free ports on 127.0.0.1), with what its servers registered recorded on the way:
 * the gRPC services added to grpc-js and the routes added to fastify. The references are
 * read from this instance, so they say what a running data plane serves, not what a list says.
 */

export interface GrpcMethod {
  /** `/package.Service/Method`. */
  readonly path: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
}

export interface HttpRoute {
  readonly method: string;
  readonly url: string;
}

export interface ServedDataPlane {
  readonly grpcAddress: string;
  /** Every method of every service added to the gRPC server, in the order added. */
  readonly grpcMethods: readonly GrpcMethod[];
  /** Every route of the HTTP front door, in the order registered. */
  readonly httpRoutes: readonly HttpRoute[];
  /** The HTTP front door, to ask without a socket. */
  readonly frontDoor: FastifyInstance;
  readonly metrics: Registry;
  stop(): Promise<void>;
}

/** The data plane's typed arguments for `flags`, as its command line parses them (no environment variable read). */
async function argumentsFor(flags: readonly string[]): Promise<DataPlaneArguments> {
  const variables = dataplaneCommand().options.flatMap((option) =>
    option.envVar === undefined ? [] : [option.envVar],
  );
  const saved = new Map(variables.map((name) => [name, process.env[name]]));
  for (const name of variables) Reflect.deleteProperty(process.env, name);
  try {
    return await parsedDataPlaneArguments(flags);
  } finally {
    for (const [name, value] of saved) if (value !== undefined) process.env[name] = value;
  }
}

/** Records what grpc-js servers add while `run` runs (grpc-js has no hook for it, so addService is wrapped). */
async function recordingGrpcServices<T>(run: () => Promise<T>): Promise<{ result: T; methods: GrpcMethod[] }> {
  const methods: GrpcMethod[] = [];
  const addService = Server.prototype.addService;
  Server.prototype.addService = function (this: Server, service: ServiceDefinition, implementation) {
    for (const { path, requestStream, responseStream } of Object.values(service)) {
      if (!methods.some((method) => method.path === path)) methods.push({ path, requestStream, responseStream });
    }
    return addService.call(this, service, implementation);
  };
  try {
    return { result: await run(), methods };
  } finally {
    Server.prototype.addService = addService;
  }
}

interface RecordedFastify {
  readonly fastify: FastifyInstance;
  readonly routes: HttpRoute[];
}

/** Records the fastify instances created and their routes while `run` runs (fastify's own channel and hook). */
async function recordingFastify<T>(run: () => Promise<T>): Promise<{ result: T; instances: RecordedFastify[] }> {
  const instances: RecordedFastify[] = [];
  const onInstance = (message: unknown): void => {
    const recorded = { fastify: (message as { fastify: FastifyInstance }).fastify, routes: [] as HttpRoute[] };
    instances.push(recorded);
    recorded.fastify.addHook("onRoute", (route: RouteOptions) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) recorded.routes.push({ method: String(method), url: route.url });
    });
  };
  subscribe("fastify.initialization", onInstance);
  try {
    return { result: await run(), instances };
  } finally {
    unsubscribe("fastify.initialization", onInstance);
  }
}

/** The recorded fastify instance listening on `port`. */
function listeningOn(instances: readonly RecordedFastify[], port: number): RecordedFastify {
  const found = instances.find(({ fastify }) => {
    const address = fastify.server.address();
    return typeof address === "object" && address?.port === port;
  });
  if (found === undefined) throw new Error(`no fastify instance of the data plane listens on its HTTP port ${port}`);
  return found;
}

export async function startServedDataPlane(): Promise<ServedDataPlane> {
  const repository = await mkdtemp(join(tmpdir(), "docs-gen-repository-"));
  const args = await argumentsFor([
    ...["--model-repository", repository, "--host", "127.0.0.1"],
    ...["--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"],
  ]);
  const options = dataPlaneOptions(args, pino({ level: "silent" }));
  const recorded = await recordingFastify(() => recordingGrpcServices(() => startDataPlane(options)));
  const { result: running, methods } = recorded.result;
  const frontDoor = listeningOn(recorded.instances, running.httpPort);
  return {
    grpcAddress: `127.0.0.1:${running.grpcPort}`,
    grpcMethods: methods,
    httpRoutes: frontDoor.routes,
    frontDoor: frontDoor.fastify,
    metrics: running.metrics.register,
    stop: async () => {
      await running.stop();
      await rm(repository, { recursive: true, force: true });
    },
  };
}

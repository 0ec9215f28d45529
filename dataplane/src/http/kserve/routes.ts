import type { FastifyInstance, FastifyRequest } from "fastify";
import { MODEL_CONTROL_CALLS } from "../../../../lib/contract/model-control.js";
import type {
  LogSettingsRequest_SettingValue,
  ModelInferResponse,
  ModelRepositoryParameter,
} from "../../../../proto/gen/ts/grpc_service.js";
import { internal, invalidArgument } from "../../../../lib/errors.js";
import { tritonConfigJson } from "../../../../lib/model-repository/config.js";
import { runInference, type Entry } from "../../inference/pipeline.js";
import { httpLifetime } from "../lifetime.js";
import type { FrontDoor } from "../front-door.js";
import { bodyOf, JSON_TYPE, optionalJson } from "../json.js";
import { generateRoutes } from "./generate.js";
import { decodeInferBody } from "./decode-pool.js";
import { HEADER_LENGTH, httpInferReplyOf, splitBody } from "./infer.js";
import { jsonObject } from "./json-tensors.js";
import { modelOf, modelRoutes } from "./model-routes.js";

/**
 * KServe v2 REST (the Open Inference Protocol's HTTP binding) and Triton's HTTP extensions,
 * each route a thin translation onto the operation its gRPC RPC uses.
 */

const INFER: Entry = {
  endpoint: "infer",
  requestType: "unary",
  protocol: "http",
  forDecoupledUse: "/generate_stream, the OpenAI routes with stream, or gRPC ModelStreamInfer",
  // As gRPC ModelInfer: a decoupled model's responses are gathered into one reply when it opts in.
  gathersResponses: "if-the-model-opts-in",
};

export function kserveRoutes(app: FastifyInstance, door: FrontDoor): void {
  const { operations } = door;
  const forModel = modelRoutes(app);

  // Triton's clients read the status, KServe's the body: both are given.
  app.get("/v2/health/live", async (_request, reply) => {
    const live = door.live();
    return reply.code(live ? 200 : 503).send({ live });
  });
  app.get("/v2/health/ready", async (_request, reply) => {
    const ready = door.ready();
    return reply.code(ready ? 200 : 503).send({ ready });
  });
  app.get("/v2", async () => operations.serverMetadata({}));
  app.get("/v2/models/stats", async () => protoJson(await operations.modelStatistics({ name: "", version: "" })));

  forModel("GET", "", async (request) => protoJson(await operations.modelMetadata(modelOf(request))));
  forModel("GET", "/ready", async (request, reply) => {
    const { ready } = await operations.modelReady(modelOf(request));
    return reply.code(ready ? 200 : 400).send({ name: request.params.model, ready });
  });
  forModel("GET", "/config", async (request) => {
    const { config } = await operations.modelConfig(modelOf(request));
    if (config === undefined) throw internal(`model '${request.params.model}' has no configuration`);
    // Every field, defaults included, as Triton shows it: clients read config["max_batch_size"] even when it is 0.
    return tritonConfigJson(config);
  });
  forModel("GET", "/stats", async (request) => protoJson(await operations.modelStatistics(modelOf(request))));
  forModel("POST", "/infer", async (request, reply) => {
    const body = bodyOf(request);
    const { header, binary } = splitBody(body, headerValue(request.headers[HEADER_LENGTH]));
    const { request: inferRequest, reply: form } = await decodeInferBody(header, binary, modelOf(request));
    const lifetime = httpLifetime(request.headers, reply.raw);
    let response: ModelInferResponse | undefined;
    for await (const produced of runInference(door.inference, inferRequest, INFER, lifetime)) response = produced;
    const { body: replyBody, headerLength } = httpInferReplyOf(response!, form);
    if (headerLength !== undefined) reply.header(HEADER_LENGTH, headerLength).type("application/octet-stream");
    else reply.header("content-type", JSON_TYPE);
    return reply.send(replyBody);
  });
  generateRoutes(app, door);

  app.post("/v2/repository/index", async (request) => {
    const body = await optionalJson(request, "the repository index request");
    const ready = body.ready ?? false;
    if (typeof ready !== "boolean") throw invalidArgument("'ready' must be true or false");
    return protoJson((await operations.repositoryIndex({ repositoryName: "", ready })).models);
  });
  app.post<{ Params: { model: string } }>(MODEL_CONTROL_CALLS.load.httpRoute, async (request, reply) => {
    const parameters = repositoryParameters((await optionalJson(request, "the load request")).parameters);
    await operations.repositoryModelLoad({ repositoryName: "", modelName: request.params.model, parameters });
    return reply.code(200).send();
  });
  app.post<{ Params: { model: string } }>(MODEL_CONTROL_CALLS.unload.httpRoute, async (request, reply) => {
    const parameters = repositoryParameters((await optionalJson(request, "the unload request")).parameters);
    await operations.repositoryModelUnload({ repositoryName: "", modelName: request.params.model, parameters });
    return reply.code(200).send();
  });

  app.get("/v2/logging", async () => logSettingsJson((await operations.logSettings({ settings: {} })).settings));
  app.post("/v2/logging", async (request) => {
    const settings = logSettingsRequest(await optionalJson(request, "the log settings request"));
    return logSettingsJson((await operations.logSettings({ settings })).settings);
  });

  // Trace settings answer as their RPC does (501 with the reason).
  for (const url of ["/v2/trace/setting", "/v2/models/:model/trace/setting"]) {
    app.route({
      method: ["GET", "POST"],
      url,
      handler: async () => operations.traceSetting({ modelName: "", settings: {} }),
    });
  }
  sharedMemoryRoutes(app, door);
}

type RegionRequest = FastifyRequest<{ Params: { region?: string } }>;
const regionOf = (request: RegionRequest): string => request.params.region ?? "";

/**
 * Triton's shared-memory extension over HTTP (its http_server.cc): status is a JSON array of
 * the regions, register takes {key, offset?, byte_size} (CUDA: the RPC's fields), unregister
 * one region or all; each the same operation as its gRPC RPC, which owns the rules
 * (--allow-client-shm, keys, bounds) and Triton's errors.
 */
function sharedMemoryRoutes(app: FastifyInstance, { operations, inference }: FrontDoor): void {
  // Triton says client shared memory is off before it looks at the request.
  const allowed = (): void => inference.sharedMemory.checkClientAccess();
  for (const url of ["/v2/systemsharedmemory/status", "/v2/systemsharedmemory/region/:region/status"]) {
    app.get(url, async (request: RegionRequest) =>
      protoJson(Object.values((await operations.systemSharedMemoryStatus({ name: regionOf(request) })).regions)),
    );
  }
  for (const url of ["/v2/cudasharedmemory/status", "/v2/cudasharedmemory/region/:region/status"]) {
    app.get(url, async (request: RegionRequest) =>
      protoJson(Object.values((await operations.cudaSharedMemoryStatus({ name: regionOf(request) })).regions)),
    );
  }
  for (const kind of ["system", "cuda"] as const) {
    // Triton's route pattern also matches register without a region, to say that it needs one.
    app.post(`/v2/${kind}sharedmemory/register`, async () => {
      allowed();
      throw invalidArgument(`'region name' is necessary to register ${kind} shared memory region`);
    });
  }
  app.post("/v2/systemsharedmemory/region/:region/register", async (request: RegionRequest, reply) => {
    allowed();
    const body = await optionalJson(request, "the shared memory register request");
    await operations.systemSharedMemoryRegister({ name: regionOf(request), ...systemRegistration(body) });
    return reply.code(200).send();
  });
  app.post("/v2/cudasharedmemory/region/:region/register", async (request: RegionRequest, reply) => {
    allowed();
    // A server without GPUs reads no body (Triton's non-GPU build refuses before it does).
    await operations.cudaSharedMemoryRegister({
      name: regionOf(request),
      rawHandle: new Uint8Array(),
      deviceId: 0n,
      byteSize: 0n,
    });
    return reply.code(200).send();
  });
  for (const url of ["/v2/systemsharedmemory/unregister", "/v2/systemsharedmemory/region/:region/unregister"]) {
    app.post(url, async (request: RegionRequest, reply) => {
      await operations.systemSharedMemoryUnregister({ name: regionOf(request) });
      return reply.code(200).send();
    });
  }
  for (const url of ["/v2/cudasharedmemory/unregister", "/v2/cudasharedmemory/region/:region/unregister"]) {
    app.post(url, async (request: RegionRequest, reply) => {
      await operations.cudaSharedMemoryUnregister({ name: regionOf(request) });
      return reply.code(200).send();
    });
  }
}

/** A system register body, {key, offset?, byte_size}, checked field by field as Triton's HTTP frontend does. */
function systemRegistration(body: Record<string, unknown>): { key: string; offset: bigint; byteSize: bigint } {
  if (body.key === undefined) throw invalidArgument("Shared memory register request has no 'key' field");
  if (typeof body.key !== "string") throw invalidArgument("Shared memory register request's 'key' must be a string");
  const offset = body.offset === undefined ? 0n : wholeNumber(body.offset, "offset");
  if (body.byte_size === undefined) throw invalidArgument("Shared memory register request has no 'byte_size' field");
  return { key: body.key, offset, byteSize: wholeNumber(body.byte_size, "byte_size") };
}

function wholeNumber(value: unknown, field: string): bigint {
  const whole = typeof value === "bigint" ? value : Number.isSafeInteger(value) ? BigInt(value as number) : -1n;
  if (whole < 0n || whole >= 2n ** 64n) {
    throw invalidArgument(`Shared memory register request's '${field}' must be a whole number >= 0`);
  }
  return whole;
}

const headerValue = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value;

/** A generated message as Triton's JSON shows it: snake_case names, 64-bit numbers as numbers. */
export function protoJson(value: unknown): unknown {
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) return value.map(protoJson);
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [
        key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`),
        protoJson(item),
      ]),
    );
  }
  return value;
}

function repositoryParameters(value: unknown): Record<string, ModelRepositoryParameter> {
  if (value === undefined) return {};
  const parameters: Record<string, ModelRepositoryParameter> = {};
  for (const [key, item] of Object.entries(jsonObject(value, "parameters"))) {
    if (typeof item === "boolean") parameters[key] = { parameterChoice: { $case: "boolParam", value: item } };
    else if (typeof item === "string") parameters[key] = { parameterChoice: { $case: "stringParam", value: item } };
    else if (Number.isSafeInteger(item)) {
      parameters[key] = { parameterChoice: { $case: "int64Param", value: BigInt(item as number) } };
    } else throw invalidArgument(`'parameters.${key}' must be a boolean, a whole number or a string`);
  }
  return parameters;
}

function logSettingsRequest(body: Record<string, unknown>): Record<string, LogSettingsRequest_SettingValue> {
  const settings: Record<string, LogSettingsRequest_SettingValue> = {};
  for (const [key, value] of Object.entries(body)) {
    if (typeof value === "boolean") settings[key] = { parameterChoice: { $case: "boolParam", value } };
    else if (typeof value === "string") settings[key] = { parameterChoice: { $case: "stringParam", value } };
    else if (Number.isInteger(value) && (value as number) >= 0) {
      settings[key] = { parameterChoice: { $case: "uint32Param", value: value as number } };
    } else throw invalidArgument(`log setting '${key}' must be a boolean, a whole number >= 0 or a string`);
  }
  return settings;
}

function logSettingsJson(settings: Record<string, { parameterChoice?: { value: unknown } | undefined }>): unknown {
  return Object.fromEntries(
    Object.entries(settings).map(([key, { parameterChoice }]) => [key, parameterChoice?.value]),
  );
}

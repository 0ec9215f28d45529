import type { FastifyInstance } from "fastify";
import type { ModelInferRequest, ModelInferResponse } from "../../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../../lib/errors.js";
import type { Datatype } from "../../../../lib/model-repository/datatypes.js";
import type { ModelSpec } from "../../../../lib/model-repository/spec.js";
import { ResponseGatherer } from "../../inference/gather.js";
import { runInference, type Entry } from "../../inference/pipeline.js";
import { splitBytesElements } from "../../tensors/bytes.js";
import { rawToTyped } from "../../tensors/typed.js";
import { httpErrorOf } from "../errors.js";
import { httpLifetime } from "../lifetime.js";
import type { FrontDoor } from "../front-door.js";
import { jsonBody, sendJson } from "../json.js";
import { replyWithEvents } from "../sse.js";
import { parametersFromJson, rawFromJson } from "./json-tensors.js";
import { modelOf, modelRoutes, type ModelRequest } from "./model-routes.js";

/**
 * Triton's generate extension: `/generate` and `/generate_stream` (Server-Sent Events)
 * take one JSON object whose fields are the model's inputs by name (a value or an array)
 * plus `parameters` (the request parameters), and answer with the model's outputs by name
 * (one element: the value; more: an array). `/generate` gives one reply: a decoupled model's
 * responses are joined (text outputs concatenated, other outputs the last one).
 */

const GENERATE: Entry = { endpoint: "generate", requestType: "unary", protocol: "http", gathersResponses: true };
const GENERATE_STREAM: Entry = { endpoint: "generate_stream", requestType: "stream", protocol: "http" };

export function generateRoutes(app: FastifyInstance, door: FrontDoor): void {
  const forModel = modelRoutes(app);
  forModel("POST", "/generate", async (request, reply) => {
    const inferRequest = await generateRequest(request, modelOf(request), door);
    const lifetime = httpLifetime(request.headers, reply.raw);
    const gatherer = new ResponseGatherer(door.inference.maxMessageSize, request.params.model);
    for await (const response of runInference(door.inference, inferRequest, GENERATE, lifetime)) gatherer.add(response);
    const gathered = gatherer.result();
    return sendJson(
      reply,
      generateReply(gathered, inferRequest, gathered === undefined ? new Map() : outputValues(gathered)),
    );
  });
  forModel("POST", "/generate_stream", async (request, reply) => {
    const inferRequest = await generateRequest(request, modelOf(request), door);
    const lifetime = httpLifetime(request.headers, reply.raw);
    const responses = runInference(door.inference, inferRequest, GENERATE_STREAM, lifetime)[Symbol.asyncIterator]();
    await replyWithEvents(reply, responses, {
      each: (response) => JSON.stringify(generateReply(response, inferRequest, outputValues(response))),
      error: (error) => JSON.stringify({ error: httpErrorOf(error).message }),
    });
  });
}

async function generateRequest(
  request: ModelRequest,
  model: { name: string; version: string },
  door: FrontDoor,
): Promise<ModelInferRequest> {
  const body = await jsonBody(request, "the generate request");
  const spec = door.inference.registry.resolve(model.name, model.version).model.spec;
  const parameters = parametersFromJson(body.parameters, "parameters");
  const id = body.id;
  if (id !== undefined && typeof id !== "string") throw invalidArgument("'id' must be a string");
  const inputs: ModelInferRequest["inputs"] = [];
  const rawInputContents: Uint8Array[] = [];
  for (const [name, value] of Object.entries(body)) {
    if (name === "parameters" || name === "id") continue;
    const declared = spec.inputs.find((input) => input.name === name);
    if (spec.declaresTensors && declared === undefined) {
      const known = spec.inputs.map((input) => input.name).join(", ");
      throw invalidArgument(`unknown field '${name}': model '${spec.name}' has no such input (its inputs: ${known})`);
    }
    const datatype = declared?.datatype ?? datatypeOfJson(value, name);
    const count = Array.isArray(value) ? value.length : 1;
    const shape = shapeFor(spec, declared?.dims, count);
    rawInputContents.push(rawFromJson(value, datatype, shape, `field '${name}'`));
    inputs.push({ name, datatype, shape: shape.map(BigInt), parameters: {}, contents: undefined });
  }
  return {
    modelName: model.name,
    modelVersion: model.version,
    id: id ?? "",
    parameters,
    inputs,
    outputs: [],
    rawInputContents,
  };
}

/** The shape of a value of `count` elements for an input declared with `dims` (batch of one). */
function shapeFor(spec: ModelSpec, dims: readonly number[] | undefined, count: number): number[] {
  const fixed = dims !== undefined && dims.every((dim) => dim >= 0) && dims.reduce((a, b) => a * b, 1) === count;
  const inner = fixed ? [...dims] : [count];
  return spec.maxBatchSize > 0 ? [1, ...inner] : inner;
}

function datatypeOfJson(value: unknown, name: string): Datatype {
  const first = Array.isArray(value) ? value[0] : value;
  if (typeof first === "string") return "BYTES";
  if (typeof first === "boolean") return "BOOL";
  if (Number.isInteger(first)) return "INT64";
  if (typeof first === "number") return "FP64";
  throw invalidArgument(`field '${name}' must be a string, a boolean, a number or an array of them`);
}

/** A response's outputs by name: one element as the value, more as an array. */
function outputValues(response: ModelInferResponse): Map<string, unknown> {
  const values = new Map<string, unknown>();
  response.outputs.forEach((output, index) => {
    const raw = response.rawOutputContents[index];
    if (raw === undefined) return;
    const datatype = output.datatype as Datatype;
    const elements: unknown[] =
      datatype === "BYTES"
        ? splitBytesElements(raw).map((element) => Buffer.from(element).toString("utf8"))
        : datatype === "FP16" || datatype === "BF16"
          ? []
          : (Object.values(rawToTyped(datatype, raw)).find((field: unknown[]) => field.length > 0) ?? []).map(
              (element: unknown) => (typeof element === "bigint" ? Number(element) : element),
            );
    values.set(output.name, elements.length === 1 ? elements[0] : elements);
  });
  return values;
}

function generateReply(
  response: ModelInferResponse | undefined,
  request: ModelInferRequest,
  outputs: Map<string, unknown>,
): Record<string, unknown> {
  return {
    model_name: request.modelName,
    model_version: response?.modelVersion ?? request.modelVersion,
    ...(request.id !== "" ? { id: request.id } : {}),
    ...Object.fromEntries(outputs),
  };
}

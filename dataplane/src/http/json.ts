import type { FastifyReply, FastifyRequest } from "fastify";
import { decodeJsonBody } from "./kserve/decode-pool.js";
import { jsonObject } from "./kserve/json-tensors.js";

/**
 * JSON in and out of every route: a request body read as a JSON object (a large one parsed
 * off the event loop), a reply sent as exactly application/json.
 */

/**
 * Exactly "application/json", as Triton sends it: the KServe SDK reads an error's message only
 * from a reply of that type (fastify adds a charset to JSON text it is given, not to bytes).
 */
export const JSON_TYPE = "application/json";

/** Replies with `value` as JSON, typed exactly application/json. */
export function sendJson(reply: FastifyReply, value: unknown): FastifyReply {
  return reply.header("content-type", JSON_TYPE).send(Buffer.from(JSON.stringify(value), "utf8"));
}

/** The request body's bytes (empty when there is none). */
export function bodyOf(request: FastifyRequest): Buffer {
  return Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
}

/** A body that must be a JSON object (a large one parsed off the event loop). */
export async function jsonBody(request: FastifyRequest, what: string): Promise<Record<string, unknown>> {
  return jsonObject(await decodeJsonBody(bodyOf(request), what), what);
}

/** A body that is a JSON object, or none at all ({}). */
export async function optionalJson(request: FastifyRequest, what: string): Promise<Record<string, unknown>> {
  return bodyOf(request).length === 0 ? {} : jsonBody(request, what);
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

/** A route's model, and version when the path names one (`/v2/models/{m}[/versions/{v}]`). */
export interface ModelParams {
  model: string;
  version?: string;
}

export type ModelRequest = FastifyRequest<{ Params: ModelParams }>;

/** Registers `handler` for a model, and for one version of it: `/v2/models/{m}[/versions/{v}]{suffix}`. */
export type ForModel = (
  method: "GET" | "POST",
  suffix: string,
  handler: (request: ModelRequest, reply: FastifyReply) => Promise<unknown>,
) => void;

/** The KServe v2 per-model routes of `app`: each path with and without a version. */
export function modelRoutes(app: FastifyInstance): ForModel {
  return (method, suffix, handler) => {
    for (const prefix of ["/v2/models/:model", "/v2/models/:model/versions/:version"]) {
      app.route({ method, url: `${prefix}${suffix}`, handler });
    }
  };
}

/** The model and version a route names (version "" when the path names none). */
export const modelOf = (request: ModelRequest): { name: string; version: string } => ({
  name: request.params.model,
  version: request.params.version ?? "",
});

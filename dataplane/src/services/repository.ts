import type {
  GRPCInferenceServiceServer,
  ModelRepositoryParameter,
  ModelStatistics,
} from "../../../proto/gen/ts/grpc_service.js";
import type { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import { invalidArgument, unimplemented } from "../../../lib/errors.js";
import { parseJson } from "../../../lib/model-repository/config.js";
import type { ModelRegistry } from "../models/registry.js";
import { unary } from "./unary.js";

type RepositoryHandlers = Pick<
  GRPCInferenceServiceServer,
  "repositoryIndex" | "repositoryModelLoad" | "repositoryModelUnload" | "modelStatistics"
>;

/** RepositoryIndex, RepositoryModelLoad/Unload and ModelStatistics. */
export function repositoryHandlers(registry: ModelRegistry): RepositoryHandlers {
  return {
    repositoryIndex: unary(async (request) => ({ models: await registry.index(request.ready) })),
    repositoryModelLoad: unary(async (request) => {
      registry.assertExplicitControl("RepositoryModelLoad");
      await registry.load(request.modelName, configOverride(request.modelName, request.parameters));
      return {};
    }),
    repositoryModelUnload: unary(async (request) => {
      registry.assertExplicitControl("RepositoryModelUnload");
      await registry.unload(request.modelName);
      return {};
    }),
    modelStatistics: unary((request) => ({
      modelStats: registry
        .statistics(request.name, request.version)
        .map((row): ModelStatistics => row.statistics.toProto(row.name, row.version)),
    })),
  };
}

/** The "config" load parameter: a JSON ModelConfig that replaces the repository's. */
function configOverride(
  modelName: string,
  parameters: Record<string, ModelRepositoryParameter>,
): ModelConfig | undefined {
  for (const key of Object.keys(parameters)) {
    if (key.startsWith("file:")) {
      throw unimplemented(
        `RepositoryModelLoad parameter '${key}': model files sent with the request are not supported`,
      );
    }
  }
  const config = parameters["config"]?.parameterChoice;
  if (config === undefined) return undefined;
  if (config.$case !== "stringParam") {
    throw invalidArgument(
      `RepositoryModelLoad parameter 'config' must be a string holding the model configuration as JSON`,
    );
  }
  return parseJson(config.value, `RepositoryModelLoad(${modelName}).parameters["config"]`);
}

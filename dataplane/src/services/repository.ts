import type {
  GRPCInferenceServiceServer,
  ModelRepositoryParameter,
  ModelStatistics,
} from "../../../proto/gen/ts/grpc_service.js";
import type { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import { invalidArgument, unimplemented } from "../../../lib/errors.js";
import { parseJson } from "../../../lib/model-repository/config.js";
import type { ModelRegistry } from "../models/registry.js";
import type { Operations } from "./unary.js";

type RepositoryOperations = Operations<
  Pick<
    GRPCInferenceServiceServer,
    "repositoryIndex" | "repositoryModelLoad" | "repositoryModelUnload" | "modelStatistics"
  >
>;

/** RepositoryIndex, RepositoryModelLoad/Unload and ModelStatistics. */
export function repositoryOperations(registry: ModelRegistry): RepositoryOperations {
  return {
    repositoryIndex: async (request) => ({ models: await registry.index(request.ready) }),
    repositoryModelLoad: async (request) => {
      registry.assertExplicitControl("RepositoryModelLoad");
      await registry.load(request.modelName, configOverride(request.modelName, request.parameters));
      return {};
    },
    repositoryModelUnload: async (request) => {
      registry.assertExplicitControl("RepositoryModelUnload");
      await registry.unload(request.modelName);
      return {};
    },
    modelStatistics: (request) => ({
      modelStats: registry
        .statistics(request.name, request.version)
        .map((row): ModelStatistics => row.statistics.toProto(row.name, row.version)),
    }),
  };
}

/** The "config" load parameter: a JSON ModelConfig that replaces the repository's. */
function configOverride(
  modelName: string,
  parameters: Record<string, ModelRepositoryParameter>,
): ModelConfig | undefined {
  for (const key of Object.keys(parameters)) {
    // Triton's override of model files: the files would have to be written somewhere the
    // engines load from, and a pod's repository is a read-only volume.
    if (key.startsWith("file:")) {
      throw unimplemented(
        `RepositoryModelLoad parameter '${key}': model files sent with the request are not supported; put them in the model repository`,
      );
    }
    if (key !== "config") {
      throw invalidArgument(
        `RepositoryModelLoad: unknown parameter '${key}'; the one load parameter is 'config' (the model configuration as JSON)`,
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

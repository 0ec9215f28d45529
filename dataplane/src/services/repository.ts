import type {
  GRPCInferenceServiceServer,
  ModelRepositoryParameter,
  ModelStatistics,
} from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument, unimplemented } from "../../../lib/errors.js";
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
      checkModelName(request.modelName, "RepositoryModelLoad");
      await registry.load(request.modelName, configOverride(request.parameters));
      return {};
    },
    repositoryModelUnload: async (request) => {
      registry.assertExplicitControl("RepositoryModelUnload");
      checkModelName(request.modelName, "RepositoryModelUnload");
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

/**
 * A model name is a folder (or file) name of the repository: never a path, never empty,
 * no control characters (a NUL would cut the name where the file system reads it).
 */
function checkModelName(name: string, rpc: string): void {
  const problem = modelNameProblem(name);
  if (problem !== undefined) {
    throw invalidArgument(
      `${rpc}: the model name ${problem}; a model name is its folder's name in the model repository`,
    );
  }
}

function modelNameProblem(name: string): string | undefined {
  if (name === "") return "is empty";
  if (name === "." || name === "..") return "is not a folder name";
  if (/[/\\]/.test(name)) return "contains a path separator";
  if ([...name].some((character) => character < " " || character === "\u007f")) return "contains a control character";
  return undefined;
}

/**
 * The "config" load parameter: the model configuration as JSON, applied to the repository's
 * config by the registry (what it may change: lib/model-repository/override.ts).
 */
function configOverride(parameters: Record<string, ModelRepositoryParameter>): string | undefined {
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
  return config.value;
}

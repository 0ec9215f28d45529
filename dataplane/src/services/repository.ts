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
      const { config, modelPath } = loadParameters(request.parameters);
      await registry.load(request.modelName, config, modelPath);
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

/** The load parameters this data plane reads, as RepositoryModelLoad names them. */
const LOAD_PARAMETERS = ["config", "model_path"] as const;

/**
 * The load parameters: "config", the model configuration as JSON, applied to the
 * repository's config by the registry (what it may change: lib/model-repository/override.ts);
 * "model_path", the model's folder (a local path or an object-storage URI) when it is not
 * the repository's, checked by the registry against where the server may load from.
 */
function loadParameters(parameters: Record<string, ModelRepositoryParameter>): {
  config: string | undefined;
  modelPath: string | undefined;
} {
  for (const key of Object.keys(parameters)) {
    // Triton's override of model files: the files would have to be written somewhere the
    // engines load from, and a pod's repository is a read-only volume.
    if (key.startsWith("file:")) {
      throw unimplemented(
        `RepositoryModelLoad parameter '${key}': model files sent with the request are not supported; put them in the model repository`,
      );
    }
    if (!(LOAD_PARAMETERS as readonly string[]).includes(key)) {
      throw invalidArgument(
        `RepositoryModelLoad: unknown parameter '${key}'; the load parameters are 'config' (the model configuration as JSON) and 'model_path' (the model's folder: a path or an object-storage URI under the server's repositories or --model-load-path)`,
      );
    }
  }
  return {
    config: stringParameter(parameters, "config", "the model configuration as JSON"),
    modelPath: stringParameter(parameters, "model_path", "the model's folder, a path or an object-storage URI"),
  };
}

function stringParameter(
  parameters: Record<string, ModelRepositoryParameter>,
  key: string,
  holding: string,
): string | undefined {
  const value = parameters[key]?.parameterChoice;
  if (value === undefined) return undefined;
  if (value.$case !== "stringParam") {
    throw invalidArgument(`RepositoryModelLoad parameter '${key}' must be a string holding ${holding}`);
  }
  return value.value;
}

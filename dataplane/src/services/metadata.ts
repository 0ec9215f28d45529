import type {
  GRPCInferenceServiceServer,
  ModelMetadataResponse_TensorMetadata,
} from "../../../proto/gen/ts/grpc_service.js";
import type { ModelRegistry } from "../models/registry.js";
import type { TensorSpec } from "../../../lib/model-repository/spec.js";
import { VERSION } from "../version.js";
import type { Operations } from "./unary.js";

type MetadataOperations = Operations<
  Pick<GRPCInferenceServiceServer, "serverMetadata" | "modelMetadata" | "modelConfig">
>;

/**
 * The protocol extensions this data plane implements, as ServerMetadata lists them (on
 * gRPC and HTTP alike, as Triton does; binary tensor data and generate are HTTP's).
 */
export const EXTENSIONS = [
  "model_repository",
  "model_configuration",
  "statistics",
  "parameters",
  "logging",
  "binary_tensor_data",
  "generate",
  "system_shared_memory",
  // sequence_batching (as Triton's server metadata names it).
  "sequence",
];

/** ServerMetadata (under `serverName`, --server-name), ModelMetadata and ModelConfig. */
export function metadataOperations(registry: ModelRegistry, serverName: string): MetadataOperations {
  return {
    serverMetadata: () => ({ name: serverName, version: VERSION, extensions: EXTENSIONS }),
    modelMetadata: async (request) => {
      const { model } = registry.resolve(request.name, request.version);
      const { spec, engine } = model;
      if (engine.modelMetadata !== undefined) {
        // The upstream's tensors and platform, under this data plane's name and versions.
        return { ...(await engine.modelMetadata()), name: spec.name, versions: [...model.versions] };
      }
      const describe = (tensor: TensorSpec): ModelMetadataResponse_TensorMetadata => ({
        name: tensor.name,
        datatype: tensor.datatype,
        // As Triton does: a batching model's tensors show the batch dimension as -1.
        shape: (spec.maxBatchSize > 0 ? [-1, ...tensor.dims] : tensor.dims).map(BigInt),
      });
      return {
        name: spec.name,
        versions: [...model.versions],
        platform: spec.platform,
        inputs: spec.inputs.map(describe),
        outputs: spec.outputs.map(describe),
      };
    },
    modelConfig: async (request) => {
      const { spec, engine } = registry.resolve(request.name, request.version).model;
      if (engine.modelConfig === undefined) return { config: spec.config };
      return { config: { ...(await engine.modelConfig()), name: spec.name } };
    },
  };
}

import type { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { ConfigError } from "../model-repository/config.js";
import type { EngineDescription } from "./description.js";
import type { TensorSpec } from "../model-repository/spec.js";

/**
 * `kserve-grpc`: forwards a model's requests to KServe v2 gRPC servers (Triton, MLServer,
 * KServe ModelServer). Parameters: `upstream` (comma-separated host:port; a DNS name
 * stands for every address it resolves to), `routing` (round_robin | least_outstanding),
 * `upstream_model` (default: the model's name), `upstream_version` (default: the
 * upstream's own choice).
 */
export type Routing = "round_robin" | "least_outstanding";

export interface KserveGrpcSettings {
  readonly model: string;
  readonly targets: readonly string[];
  readonly routing: Routing;
  readonly upstreamModel: string;
  readonly upstreamVersion: string;
  readonly decoupled: boolean;
  /** The outputs the config declares (none: replies are not held to any) and its batching, to check upstream replies by. */
  readonly outputs: readonly TensorSpec[];
  readonly maxBatchSize: number;
  /**
   * How long a sequence (requests with a sequence_id) may be idle before the upstream it is
   * bound to is forgotten: the config's sequence_batching.max_sequence_idle_microseconds
   * (the upstream Triton drops the sequence then too), else a minute.
   */
  readonly sequenceIdleMs: number;
  /** The most open sequences remembered; past it the least recently used one goes. */
  readonly maxSequences: number;
}

const DEFAULT_SEQUENCE_IDLE_MS = 60_000;
const MAX_SEQUENCES = 65_536;

export const kserveGrpcEngine: EngineDescription<KserveGrpcSettings> = {
  name: "kserve-grpc",
  scheduled: false,
  settings(spec, source) {
    const targets = (spec.parameters["upstream"] ?? "")
      .split(",")
      .map((target) => target.trim())
      .filter((target) => target !== "");
    if (targets.length === 0) {
      throw new ConfigError(
        source,
        `engine kserve-grpc: set parameters["upstream"] to the upstream's host:port (comma-separated for several)`,
      );
    }
    for (const target of targets) {
      if (!/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/.test(target)) {
        throw new ConfigError(source, `engine kserve-grpc: parameters["upstream"]: '${target}' is not host:port`);
      }
    }
    const routing = spec.parameters["routing"] ?? "round_robin";
    if (routing !== "round_robin" && routing !== "least_outstanding") {
      throw new ConfigError(
        source,
        `engine kserve-grpc: parameters["routing"] must be round_robin or least_outstanding, not '${routing}'`,
      );
    }
    return {
      model: spec.name,
      targets,
      routing,
      upstreamModel: spec.parameters["upstream_model"] ?? spec.name,
      upstreamVersion: spec.parameters["upstream_version"] ?? "",
      decoupled: spec.decoupled,
      outputs: spec.outputs,
      maxBatchSize: spec.maxBatchSize,
      sequenceIdleMs: sequenceIdleMs(spec.config),
      maxSequences: MAX_SEQUENCES,
    };
  },
};

function sequenceIdleMs(config: ModelConfig): number {
  const choice = config.schedulingChoice;
  const micros = choice?.$case === "sequenceBatching" ? choice.value.maxSequenceIdleMicroseconds : 0n;
  return micros > 0n ? Number(micros / 1000n) : DEFAULT_SEQUENCE_IDLE_MS;
}

import type { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { ConfigError } from "../model-repository/config.js";
import type { EngineDescription } from "./description.js";
import type { TensorSpec } from "../model-repository/spec.js";

/**
 * `kserve-grpc`: forwards a model's requests to KServe v2 gRPC servers (Triton, MLServer,
 * KServe ModelServer). Parameters: `upstream` (comma-separated host:port; a DNS name
 * stands for every address it resolves to), `routing` (round_robin | least_outstanding),
 * `upstream_model` (default: the model's name), `upstream_version` (default: the
 * upstream's own choice), and TLS to the upstreams: `upstream_tls` ("true"),
 * `upstream_ca_file` (default: the system's roots), `upstream_cert_file` and
 * `upstream_key_file` (a client certificate, mTLS), `upstream_server_name` (the name the
 * upstream's certificate must carry; also sent as SNI and `:authority`).
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
  /** TLS to the upstreams (absent: plaintext HTTP/2). */
  readonly tls?: UpstreamTlsFiles;
}

/** The PEM files of TLS to the upstreams (read by the engine, again whenever they change). */
export interface UpstreamTlsFiles {
  /** The CA that signed the upstreams' certificates; absent: the system's roots. */
  readonly caFile?: string;
  /** A client certificate and its key (mTLS): both or neither. */
  readonly certFile?: string;
  readonly keyFile?: string;
  /** The name the upstreams' certificates must carry (SNI, `:authority`); absent: the upstream's host. */
  readonly serverName?: string;
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
    const tls = upstreamTls(spec.parameters, source);
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
      ...(tls === undefined ? {} : { tls }),
    };
  },
};

const TLS_FILE_PARAMETERS = ["upstream_ca_file", "upstream_cert_file", "upstream_key_file"] as const;

/** The upstream TLS parameters, checked: each error names the parameter. */
function upstreamTls(parameters: Readonly<Record<string, string>>, source: string): UpstreamTlsFiles | undefined {
  const flag = parameters["upstream_tls"] ?? "false";
  if (flag !== "true" && flag !== "false") {
    throw new ConfigError(
      source,
      `engine kserve-grpc: parameters["upstream_tls"] must be true or false, not '${flag}'`,
    );
  }
  const named = [...TLS_FILE_PARAMETERS, "upstream_server_name"].filter((name) => parameters[name] !== undefined);
  if (flag === "false") {
    if (named.length > 0) {
      throw new ConfigError(
        source,
        `engine kserve-grpc: parameters["${named[0]}"] is set but parameters["upstream_tls"] is not "true"`,
      );
    }
    return undefined;
  }
  for (const name of named) {
    if (parameters[name]!.trim() === "")
      throw new ConfigError(source, `engine kserve-grpc: parameters["${name}"] is empty`);
  }
  const [caFile, certFile, keyFile] = TLS_FILE_PARAMETERS.map((name) => parameters[name]);
  if ((certFile === undefined) !== (keyFile === undefined)) {
    const missing = certFile === undefined ? "upstream_cert_file" : "upstream_key_file";
    throw new ConfigError(
      source,
      `engine kserve-grpc: parameters["${missing}"] is missing: a client certificate needs both upstream_cert_file and upstream_key_file`,
    );
  }
  const serverName = parameters["upstream_server_name"];
  return {
    ...(caFile === undefined ? {} : { caFile }),
    ...(certFile === undefined ? {} : { certFile, keyFile: keyFile! }),
    ...(serverName === undefined ? {} : { serverName }),
  };
}

function sequenceIdleMs(config: ModelConfig): number {
  const choice = config.schedulingChoice;
  const micros = choice?.$case === "sequenceBatching" ? choice.value.maxSequenceIdleMicroseconds : 0n;
  return micros > 0n ? Number(micros / 1000n) : DEFAULT_SEQUENCE_IDLE_MS;
}

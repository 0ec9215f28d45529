import type { V1ConfigMap } from "@kubernetes/client-node";
import { checkEngine } from "../../../lib/engines/catalog.js";
import { errorMessage } from "../../../lib/errors.js";
import { configText, parseModelConfig, type ConfigFormat } from "../../../lib/model-repository/config.js";
import { toModelSpec } from "../../../lib/model-repository/spec.js";
import { SPEC_DEFAULTS, type DynamoKserveModel } from "../api/v1alpha1.js";
import { servedModelName } from "./names.js";

/** A configuration that checked out: what goes into the owned ConfigMap. */
export interface ValidConfig {
  readonly valid: true;
  /** File name in the model repository: `<model>.pbtxt` (text) or `<model>.pb` (binary). */
  readonly fileName: string;
  readonly text?: string;
  readonly binaryBase64?: string;
  readonly backend: string;
}

export interface InvalidConfig {
  readonly valid: false;
  /** A condition reason: ConfigMapNotFound, ConfigKeyNotFound, InvalidConfig. */
  readonly reason: "ConfigMapNotFound" | "ConfigKeyNotFound" | "InvalidConfig";
  readonly message: string;
}

export type ConfigCheck = ValidConfig | InvalidConfig;

/**
 * Reads and checks a model's triton_model_config with the data plane's own parser and
 * checks, so a config the operator accepts is one the data plane will serve.
 * `configMap` is the ConfigMap spec.modelConfig.configMapRef names (undefined if absent).
 */
export function checkModelConfig(model: DynamoKserveModel, configMap: V1ConfigMap | undefined): ConfigCheck {
  const resolved = resolveContent(model, configMap);
  if (!resolved.valid) return resolved;
  const { origin, format, bytes } = resolved;
  const name = servedModelName(model);
  try {
    const config = parseModelConfig(bytes, format, origin);
    if (config.name !== "" && config.name !== name) {
      return invalid(
        "InvalidConfig",
        `${origin}: name '${config.name}' differs from the served model name '${name}' (spec.modelName, else metadata.name); make them equal or drop \`name\` from the config`,
      );
    }
    const spec = toModelSpec(config, origin, name, configText(format, bytes));
    checkEngine(spec, origin);
    const fileName = `${name}.${format === "binary" ? "pb" : "pbtxt"}`;
    return format === "binary"
      ? { valid: true, fileName, binaryBase64: Buffer.from(bytes).toString("base64"), backend: spec.backend }
      : { valid: true, fileName, text: Buffer.from(bytes).toString("utf8"), backend: spec.backend };
  } catch (error) {
    return invalid("InvalidConfig", errorMessage(error));
  }
}

type Resolved = { valid: true; origin: string; format: ConfigFormat; bytes: Uint8Array } | InvalidConfig;

function resolveContent(model: DynamoKserveModel, configMap: V1ConfigMap | undefined): Resolved {
  const source = model.spec.modelConfig;
  if (source.inline !== undefined) {
    return { valid: true, origin: "spec.modelConfig.inline", format: "text", bytes: Buffer.from(source.inline) };
  }
  const ref = source.configMapRef!;
  const key = ref.key ?? SPEC_DEFAULTS.modelConfig.configMapRef.key;
  if (configMap === undefined) {
    return invalid(
      "ConfigMapNotFound",
      `ConfigMap '${ref.name}' (spec.modelConfig.configMapRef) was not found in namespace '${model.metadata.namespace}'`,
    );
  }
  const origin = `configmap/${ref.name}[${key}]`;
  const text = configMap.data?.[key];
  if (text !== undefined) return { valid: true, origin, format: "text", bytes: Buffer.from(text) };
  const binary = configMap.binaryData?.[key];
  if (binary !== undefined) return { valid: true, origin, format: "binary", bytes: Buffer.from(binary, "base64") };
  const keys = [...Object.keys(configMap.data ?? {}), ...Object.keys(configMap.binaryData ?? {})];
  return invalid(
    "ConfigKeyNotFound",
    `ConfigMap '${ref.name}' has no key '${key}' (spec.modelConfig.configMapRef.key); its keys: ${keys.join(", ") || "(none)"}`,
  );
}

const invalid = (reason: InvalidConfig["reason"], message: string): InvalidConfig => ({
  valid: false,
  reason,
  message,
});

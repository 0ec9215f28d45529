import { fromJson, toBinary, type DescField, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { isDeepStrictEqual } from "node:util";
import { ModelConfigSchema } from "../../proto/gen/es/model_config_pb.js";
import { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { ConfigError, parseJson, protoFieldJson } from "./config.js";

/**
 * A load request's config override (RepositoryModelLoad's "config" parameter) applied to a
 * model of the repository. Triton lets the override stand in for config.pbtxt; here it may
 * change how a model is served (batching, instances, tensors, version policy, transaction
 * policy, ...) but never what decides where the model connects, which secrets it reads or
 * which code and files it runs: those fields stay as the repository says. A caller of the
 * load RPC therefore cannot point a model at its own server (with `api_key_env` naming a
 * secret of the server's environment), at an internal address, or at a file outside the
 * model's folder. Fields the override leaves out are taken from the model's own config, so
 * `{"max_batch_size": 16}` alone is a complete override, as Triton completes it.
 */

/**
 * The fields only the repository may set: the engine (backend, platform, runtime and the
 * `parameters` that hold engine, url, upstream, api_key_env), the files it runs
 * (default_model_filename, cc_model_filenames, model_warmup's data files) and repository
 * agents (code run on the model's files).
 */
export const REPOSITORY_ONLY_FIELDS: readonly string[] = [
  "backend",
  "platform",
  "runtime",
  "parameters",
  "default_model_filename",
  "cc_model_filenames",
  "model_warmup",
  "model_repository_agents",
];

/**
 * The config `modelName` is loaded with when a load request carries `overrideJson`: `base`
 * (its config as read from the repository, completed) with the fields the override sets
 * replaced. Throws a ConfigError naming the field when the override is not valid JSON for a
 * ModelConfig, names another model, or changes a field only the repository may set.
 */
export function applyConfigOverride(
  modelName: string,
  base: ModelConfig,
  overrideJson: string,
  source: string,
): ModelConfig {
  const override = parseJson(overrideJson, source);
  const baseJson = asObject(protoFieldJson(base));
  const overrideFields = asObject(protoFieldJson(override));
  /** The base's fields the override replaces (left out when it sets them to their default). */
  const replaced = new Set<string>();
  const replacements: [string, JsonValue][] = [];
  for (const field of fieldsSetIn(overrideJson, source)) {
    const value = overrideFields[field.name];
    if (field.name === "name") {
      if (value !== undefined && value !== modelName) {
        throw new ConfigError(source, `name: '${String(value)}' is not the model loaded ('${modelName}')`);
      }
      continue;
    }
    if (REPOSITORY_ONLY_FIELDS.includes(field.name) && !isDeepStrictEqual(value, baseJson[field.name])) {
      throw new ConfigError(
        source,
        `'${field.name}' cannot be changed by a load request: it decides where the model connects, which secrets it reads or which code it runs; change it in the model repository (fields a load request may not change: ${REPOSITORY_ONLY_FIELDS.join(", ")})`,
      );
    }
    // A member of a oneof (dynamic_batching, sequence_batching, ensemble_scheduling) replaces the base's choice.
    for (const sibling of field.oneof?.fields ?? [field]) replaced.add(sibling.name);
    if (value !== undefined) replacements.push([field.name, value]);
  }
  const merged: JsonObject = Object.fromEntries([
    ...Object.entries(baseJson).filter(([name]) => !replaced.has(name)),
    ...replacements,
  ]);
  return ModelConfig.decode(toBinary(ModelConfigSchema, fromJson(ModelConfigSchema, merged)));
}

const asObject = (json: JsonValue): JsonObject =>
  json !== null && typeof json === "object" && !Array.isArray(json) ? json : {};

/**
 * The ModelConfig fields an override's JSON names (by proto or JSON name): a field it sets to
 * its default counts too, so `"max_batch_size": 0` turns batching off.
 */
function fieldsSetIn(overrideJson: string, source: string): DescField[] {
  const keys = Object.keys(asObject(JSON.parse(overrideJson) as JsonValue));
  return keys.map((key) => {
    const field = ModelConfigSchema.fields.find((candidate) => candidate.name === key || candidate.jsonName === key);
    // parseJson already refused unknown fields; this keeps the two readings in step.
    if (field === undefined) throw new ConfigError(source, `'${key}' is not a field of ModelConfig`);
    return field;
  });
}

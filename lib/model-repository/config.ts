import {
  fromBinary,
  fromJsonString,
  ScalarType,
  toBinary,
  toJson,
  type DescMessage,
  type JsonValue,
} from "@bufbuild/protobuf";
import { fromText, toText } from "@bufbuild/protobuf/txtpb";
import { ModelConfigSchema } from "../../proto/gen/es/model_config_pb.js";
import { ModelConfig } from "../../proto/gen/ts/model_config.js";
import { DataPlaneError, errorMessage } from "../errors.js";

/**
 * Reading Triton model configurations. The text format (config.pbtxt) and JSON are
 * parsed by protobuf-es against the schema generated from model_config.proto; the
 * result is handed to the rest of the data plane as ts-proto's ModelConfig, the one
 * type the services and engines use.
 */

export type ConfigFormat = "text" | "binary" | "json";

/** A configuration that could not be read, with where and why. */
export class ConfigError extends DataPlaneError {
  constructor(
    readonly source: string,
    readonly detail: string,
    readonly line?: number,
  ) {
    super("InvalidArgument", `${source}${line === undefined ? "" : `:${line}`}: ${detail}`);
  }
}

/**
 * A configuration this data plane reads but whose engine cannot run a feature it asks for
 * (implicit sequence state, request rescheduling, ...): a config Triton would serve, so
 * --forward-unsupported forwards the model, giving `detail` as the reason.
 */
export class UnsupportedFeature extends ConfigError {}

const TEXT_EXTENSIONS = [".pbtxt", ".txtpb", ".textproto", ".prototxt"];
const BINARY_EXTENSIONS = [".pb", ".binpb"];

/** The format of a configuration file, from its name; undefined if it is not one. */
export function configFormatOf(fileName: string): ConfigFormat | undefined {
  const lower = fileName.toLowerCase();
  if (TEXT_EXTENSIONS.some((ext) => lower.endsWith(ext))) return "text";
  if (BINARY_EXTENSIONS.some((ext) => lower.endsWith(ext))) return "binary";
  if (lower.endsWith(".json")) return "json";
  return undefined;
}

export function parseModelConfig(content: Uint8Array, format: ConfigFormat, source: string): ModelConfig {
  switch (format) {
    case "binary":
      return parseBinary(content, source);
    case "json":
      return parseJson(decodeUtf8(content, source), source);
    case "text":
      return parseText(decodeUtf8(content, source), source);
  }
}

export function parseText(text: string, source: string): ModelConfig {
  try {
    return ModelConfig.decode(toBinary(ModelConfigSchema, fromText(ModelConfigSchema, text)));
  } catch (error) {
    const detail = errorMessage(error);
    const line = locateTextError(text, detail);
    const lineText = text.split("\n")[line - 1]?.trim() ?? "";
    throw new ConfigError(source, lineText ? `${detail} (at '${lineText}')` : detail, line);
  }
}

/** A configuration's text (for error lines), when it is in the text format. */
export function configText(format: ConfigFormat | undefined, content: Uint8Array | undefined): string | undefined {
  return format === "text" && content !== undefined ? Buffer.from(content).toString("utf8") : undefined;
}

/** A configuration as config.pbtxt text (protobuf-es's text format writer), e.g. normalized by `migrate`. */
export function formatText(config: ModelConfig): string {
  return toText(ModelConfigSchema, asSchemaMessage(config));
}

/**
 * A configuration in the JSON mapping with the proto's field names, as Triton's HTTP config
 * endpoint shows it: 64-bit integers (dims, delays) as JSON numbers, as Triton writes them,
 * not the strings of protobuf's JSON mapping.
 */
export function configJson(config: ModelConfig): JsonValue {
  return int64AsNumbers(ModelConfigSchema, protoFieldJson(config));
}

/** A config in protobuf's JSON mapping with the proto's field names, defaults left out (64-bit integers as strings). */
export const protoFieldJson = (config: ModelConfig): JsonValue =>
  toJson(ModelConfigSchema, asSchemaMessage(config), { useProtoFieldName: true });

/** ts-proto's ModelConfig as protobuf-es's message, for the text format and JSON writers. */
const asSchemaMessage = (config: ModelConfig) => fromBinary(ModelConfigSchema, ModelConfig.encode(config).finish());

/**
 * The configuration a Triton Python model's initialize is given (`args["model_config"]`):
 * Triton's JSON form, with every field present (defaults included) so that a model can read
 * `model_config["max_batch_size"]` whatever config.pbtxt left out.
 */
export function tritonConfigJson(config: ModelConfig): JsonValue {
  const json = toJson(ModelConfigSchema, asSchemaMessage(config), {
    useProtoFieldName: true,
    alwaysEmitImplicit: true,
  });
  return int64AsNumbers(ModelConfigSchema, json);
}

const INT64_TYPES: ReadonlySet<ScalarType> = new Set([
  ScalarType.INT64,
  ScalarType.UINT64,
  ScalarType.FIXED64,
  ScalarType.SFIXED64,
  ScalarType.SINT64,
]);

/** The message's 64-bit integers, which protobuf's JSON mapping writes as strings, as numbers. */
function int64AsNumbers(schema: DescMessage, json: JsonValue): JsonValue {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return json;
  const result: Record<string, JsonValue> = { ...json };
  for (const field of schema.fields) {
    const value = result[field.name];
    if (value === undefined || value === null) continue;
    const convert = (item: JsonValue): JsonValue => {
      if (field.message !== undefined) return int64AsNumbers(field.message, item);
      return field.scalar !== undefined && INT64_TYPES.has(field.scalar) && typeof item === "string"
        ? Number(item)
        : item;
    };
    if (field.fieldKind === "list" && Array.isArray(value)) result[field.name] = value.map(convert);
    else if (field.fieldKind === "map" && typeof value === "object" && !Array.isArray(value)) {
      result[field.name] = Object.fromEntries(Object.entries(value).map(([key, item]) => [key, convert(item)]));
    } else if (field.fieldKind === "message" || field.fieldKind === "scalar") result[field.name] = convert(value);
  }
  return result;
}

/** The JSON mapping of ModelConfig, as RepositoryModelLoad's "config" parameter carries it. */
export function parseJson(json: string, source: string): ModelConfig {
  try {
    return ModelConfig.decode(toBinary(ModelConfigSchema, fromJsonString(ModelConfigSchema, json)));
  } catch (error) {
    throw new ConfigError(source, errorMessage(error));
  }
}

export function parseBinary(content: Uint8Array, source: string): ModelConfig {
  try {
    return ModelConfig.decode(content);
  } catch (error) {
    throw new ConfigError(source, `not a serialized inference.ModelConfig: ${errorMessage(error)}`);
  }
}

function decodeUtf8(content: Uint8Array, source: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(content);
  } catch {
    throw new ConfigError(source, "not valid UTF-8 text");
  }
}

/**
 * The line a text-format error belongs to. The parser reports no positions, so we look
 * for the shortest prefix of whole lines that fails with the same message: the parser
 * reads tokens in order, so that prefix ends at the token that caused the error. Text
 * format strings cannot span lines, so cutting at line ends never splits a token.
 */
function locateTextError(text: string, message: string): number {
  const lines = text.split("\n");
  const failsTheSame = (count: number): boolean => {
    try {
      fromText(ModelConfigSchema, lines.slice(0, count).join("\n"));
      return false;
    } catch (error) {
      return errorMessage(error) === message;
    }
  };
  let low = 1;
  let high = lines.length;
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    if (failsTheSame(middle)) high = middle;
    else low = middle + 1;
  }
  return low;
}

import type {
  InferParameter,
  ModelInferRequest,
  ModelInferRequest_InferInputTensor,
  ModelInferResponse,
} from "../../../../proto/gen/ts/grpc_service.js";
import { internal, invalidArgument, unimplemented } from "../../../../lib/errors.js";
import { DATATYPES } from "../../../../lib/model-repository/datatypes.js";
import { countBytesElements } from "../../tensors/bytes.js";
import { elementCount } from "../../tensors/tensor.js";
import { typedToRaw } from "../../tensors/typed.js";
import { parametersToJson } from "../../tensors/parameters.js";
import {
  datatypeFromJson,
  jsonObject,
  jsonTextOfRaw,
  parametersFromJson,
  rawFromJson,
  shapeFromJson,
} from "./json-tensors.js";
import { jsonText, MAX_JSON_VALUES, parseJsonText } from "../../tensors/json-text.js";
import { SHM_BYTE_SIZE, SHM_OFFSET, SHM_REGION } from "../../shared-memory/tensors.js";

/**
 * The KServe v2 infer body, JSON or with Triton's binary tensor data extension: the JSON
 * inference header (its length in the `Inference-Header-Content-Length` header), then the
 * binary tensors back to back, each announced by `parameters.binary_data_size`. Replies put
 * outputs asked for with `binary_data` (or every output, with the request parameter
 * `binary_data_output`) after the JSON header the same way.
 */

export const HEADER_LENGTH = "inference-header-content-length";

/** What the reply must look like, read from the request. */
export interface ReplyForm {
  /** Output names whose data go in binary form; `all` for every output. */
  readonly binaryOutputs: ReadonlySet<string> | "all";
  /** Output names written into a shared-memory region: the reply carries no data for them. */
  readonly sharedMemoryOutputs: ReadonlySet<string>;
}

/** model_name / model_version: the KServe SDK repeats the path's model in the body. */
const REQUEST_FIELDS = new Set(["id", "parameters", "inputs", "outputs", "model_name", "model_version"]);
const INPUT_FIELDS = new Set(["name", "shape", "datatype", "parameters", "data"]);
const OUTPUT_FIELDS = new Set(["name", "parameters"]);

/** Splits a body into its JSON header and its binary part; `headerLength` is the header's value. */
export function splitBody(body: Buffer, headerLength: string | undefined): { header: Buffer; binary: Buffer } {
  if (headerLength === undefined) return { header: body, binary: body.subarray(body.length) };
  const length = Number(headerLength);
  if (!/^\d+$/.test(headerLength) || length > body.length) {
    throw invalidArgument(
      `header 'Inference-Header-Content-Length' (${headerLength}) must be a whole number no larger than the body (${body.length} bytes)`,
    );
  }
  return { header: body.subarray(0, length), binary: body.subarray(length) };
}

/** A JSON body other than an infer body (values bounded), or an error naming it. */
export function parseJsonBody(body: Buffer, what: string): unknown {
  return parseJsonText(body.toString("utf8"), what, { maxValues: MAX_JSON_VALUES });
}

/**
 * The inference header. JSON numbers are doubles to JSON.parse, so INT64 and UINT64 values
 * beyond 2^53 would change: whole numbers too large for a double are read as bigints.
 */
export function parseInferHeader(header: Buffer): unknown {
  return parseJsonText(header.toString("utf8"), "the inference request header", { exactIntegers: true });
}

/** A ModelInferRequest from the JSON header and the binary part; every input in raw form. */
export function inferRequestOf(
  json: unknown,
  binary: Buffer,
  model: { name: string; version: string },
): { request: ModelInferRequest; reply: ReplyForm } {
  const body = jsonObject(json, "request body");
  rejectUnknown(body, REQUEST_FIELDS, "");
  if (body.id !== undefined && typeof body.id !== "string") throw invalidArgument("'id' must be a string");
  for (const [field, inPath] of [
    ["model_name", model.name],
    ["model_version", model.version],
  ] as const) {
    const value = body[field];
    if (value !== undefined && value !== inPath && !(field === "model_version" && value === "")) {
      throw invalidArgument(`'${field}' (${JSON.stringify(value)}) differs from the URL's '${inPath}'`);
    }
  }
  const parameters = parametersFromJson(body.parameters, "parameters");
  if (!Array.isArray(body.inputs)) throw invalidArgument("'inputs' must be an array of tensors");
  let offset = 0;
  const rawInputContents: Uint8Array[] = [];
  const inputs = body.inputs.map((item: unknown, index): ModelInferRequest_InferInputTensor => {
    const input = jsonObject(item, `inputs[${index}]`);
    rejectUnknown(input, INPUT_FIELDS, `inputs[${index}].`);
    if (typeof input.name !== "string") throw invalidArgument(`'inputs[${index}].name' must be a string`);
    const field = `inputs[${index}] '${input.name}'`;
    const datatype = datatypeFromJson(input.datatype, `inputs[${index}].datatype`);
    const shape = shapeFromJson(input.shape, `inputs[${index}].shape`);
    const inputParameters = parametersFromJson(input.parameters, `inputs[${index}].parameters`);
    const inSharedMemory = namesSharedMemory(inputParameters, `inputs[${index}].parameters`);
    const size = inputParameters["binary_data_size"]?.parameterChoice;
    checkOneSource(input.data !== undefined, size !== undefined, inSharedMemory, field);
    // Read from its region by the pipeline; the binary part, like gRPC's raw_input_contents,
    // holds only the other inputs' data (Triton's index rule).
    if (inSharedMemory) {
      return { name: input.name, datatype, shape: shape.map(BigInt), parameters: inputParameters, contents: undefined };
    }
    if (size !== undefined) {
      if (size.$case !== "int64Param" || size.value < 0n) {
        throw invalidArgument(`'inputs[${index}].parameters.binary_data_size' must be a whole number >= 0`);
      }
      const end = offset + Number(size.value);
      if (end > binary.length) {
        throw invalidArgument(
          `${field}: binary_data_size ${size.value} runs past the end of the body (${binary.length - offset} bytes of binary data left)`,
        );
      }
      rawInputContents.push(checkBinary(binary.subarray(offset, end), datatype, shape, field));
      offset = end;
      delete inputParameters["binary_data_size"];
    } else {
      rawInputContents.push(rawFromJson(input.data, datatype, shape, field));
    }
    return { name: input.name, datatype, shape: shape.map(BigInt), parameters: inputParameters, contents: undefined };
  });
  if (offset !== binary.length) {
    throw invalidArgument(
      `the body has ${binary.length - offset} bytes of binary data that no input's binary_data_size accounts for`,
    );
  }
  const binaryOutputs = new Set<string>();
  const sharedMemoryOutputs = new Set<string>();
  const outputsJson = body.outputs ?? [];
  if (!Array.isArray(outputsJson)) throw invalidArgument("'outputs' must be an array");
  const outputs = outputsJson.map((item: unknown, index) => {
    const output = jsonObject(item, `outputs[${index}]`);
    rejectUnknown(output, OUTPUT_FIELDS, `outputs[${index}].`);
    if (typeof output.name !== "string") throw invalidArgument(`'outputs[${index}].name' must be a string`);
    const outputParameters = parametersFromJson(output.parameters, `outputs[${index}].parameters`);
    const inSharedMemory = namesSharedMemory(outputParameters, `outputs[${index}].parameters`);
    const binaryData = outputParameters["binary_data"]?.parameterChoice;
    if (inSharedMemory) {
      // Triton's checks, in its order (ValidateOutputParameter).
      if (outputParameters["classification"] !== undefined) {
        throw invalidArgument(
          `outputs[${index}] '${output.name}': Output can't set both 'shared_memory_region' and 'classification'`,
        );
      }
      if (binaryData?.$case === "boolParam" && binaryData.value) {
        throw invalidArgument(
          `outputs[${index}] '${output.name}': Output can't set both 'shared_memory_region' and 'binary_data'`,
        );
      }
      sharedMemoryOutputs.add(output.name);
    }
    if (binaryData !== undefined) {
      if (binaryData.$case !== "boolParam") {
        throw invalidArgument(`'outputs[${index}].parameters.binary_data' must be true or false`);
      }
      if (binaryData.value) binaryOutputs.add(output.name);
      delete outputParameters["binary_data"];
    }
    if (outputParameters["classification"] !== undefined) {
      throw unimplemented(
        `'outputs[${index}].parameters.classification': the classification extension is not implemented`,
      );
    }
    return { name: output.name, parameters: outputParameters };
  });
  // A request parameter that steers this protocol, not the model: it is not passed on.
  const allBinary = parameters["binary_data_output"]?.parameterChoice;
  if (allBinary !== undefined && allBinary.$case !== "boolParam") {
    throw invalidArgument("'parameters.binary_data_output' must be true or false");
  }
  delete parameters["binary_data_output"];
  const request: ModelInferRequest = {
    modelName: model.name,
    modelVersion: model.version,
    id: (body.id as string | undefined) ?? "",
    parameters,
    inputs,
    outputs,
    rawInputContents,
  };
  return {
    request,
    reply: { binaryOutputs: allBinary?.value === true ? "all" : binaryOutputs, sharedMemoryOutputs },
  };
}

/**
 * True when a tensor's parameters name a shared-memory region; its region, offset and byte
 * size checked as JSON gives them (the pipeline reads them as gRPC's parameters).
 */
function namesSharedMemory(parameters: Readonly<Record<string, InferParameter>>, field: string): boolean {
  const region = parameters[SHM_REGION]?.parameterChoice;
  if (region !== undefined && region.$case !== "stringParam") {
    throw invalidArgument(`'${field}.${SHM_REGION}' must be a string`);
  }
  for (const name of [SHM_OFFSET, SHM_BYTE_SIZE]) {
    const value = parameters[name]?.parameterChoice;
    if (value !== undefined && (value.$case !== "int64Param" || value.value < 0n)) {
      throw invalidArgument(`'${field}.${name}' must be a whole number >= 0`);
    }
  }
  return region !== undefined;
}

/** An input's data comes from exactly one place: JSON `data`, the binary part, or a shared-memory region. */
function checkOneSource(data: boolean, binary: boolean, sharedMemory: boolean, field: string): void {
  const set = [data && "'data'", binary && "'binary_data_size'", sharedMemory && "'shared_memory_region'"].filter(
    (name): name is string => name !== false,
  );
  if (set.length === 1) return;
  // Triton's words (ValidateInputContentType), after the input they are about.
  throw invalidArgument(
    `${field}: Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', ` +
      `'shared_memory_region' in 'parameters'. But ${set.length === 0 ? "no field is set" : `set ${set.join(" ")}`}`,
  );
}

function rejectUnknown(object: Record<string, unknown>, known: ReadonlySet<string>, prefix: string): void {
  for (const key of Object.keys(object)) {
    if (!known.has(key)) {
      throw invalidArgument(`unknown field '${prefix}${key}'; known: ${[...known].join(", ")}`);
    }
  }
}

/** Binary tensor data checked against the tensor's shape (the pipeline checks it against the model). */
function checkBinary(data: Uint8Array, datatype: keyof typeof DATATYPES, shape: number[], field: string): Uint8Array {
  const count = elementCount(shape);
  if (datatype === "BYTES") {
    const found = countBytesElements(data, field);
    if (found !== count) {
      throw invalidArgument(
        `${field}: shape [${shape.join(",")}] needs ${count} BYTES elements, binary data holds ${found}`,
      );
    }
  } else if (data.length !== count * DATATYPES[datatype].byteSize) {
    throw invalidArgument(
      `${field}: binary_data_size is ${data.length} bytes, but shape [${shape.join(",")}] of ${datatype} needs ${count * DATATYPES[datatype].byteSize}`,
    );
  }
  return data;
}

/** An infer reply as KServe v2 REST sends it: the body, and how long its JSON header is. */
export interface HttpInferReply {
  readonly body: Buffer;
  /** Set when binary outputs follow the JSON header. */
  readonly headerLength: number | undefined;
}

/** A ModelInferResponse as the KServe v2 JSON reply, binary outputs after the header. */
export function httpInferReplyOf(response: ModelInferResponse, form: ReplyForm): HttpInferReply {
  const binaries: Uint8Array[] = [];
  const outputs = response.outputs.map((output, index) => {
    const datatype = datatypeFromJson(output.datatype, `outputs[${index}].datatype`);
    const head = `{"name":${JSON.stringify(output.name)},"datatype":"${datatype}","shape":[${output.shape.join(",")}]`;
    const parameters = parametersToJson(output.parameters);
    // Its data is in the client's region already: the reply says only what it is (Triton alike).
    if (form.sharedMemoryOutputs.has(output.name)) {
      return Object.keys(parameters).length > 0 ? `${head},"parameters":${jsonText(parameters)}}` : `${head}}`;
    }
    const raw =
      response.rawOutputContents[index] ??
      typedToRaw(output.name, datatype, output.contents!, elementCount(output.shape.map(Number)));
    // FP16 and BF16 have no JSON form: they always travel in binary.
    const binary =
      form.binaryOutputs === "all" ||
      form.binaryOutputs.has(output.name) ||
      DATATYPES[datatype].typedField === undefined;
    if (binary) {
      binaries.push(raw);
      return `${head},"parameters":${jsonText({ ...parameters, binary_data_size: raw.byteLength })}}`;
    }
    const shown = Object.keys(parameters).length > 0 ? `,"parameters":${jsonText(parameters)}` : "";
    return `${head}${shown},"data":${jsonTextOfRaw(datatype, raw)}}`;
  });
  if (response.outputs.length !== response.rawOutputContents.length && response.rawOutputContents.length > 0) {
    throw internal("the reply's raw outputs do not match its outputs");
  }
  const parameters = parametersToJson(response.parameters);
  const header =
    `{"model_name":${JSON.stringify(response.modelName)},"model_version":${JSON.stringify(response.modelVersion)}` +
    (response.id !== "" ? `,"id":${JSON.stringify(response.id)}` : "") +
    (Object.keys(parameters).length > 0 ? `,"parameters":${jsonText(parameters)}` : "") +
    `,"outputs":[${outputs.join(",")}]}`;
  const json = Buffer.from(header, "utf8");
  if (binaries.length === 0) return { body: json, headerLength: undefined };
  return { body: Buffer.concat([json, ...binaries]), headerLength: json.length };
}

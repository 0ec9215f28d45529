import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import {
  ModelInferRequest,
  ModelInferRequest_ParametersEntry,
  type InferParameter,
} from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../lib/errors.js";
import { asBuffer } from "../tensors/wire.js";
import type { RequestHead } from "../inference/request-scope.js";

/**
 * Inference requests as grpc-js hands them to the services. Most are decoded by the
 * generated code (tensor bytes stay views of the received message), with the message's own
 * bytes kept beside it so a forwarded model can send it on as it came. A request to a model
 * that passes requests through undecoded (a kserve-grpc model that declares no tensors,
 * inference/forward.ts) is not decoded at all: only its top-level fields are read, and it
 * reaches the service as a PassThroughRequest holding the bytes. Nothing is copied either way.
 */
const received = new WeakMap<ModelInferRequest, Uint8Array>();

export function decodeInferRequest(bytes: Uint8Array): ModelInferRequest {
  const request = ModelInferRequest.decode(bytes);
  received.set(request, bytes);
  return request;
}

/** The bytes a request decoded here came in (undefined for a request built in-process, e.g. from HTTP). */
export function receivedBytesOf(request: ModelInferRequest): Uint8Array | undefined {
  return received.get(request);
}

/** A ModelInferRequest left encoded for a model that passes it through: its bytes and its head. */
export class PassThroughRequest implements RequestHead {
  constructor(
    /** The message as received (no gRPC frame header). */
    readonly bytes: Uint8Array,
    readonly modelName: string,
    readonly modelVersion: string,
    readonly id: string,
    readonly parameters: Readonly<Record<string, InferParameter>>,
  ) {}

  /**
   * The request decoded after all (its model stopped passing requests through before
   * admission). Throws INVALID_ARGUMENT if its tensors are malformed: only its top-level
   * fields were read when it arrived, so this is the first full read of it.
   */
  decoded(): ModelInferRequest {
    try {
      return decodeInferRequest(this.bytes);
    } catch (error) {
      throw invalidArgument(
        `the request to model '${this.modelName}' could not be decoded: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
}

/** An inference request as a service receives it. */
export type ReceivedInferRequest = ModelInferRequest | PassThroughRequest;

export const isPassThrough = (request: ReceivedInferRequest): request is PassThroughRequest =>
  request instanceof PassThroughRequest;

/** The request decoded (a PassThroughRequest decoded now). */
export const decodedRequest = (request: ReceivedInferRequest): ModelInferRequest =>
  isPassThrough(request) ? request.decoded() : request;

/**
 * A gRPC method's request deserializer: a request naming a model in `passThrough` stays
 * encoded, unless one of its tensors names a shared-memory region (those are resolved here:
 * the upstream cannot read this host's regions); every other request is decoded. A request
 * to any other model pays one Set lookup on the name at the message's head (encoders write
 * it first; only a message that does not begin with it has its top-level fields read).
 */
export function inferRequestDecoder(passThrough: ReadonlySet<string>): (bytes: Uint8Array) => ReceivedInferRequest {
  return (bytes) => {
    if (passThrough.size === 0) return decodeInferRequest(bytes);
    const leading = leadingModelName(bytes);
    if (leading !== undefined && !passThrough.has(leading)) return decodeInferRequest(bytes);
    const head = readHead(bytes);
    if (head === undefined || !passThrough.has(head.modelName) || head.namesSharedMemory)
      return decodeInferRequest(bytes);
    return new PassThroughRequest(bytes, head.modelName, head.modelVersion, head.id, head.parameters);
  };
}

/** model_name's tag: field 1, length-delimited. */
const MODEL_NAME_TAG = 0x0a;

/**
 * The model_name the message begins with; undefined when it begins with another field. (A
 * later model_name would win, as protobuf's last value does: such a request is decoded,
 * which serves it right whatever it names.)
 */
function leadingModelName(bytes: Uint8Array): string | undefined {
  if (bytes[0] !== MODEL_NAME_TAG) return undefined;
  try {
    const reader = new BinaryReader(bytes);
    reader.tag();
    return reader.string();
  } catch {
    return "";
  }
}

// ModelInferRequest's top-level fields (proto/grpc_service.proto).
const MODEL_NAME = 1;
const MODEL_VERSION = 2;
const ID = 3;
const PARAMETERS = 4;
const INPUTS = 5;
const OUTPUTS = 6;

/** The parameter key by which a tensor names its system shared-memory region. */
const SHARED_MEMORY_KEY = Buffer.from("shared_memory_region");

interface ReadHead extends RequestHead {
  /** An input or output may name a shared-memory region (the key's bytes appear in one). */
  readonly namesSharedMemory: boolean;
}

/**
 * One pass over the message's top-level fields, with the generated decoder's rules (the last
 * of a repeated scalar wins, a field of an unexpected wire type is skipped); tensors are
 * skipped, never read. Undefined for a malformed message: the full decode then reports it.
 */
function readHead(bytes: Uint8Array): ReadHead | undefined {
  const reader = new BinaryReader(bytes);
  let modelName = "";
  let modelVersion = "";
  let id = "";
  let parameters: Record<string, InferParameter> | undefined;
  let namesSharedMemory = false;
  try {
    while (reader.pos < reader.len) {
      const [number, wireType] = reader.tag();
      if (wireType !== WireType.LengthDelimited || number > OUTPUTS) {
        reader.skip(wireType, number);
        continue;
      }
      if (number === MODEL_NAME) modelName = reader.string();
      else if (number === MODEL_VERSION) modelVersion = reader.string();
      else if (number === ID) id = reader.string();
      else if (number === PARAMETERS) {
        const entry = ModelInferRequest_ParametersEntry.decode(reader, reader.uint32());
        if (entry.value !== undefined) (parameters ??= {})[entry.key] = entry.value;
      } else if (number === INPUTS || number === OUTPUTS) {
        namesSharedMemory ||= asBuffer(reader.bytes()).includes(SHARED_MEMORY_KEY);
      } else reader.skip(wireType, number);
    }
  } catch {
    return undefined;
  }
  return { modelName, modelVersion, id, parameters: parameters ?? {}, namesSharedMemory };
}

import type {
  InferParameter,
  ModelInferRequest,
  ModelInferRequest_InferInputTensor,
} from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../lib/errors.js";
import { isDatatype } from "../../../lib/model-repository/datatypes.js";
import { elementCount, type Tensor } from "../tensors/tensor.js";
import { isEmptyContents, typedToRaw } from "../tensors/typed.js";
import type { RegionLease, SystemSharedMemory } from "./regions.js";

/*
 * Tensors in system shared memory (Triton's shared-memory extension), for every way into
 * inference (gRPC, HTTP):
 *
 * - `usesSharedMemory(request)`: whether any input or requested output carries one of the
 *   three parameters (then the request is never passed through undecoded).
 * - `resolveSharedMemory(request, regions, { maxMessageSize })` → `{ request, outputs,
 *   release }`: `request` is the request as if its shared-memory inputs had come in
 *   raw_input_contents — one entry per input, in order (each region's bytes read once into
 *   the buffer that becomes the tensor), typed `contents` made raw, the shared-memory
 *   parameters stripped from inputs and outputs; `outputs` maps each requested output named
 *   for a region to its lease; `release` gives every lease back (call it once, when the
 *   request ends: RequestScope does). On failure it releases what it leased and throws
 *   Triton's error.
 * - `writeOutputs(response, outputs)`: the response with each output that has a lease
 *   written into its region (one positioned write from the engine's buffer) and its data
 *   emptied (the reply keeps its name, datatype and shape); call it before the response is
 *   encoded or sent. A decoupled model's every response writes to the same place.
 * - `sharedMemoryParameters(parameters, tensor)`: the three parameters read with Triton's
 *   errors (undefined: none), for a front door's own checks.
 *
 * raw_input_contents counts only the inputs that are neither in shared memory nor in
 * `contents`, as Triton indexes it (an HTTP body's binary parts alike).
 */

export const SHM_REGION = "shared_memory_region";
export const SHM_OFFSET = "shared_memory_offset";
export const SHM_BYTE_SIZE = "shared_memory_byte_size";

const SHM_PARAMETERS: readonly string[] = [SHM_REGION, SHM_OFFSET, SHM_BYTE_SIZE];

/** Where a tensor's bytes are: `byteSize` bytes from `offset` within region `region`. */
export interface SharedMemoryPlace {
  readonly region: string;
  readonly offset: number;
  readonly byteSize: number;
}

export interface ResolvedRequest {
  readonly request: ModelInferRequest;
  /** Requested outputs written into regions, by name. */
  readonly outputs: ReadonlyMap<string, RegionLease>;
  /** Gives every lease back; idempotent. */
  release(): void;
}

const NO_OUTPUTS: ReadonlyMap<string, RegionLease> = new Map();

/** Whether any input or requested output names a region (or gives an offset or size, which is an error to report). */
export function usesSharedMemory(request: ModelInferRequest): boolean {
  const names = (parameters: Readonly<Record<string, InferParameter>>): boolean =>
    SHM_PARAMETERS.some((name) => parameters[name] !== undefined);
  return (
    request.inputs.some((input) => names(input.parameters)) ||
    request.outputs.some((output) => names(output.parameters))
  );
}

/**
 * A region's offset or size from an int64 parameter. Out of 0..2^53 it becomes Infinity, so
 * the region's bounds check refuses it with Triton's error (Triton reads them as size_t:
 * a negative value is huge there too).
 */
const extent = (value: bigint): number =>
  value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(value);

/** A tensor's `shared_memory_*` parameters with Triton's errors (ParseSharedMemoryParams); undefined when it names no region. */
export function sharedMemoryParameters(
  parameters: Readonly<Record<string, InferParameter>>,
  tensor: string,
): SharedMemoryPlace | undefined {
  const region = parameters[SHM_REGION]?.parameterChoice;
  if (region !== undefined && region.$case !== "stringParam") {
    throw invalidArgument(
      `invalid value type for '${SHM_REGION}' parameter for tensor '${tensor}', expected string_param.`,
    );
  }
  const int64 = (name: string): bigint | undefined => {
    const choice = parameters[name]?.parameterChoice;
    if (choice === undefined) return undefined;
    if (region === undefined) {
      throw invalidArgument(`'${name}' can not be specified without '${SHM_REGION}' parameter for tensor '${tensor}'`);
    }
    if (choice.$case !== "int64Param") {
      throw invalidArgument(`invalid value type for '${name}' parameter for tensor '${tensor}', expected int64_param.`);
    }
    return choice.value;
  };
  const offset = int64(SHM_OFFSET);
  const byteSize = int64(SHM_BYTE_SIZE);
  if (region === undefined) return undefined;
  if (byteSize === undefined) {
    throw invalidArgument(
      `'${SHM_BYTE_SIZE}' must be specified along with '${SHM_REGION}' parameter for tensor '${tensor}'`,
    );
  }
  return { region: region.value, offset: extent(offset ?? 0n), byteSize: extent(byteSize) };
}

/** `parameters` without the shared-memory ones (what the engine and an upstream see). */
function withoutSharedMemory(parameters: Readonly<Record<string, InferParameter>>): Record<string, InferParameter> {
  const kept: Record<string, InferParameter> = {};
  for (const [name, value] of Object.entries(parameters)) if (!SHM_PARAMETERS.includes(name)) kept[name] = value;
  return kept;
}

/** Where each input's bytes come from, before any region is read. */
type InputSource =
  | { readonly kind: "region"; readonly lease: RegionLease }
  | { readonly kind: "raw"; readonly data: Uint8Array }
  | { readonly kind: "typed" };

/**
 * The request with its shared-memory inputs read and its shared-memory parameters gone, and
 * the leases of its shared-memory outputs (see the note at the top). A request that names
 * no region comes back as it is.
 */
export async function resolveSharedMemory(
  request: ModelInferRequest,
  regions: SystemSharedMemory,
  limits: { readonly maxMessageSize: number },
): Promise<ResolvedRequest> {
  if (!usesSharedMemory(request)) return { request, outputs: NO_OUTPUTS, release: () => undefined };
  const leases: RegionLease[] = [];
  const release = (): void => {
    for (const lease of leases.splice(0)) lease.release();
  };
  try {
    const sources = inputSources(request, regions, leases, limits.maxMessageSize);
    const outputs = new Map<string, RegionLease>();
    for (const output of request.outputs) {
      const place = sharedMemoryParameters(output.parameters, output.name);
      if (place === undefined) continue;
      // A classification is computed from the output's values, never stored in a region (Triton's check).
      if (output.parameters["classification"] !== undefined) {
        throw invalidArgument("output can't set both 'shared_memory_region' and 'classification'");
      }
      const lease = regions.lease(place.region, place.offset, place.byteSize);
      leases.push(lease);
      outputs.set(output.name, lease);
    }
    const raw = await allDone(request.inputs.map((input, index) => inputBytes(input, sources[index] as InputSource)));
    return {
      request: {
        ...request,
        inputs: request.inputs.map((input) => ({
          ...input,
          parameters: withoutSharedMemory(input.parameters),
          contents: undefined,
        })),
        outputs: request.outputs.map((output) => ({ ...output, parameters: withoutSharedMemory(output.parameters) })),
        rawInputContents: raw,
      },
      outputs,
      release,
    };
  } catch (error) {
    release();
    throw error;
  }
}

/** Each input's source, with Triton's errors; a region's input is leased (into `leases`), not read yet. */
function inputSources(
  request: ModelInferRequest,
  regions: SystemSharedMemory,
  leases: RegionLease[],
  maxMessageSize: number,
): InputSource[] {
  const { modelName, rawInputContents } = request;
  let rawIndex = 0;
  let regionBytes = 0;
  const sources = request.inputs.map((input): InputSource => {
    const place = sharedMemoryParameters(input.parameters, input.name);
    const typed = !isEmptyContents(input.contents);
    if (place !== undefined) {
      if (typed) {
        throw invalidArgument(
          `unexpected 'content' provided when using shared memory for input tensor '${input.name}' for model '${modelName}'`,
        );
      }
      const lease = regions.lease(place.region, place.offset, place.byteSize);
      leases.push(lease);
      regionBytes += place.byteSize;
      if (regionBytes > maxMessageSize) {
        throw invalidArgument(
          `model '${modelName}': the request's inputs in shared memory take more than ${maxMessageSize} bytes, the largest message this server takes (--max-message-size)`,
        );
      }
      return { kind: "region", lease };
    }
    if (typed) {
      if (rawInputContents.length > 0) {
        throw invalidArgument(
          `contents field must not be specified when using raw_input_contents for '${input.name}' for model '${modelName}'`,
        );
      }
      return { kind: "typed" };
    }
    const data = rawInputContents[rawIndex++];
    if (data === undefined) {
      throw invalidArgument(
        `unable to find data for input tensor '${input.name}' for model '${modelName}' in request.`,
      );
    }
    return { kind: "raw", data };
  });
  if (rawIndex < rawInputContents.length) {
    throw invalidArgument(
      `model '${modelName}': raw_input_contents has ${rawInputContents.length} entries but ${rawIndex} inputs take raw data (inputs in shared memory or in 'contents' take none)`,
    );
  }
  return sources;
}

async function inputBytes(input: ModelInferRequest_InferInputTensor, source: InputSource): Promise<Uint8Array> {
  switch (source.kind) {
    case "region":
      return source.lease.read();
    case "raw":
      return source.data;
    case "typed":
      return typedAsRaw(input);
  }
}

/** A typed input beside inputs in shared memory, made raw (the request decoder checks it again as raw bytes). */
function typedAsRaw(input: ModelInferRequest_InferInputTensor): Uint8Array {
  if (!isDatatype(input.datatype)) {
    throw invalidArgument(`tensor '${input.name}': '${input.datatype}' is not a KServe datatype`);
  }
  const shape = input.shape.map((dim) => {
    if (dim < 0n || dim > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw invalidArgument(`tensor '${input.name}': invalid dimension ${dim} in shape [${input.shape.join(",")}]`);
    }
    return Number(dim);
  });
  return typedToRaw(input.name, input.datatype, input.contents!, elementCount(shape));
}

const EMPTY = new Uint8Array(0);

/**
 * Every value, once every promise has settled; else the first failure. Not Promise.all: a
 * lease must not be released (its file perhaps closed, its number reused) while a read or
 * write on the thread pool still uses it.
 */
async function allDone<T>(promises: readonly Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((outcome) => outcome.status === "rejected");
  if (failed !== undefined) throw failed.reason;
  return settled.map((outcome) => (outcome as PromiseFulfilledResult<T>).value);
}

/**
 * `response` with each output that has a region written into it, then emptied (see the note
 * at the top); the same response when none has.
 */
export async function writeOutputs<Response extends { readonly outputs: readonly Tensor[] }>(
  response: Response,
  outputs: ReadonlyMap<string, RegionLease>,
): Promise<Response> {
  if (outputs.size === 0 || !response.outputs.some((tensor) => outputs.has(tensor.name))) return response;
  const written = await allDone(
    response.outputs.map(async (tensor) => {
      const lease = outputs.get(tensor.name);
      if (lease === undefined) return tensor;
      await lease.write(tensor.data, tensor.name);
      return { ...tensor, data: EMPTY };
    }),
  );
  return { ...response, outputs: written };
}

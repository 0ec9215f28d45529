import type {
  GRPCInferenceServiceServer,
  SystemSharedMemoryStatusResponse_RegionStatus,
} from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument, notFound } from "../../../lib/errors.js";
import type { SystemSharedMemory } from "../shared-memory/regions.js";
import { notImplemented, type Operations } from "./unary.js";

type SharedMemoryAndTraceOperations = Operations<
  Pick<
    GRPCInferenceServiceServer,
    | "systemSharedMemoryStatus"
    | "systemSharedMemoryRegister"
    | "systemSharedMemoryUnregister"
    | "cudaSharedMemoryStatus"
    | "cudaSharedMemoryRegister"
    | "cudaSharedMemoryUnregister"
    | "traceSetting"
  >
>;

/**
 * A uint64 offset or size as a number; past 2^53 no file is that large, so it stays out of
 * bounds (Infinity) and the register is refused as Triton refuses one past the file's end.
 */
const extent = (value: bigint): number =>
  value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(value);

/**
 * System shared memory (Triton's extension, on `regions`), CUDA shared memory as Triton
 * built without GPUs answers, and trace settings (not Triton's: OpenTelemetry here).
 */
export function sharedMemoryAndTraceOperations(regions: SystemSharedMemory): SharedMemoryAndTraceOperations {
  return {
    systemSharedMemoryStatus: ({ name }) => {
      const statuses = regions.status(name);
      const entries = statuses.map((status): [string, SystemSharedMemoryStatusResponse_RegionStatus] => [
        status.name,
        { name: status.name, key: status.key, offset: BigInt(status.offset), byteSize: BigInt(status.byteSize) },
      ]);
      return { regions: Object.fromEntries(entries) };
    },
    systemSharedMemoryRegister: ({ name, key, offset, byteSize }) => {
      regions.register(name, key, extent(offset), extent(byteSize));
      return {};
    },
    systemSharedMemoryUnregister: ({ name }) => {
      regions.unregister(name);
      return {};
    },
    // No GPU here: no CUDA region is ever registered; unregistering (which every shm client
    // does first) succeeds, behind the same --allow-client-shm check as Triton's.
    cudaSharedMemoryStatus: ({ name }) => {
      if (name === "") return { regions: {} };
      if (regions.status().some((region) => region.name === name)) {
        throw notFound(`The region named '${name}' is registered as system shared memory, not CUDA shared memory`);
      }
      throw notFound(`Unable to find cuda shared memory region: '${name}'`);
    },
    // Off, the option is said first (Triton's GPU build and its HTTP route alike; its gRPC
    // route without GPUs alone skips it): a client learns why before what.
    cudaSharedMemoryRegister: ({ name }) => {
      regions.checkClientAccess();
      throw invalidArgument(`failed to register CUDA shared memory region: '${name}', GPUs not supported`);
    },
    cudaSharedMemoryUnregister: () => {
      regions.checkClientAccess();
      return {};
    },
    traceSetting: notImplemented(
      "TraceSetting",
      "Triton trace settings do not apply; start the data plane with --otlp-traces-endpoint for OpenTelemetry tracing",
    ),
  };
}

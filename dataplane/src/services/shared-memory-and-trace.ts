import type { GRPCInferenceServiceServer } from "../../../proto/gen/ts/grpc_service.js";
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

const NO_SHARED_MEMORY = "shared-memory tensors are not supported; send tensors in the request";

/**
 * Shared memory and trace settings. Status calls answer truthfully (no region is
 * ever registered); the calls that would change something answer UNIMPLEMENTED.
 */
export function sharedMemoryAndTraceOperations(): SharedMemoryAndTraceOperations {
  return {
    systemSharedMemoryStatus: () => ({ regions: {} }),
    systemSharedMemoryRegister: notImplemented("SystemSharedMemoryRegister", NO_SHARED_MEMORY),
    systemSharedMemoryUnregister: notImplemented("SystemSharedMemoryUnregister", NO_SHARED_MEMORY),
    cudaSharedMemoryStatus: () => ({ regions: {} }),
    cudaSharedMemoryRegister: notImplemented("CudaSharedMemoryRegister", NO_SHARED_MEMORY),
    cudaSharedMemoryUnregister: notImplemented("CudaSharedMemoryUnregister", NO_SHARED_MEMORY),
    traceSetting: notImplemented(
      "TraceSetting",
      "Triton trace settings do not apply; start the data plane with --otlp-traces-endpoint for OpenTelemetry tracing",
    ),
  };
}

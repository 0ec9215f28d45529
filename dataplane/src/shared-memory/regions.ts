/**
 * System shared memory as Triton's shared-memory extension defines it
 * (docs/protocol/extension_shared_memory.md): clients on the same host register named regions
 * of POSIX shared-memory objects (key, offset, byte size) and name them in a request's input
 * and output parameters instead of sending tensor bytes. CONTRACT (issue 38): the
 * implementation lands with the shared-memory task.
 */

/** A registered region as status reports it. */
export interface RegionStatus {
  readonly name: string;
  readonly key: string;
  readonly offset: number;
  readonly byteSize: number;
}

/**
 * A part of a region held by one request from lookup until the request ends: the region
 * stays open (an unregister waits for the last lease) until `release`.
 */
export interface RegionLease {
  /** The part's bytes, read once into a buffer of their own (the tensor's). */
  read(): Promise<Buffer>;
  /** Writes `data` at the part's start; INTERNAL when it is larger than the part. */
  write(data: Uint8Array, tensor: string): Promise<void>;
  /** Idempotent. */
  release(): void;
}

export interface SystemSharedMemory {
  /** Registers a region; Triton's errors (ALREADY_EXISTS, INVALID_ARGUMENT, INTERNAL) when it cannot. */
  register(name: string, key: string, offset: number, byteSize: number): void;
  /** Unregisters one region, or every region when `name` is undefined or empty; an unknown name is no error. */
  unregister(name?: string): void;
  /** One region (NOT_FOUND when unknown) or all of them. */
  status(name?: string): RegionStatus[];
  /** `byteSize` bytes from `offset` within the region `name`; Triton's NOT_FOUND / INVALID_ARGUMENT otherwise. */
  lease(name: string, offset: number, byteSize: number): RegionLease;
  /** Closes every region's file (the drain). */
  close(): void;
}

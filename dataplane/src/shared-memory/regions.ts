import { closeSync, constants, fstatSync, openSync, read, readSync, write, writeSync } from "node:fs";
import { promisify } from "node:util";
import {
  alreadyExists,
  DataPlaneError,
  internal,
  invalidArgument,
  notFound,
  unimplemented,
} from "../../../lib/errors.js";
import { MAX_SHM_READ_BYTES_IN_FLIGHT, MAX_SHM_REGION_NAME_BYTES, MAX_SHM_REGIONS } from "../limits.js";
import { shmKeyPath } from "./keys.js";

/**
 * System shared memory as Triton's shared-memory extension defines it
 * (docs/protocol/extension_shared_memory.md): clients on the same host register named regions
 * of POSIX shared-memory objects (key, offset, byte size) and name them in a request's input
 * and output parameters instead of sending tensor bytes. Node cannot mmap, so a region is an
 * open file descriptor and its tensors move by positioned reads and writes: one copy each
 * way, as Triton's memcpy into and out of its mapping.
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
  /** The part's size in bytes. */
  readonly byteSize: number;
  /** The part's bytes, read once into a buffer of their own (the tensor's). */
  read(): Promise<Buffer>;
  /** Writes `data` at the part's start; INTERNAL when it is larger than the part. */
  write(data: Uint8Array, tensor: string): Promise<void>;
  /** Idempotent. */
  release(): void;
}

export interface SystemSharedMemory {
  /**
   * Throws UNIMPLEMENTED when clients may not register or unregister regions here (system or
   * CUDA): --allow-client-shm is off, or --grpc-workers > 1.
   */
  checkClientAccess(): void;
  /** Registers a region; Triton's errors (ALREADY_EXISTS, INVALID_ARGUMENT, INTERNAL) when it cannot. */
  register(name: string, key: string, offset: number, byteSize: number): void;
  /** Unregisters one region, or every region when `name` is undefined or empty; an unknown name is no error. */
  unregister(name?: string): void;
  /** One region (NOT_FOUND when unknown) or all of them. */
  status(name?: string): RegionStatus[];
  /** `byteSize` bytes from `offset` within the region `name`; Triton's NOT_FOUND / INVALID_ARGUMENT otherwise. */
  lease(name: string, offset: number, byteSize: number): RegionLease;
  /** Unregisters every region (the drain): files close now, or as their last lease ends; registers are refused after. */
  close(): void;
}

/** What Triton answers when client shared memory is off (UNSUPPORTED: gRPC UNIMPLEMENTED, HTTP 501). */
export const CLIENT_SHM_DISABLED =
  "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";

/** Why --grpc-workers > 1 refuses regions: each worker process would have registry of its own. */
export const CLIENT_SHM_NEEDS_ONE_WORKER =
  "system shared memory needs --grpc-workers 1: a region registered on one worker process is unknown to the others";

export interface SharedMemoryOptions {
  /** --allow-client-shm. */
  readonly allowClientShm: boolean;
  /** --grpc-workers, resolved (0 is the cores' count): more than 1 refuses regions. */
  readonly grpcWorkers: number;
  /**
   * Reads and writes up to this size run on the event loop (a memcpy from the page cache:
   * microseconds); larger ones on libuv's thread pool, so that one large tensor does not
   * hold up every other client. Default SYNC_IO_MAX_BYTES.
   */
  readonly syncIoMaxBytes?: number;
  /** Bytes read from regions and held by requests at once. Default MAX_SHM_READ_BYTES_IN_FLIGHT. */
  readonly maxReadBytesInFlight?: number;
}

/**
 * Above this, a region's read or write goes to the thread pool. 1 MiB copies in about 100 µs
 * (the bench measures it), less than a thread-pool round trip costs under load.
 */
export const SYNC_IO_MAX_BYTES = 1 << 20;

// O_NONBLOCK: opening a FIFO or a device must never wait; regular files ignore it.
const OPEN_FLAGS =
  constants.O_RDWR |
  constants.O_NOFOLLOW |
  constants.O_NONBLOCK |
  ((constants as { O_CLOEXEC?: number }).O_CLOEXEC ?? 0);

const readAsync = promisify(read);
const writeAsync = promisify(write);

interface Region extends RegionStatus {
  readonly fd: number;
  leases: number;
  /** Unregistered while leased: closed when the last lease ends (Triton's awaiting_unregister_). */
  awaitingUnregister: boolean;
}

/** The bytes read from regions that requests hold, bounded (see MAX_SHM_READ_BYTES_IN_FLIGHT). */
class ReadBudget {
  private held = 0;

  constructor(private readonly most: number) {}

  /** Takes `bytes` for a read from `region`, or RESOURCE_EXHAUSTED when they would pass the bound (never when none is held). */
  take(bytes: number, region: string): void {
    if (this.held > 0 && this.held + bytes > this.most) {
      throw new DataPlaneError(
        "ResourceExhausted",
        `cannot read ${bytes} bytes from shared memory region '${region}': requests in flight hold ${this.held} bytes read from shared memory, and ${this.most} bytes (MAX_SHM_READ_BYTES_IN_FLIGHT) is the most this data plane holds at once; retry when they finish`,
      );
    }
    this.held += bytes;
  }

  give(bytes: number): void {
    this.held -= bytes;
  }
}

/** The regions of one data plane (one per process: a --grpc-workers worker would need a brokered one). */
export class SystemSharedMemoryRegistry implements SystemSharedMemory {
  private readonly regions = new Map<string, Region>();
  private readonly syncIoMaxBytes: number;
  private readonly readBudget: ReadBudget;
  private stopped = false;

  constructor(private readonly options: SharedMemoryOptions) {
    this.syncIoMaxBytes = options.syncIoMaxBytes ?? SYNC_IO_MAX_BYTES;
    this.readBudget = new ReadBudget(options.maxReadBytesInFlight ?? MAX_SHM_READ_BYTES_IN_FLIGHT);
  }

  checkClientAccess(): void {
    if (!this.options.allowClientShm) throw unimplemented(CLIENT_SHM_DISABLED);
    if (this.options.grpcWorkers > 1) throw unimplemented(CLIENT_SHM_NEEDS_ONE_WORKER);
  }

  register(name: string, key: string, offset: number, byteSize: number): void {
    this.checkClientAccess();
    if (this.stopped) throw new DataPlaneError("Unavailable", "the server is stopping");
    const nameBytes = Buffer.byteLength(name, "utf8");
    if (nameBytes > MAX_SHM_REGION_NAME_BYTES) {
      throw invalidArgument(
        `cannot register a shared memory region named by ${nameBytes} bytes: a name may take at most ${MAX_SHM_REGION_NAME_BYTES} (UTF-8)`,
      );
    }
    const path = shmKeyPath(name, key);
    if (this.regions.has(name)) throw alreadyExists(`shared memory region '${name}' already in manager`);
    if (this.regions.size >= MAX_SHM_REGIONS) {
      throw new DataPlaneError(
        "ResourceExhausted",
        `cannot register shared memory region '${name}': ${MAX_SHM_REGIONS} regions are registered, the most this data plane holds; unregister some first`,
      );
    }
    const fd = openRegularFile(path, key);
    try {
      const size = fstatSync(fd).size;
      if (!Number.isSafeInteger(offset + byteSize) || offset + byteSize > size) {
        throw invalidArgument(`failed to register shared memory region '${name}': invalid args`);
      }
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    this.regions.set(name, { name, key, offset, byteSize, fd, leases: 0, awaitingUnregister: false });
  }

  unregister(name?: string): void {
    this.checkClientAccess();
    const names = name === undefined || name === "" ? [...this.regions.keys()] : [name];
    for (const each of names) {
      const region = this.regions.get(each);
      if (region !== undefined) this.unregisterRegion(region);
    }
  }

  status(name?: string): RegionStatus[] {
    const regions =
      name === undefined || name === "" ? [...this.regions.values()] : [this.regions.get(name) ?? notFoundError(name)];
    return regions.map(({ name, key, offset, byteSize }) => ({ name, key, offset, byteSize }));
  }

  lease(name: string, offset: number, byteSize: number): RegionLease {
    const region = this.regions.get(name);
    if (region === undefined) throw notFound(`Unable to find shared memory region: '${name}'`);
    if (offset >= region.byteSize) throw invalidArgument(`Invalid offset for shared memory region: '${name}'`);
    if (offset + byteSize > region.byteSize) {
      throw invalidArgument(`Invalid offset + byte size for shared memory region: '${name}'`);
    }
    region.leases++;
    return new Lease(region, region.offset + offset, byteSize, this.syncIoMaxBytes, this.readBudget, () =>
      this.released(region),
    );
  }

  close(): void {
    this.stopped = true;
    // A leased region's file stays open until its last lease ends (the drain's requests are
    // finishing or being cancelled): a read on the thread pool may still be using its number.
    for (const region of this.regions.values()) this.unregisterRegion(region);
  }

  private unregisterRegion(region: Region): void {
    if (region.leases > 0) {
      region.awaitingUnregister = true;
      return;
    }
    this.regions.delete(region.name);
    closeSync(region.fd);
  }

  private released(region: Region): void {
    region.leases--;
    if (region.leases === 0 && region.awaitingUnregister) this.unregisterRegion(region);
  }
}

function notFoundError(name: string): never {
  throw notFound(`Unable to find system shared memory region: '${name}'`);
}

/** `path` opened for reading and writing, never through a symbolic link, and only if it is a regular file. */
function openRegularFile(path: string, key: string): number {
  const unable = (): Error => internal(`Unable to open shared memory region: '${key}'`);
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch {
    throw unable();
  }
  let regular = false;
  try {
    regular = fstatSync(fd).isFile();
  } finally {
    if (!regular) closeSync(fd);
  }
  if (!regular) throw unable();
  return fd;
}

class Lease implements RegionLease {
  private released = false;
  /** Bytes of the read budget this lease's read holds, given back on release. */
  private budgeted = 0;

  constructor(
    private readonly region: Region,
    /** Where the part starts in the file. */
    private readonly position: number,
    readonly byteSize: number,
    private readonly syncIoMaxBytes: number,
    private readonly budget: ReadBudget,
    private readonly onRelease: () => void,
  ) {}

  async read(): Promise<Buffer> {
    this.openFd();
    this.budget.take(this.byteSize, this.region.name);
    this.budgeted += this.byteSize;
    // A memory of its own (not Node's shared pool): the tensor may be handed to a thread.
    const buffer = Buffer.allocUnsafeSlow(this.byteSize);
    let done = 0;
    // One read, unless the kernel returns less than asked (a huge part); 0: the file ended.
    while (done < this.byteSize) {
      const fd = this.openFd();
      const count = this.byteSize - done;
      const got =
        count <= this.syncIoMaxBytes
          ? readSync(fd, buffer, done, count, this.position + done)
          : (await readAsync(fd, buffer, done, count, this.position + done)).bytesRead;
      if (got === 0) throw internal(`shared memory region '${this.region.name}' is shorter than registered`);
      done += got;
    }
    return buffer;
  }

  async write(data: Uint8Array, tensor: string): Promise<void> {
    if (data.byteLength > this.byteSize) {
      throw internal(
        `shared memory size specified with the request for output '${tensor}' (${this.byteSize} bytes) should be at least ${data.byteLength} bytes to hold the results`,
      );
    }
    let done = 0;
    while (done < data.byteLength) {
      const fd = this.openFd();
      const count = data.byteLength - done;
      done +=
        count <= this.syncIoMaxBytes
          ? writeSync(fd, data, done, count, this.position + done)
          : (await writeAsync(fd, data, done, count, this.position + done)).bytesWritten;
    }
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.budgeted);
    this.onRelease();
  }

  /** The region's descriptor, open while this lease is held (a closed number may name another file by now). */
  private openFd(): number {
    if (this.released) throw internal(`shared memory region '${this.region.name}' was used after its request ended`);
    return this.region.fd;
  }
}

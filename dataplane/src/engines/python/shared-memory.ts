import { closeSync, ftruncateSync, openSync, readdirSync, readSync, unlinkSync, writeSync } from "node:fs";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";

/**
 * Shared memory between the data plane and a Python model process: a file on tmpfs
 * (/dev/shm) that the process maps once. The file is unlinked as soon as it is opened and
 * reaches the process as an inherited file descriptor (`fd`), so that nothing is left
 * behind whenever either side is killed, even before the process has started. Each process has two: large inputs, which the
 * data plane writes once (a positioned write; Node cannot map memory without a native
 * addon) and the model's numpy arrays are views of, freed when the request is over; and
 * large outputs, which the process copies in and the data plane reads once (a positioned
 * read) as the response arrives, so that megabytes never cross the pipe in pieces with the
 * two processes taking turns.
 *
 * Regions are handed out as a ring: requests mostly finish in the order they came, so the
 * oldest region is usually the next freed; a region freed out of order waits until those
 * before it are free. When the ring has no room the tensor goes in the frame instead.
 */

/** Regions start on cache-line boundaries (and so suit every numpy dtype's alignment). */
const ALIGNMENT = 64;

interface Region {
  readonly offset: number;
  readonly end: number;
  freed: boolean;
}

export class SharedMemory {
  /** The file's name while it had one (for messages). */
  readonly path: string;
  /** Open on the unlinked file: the Python process is given it at spawn. */
  readonly fd: number;
  private readonly regions: Region[] = [];
  private head = 0;

  constructor(readonly size: number) {
    const folder = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
    sweepOnce(folder);
    this.path = join(folder, `${PREFIX}${process.pid}-${randomUUID()}`);
    this.fd = openSync(this.path, "w+", 0o600);
    unlinkSync(this.path);
    // Sparse: tmpfs gives pages only to the bytes written.
    ftruncateSync(this.fd, size);
  }

  /** Copies `data` into a free region and returns its offset, or undefined when there is no room. */
  put(data: Uint8Array): number | undefined {
    const offset = this.allocate(data.byteLength);
    if (offset === undefined) return undefined;
    try {
      writeSync(this.fd, data, 0, data.byteLength, offset);
    } catch {
      // The tmpfs is full (a pod's /dev/shm is small): this tensor goes in the frame.
      this.free(offset);
      return undefined;
    }
    return offset;
  }

  /** A copy of `length` bytes at `offset` (written by the Python process). */
  read(offset: number, length: number): Buffer {
    const data = Buffer.allocUnsafe(length);
    let done = 0;
    while (done < length) {
      const count = readSync(this.fd, data, done, length - done, offset + done);
      if (count === 0) throw new RangeError(`shared memory ${this.path}: ${offset + length} is past its end`);
      done += count;
    }
    return data;
  }

  /** Frees the region at `offset` (from put). */
  free(offset: number): void {
    const region = this.regions.find((candidate) => candidate.offset === offset && !candidate.freed);
    if (region === undefined) return;
    region.freed = true;
    while (this.regions.length > 0 && this.regions[0]!.freed) this.regions.shift();
    if (this.regions.length === 0) this.head = 0;
  }

  close(): void {
    closeSync(this.fd);
  }

  private allocate(bytes: number): number | undefined {
    const length = Math.max(ALIGNMENT, Math.ceil(bytes / ALIGNMENT) * ALIGNMENT);
    const oldest = this.regions[0];
    let offset: number | undefined;
    if (oldest === undefined) offset = length <= this.size ? 0 : undefined;
    else if (this.head > oldest.offset) {
      // Not wrapped: free after the newest region, and before the oldest.
      if (this.head + length <= this.size) offset = this.head;
      else if (length <= oldest.offset) offset = 0;
    } else if (this.head + length <= oldest.offset) offset = this.head;
    if (offset === undefined) return undefined;
    this.regions.push({ offset, end: offset + length, freed: false });
    this.head = offset + length;
    return offset;
  }
}

/** Files are named for the data plane that made them: `<PREFIX><pid>-<uuid>`. */
const PREFIX = "dynamo-kserve-python-";
let swept = false;

/**
 * Removes the files of data planes no longer running, once: a file has a name only between
 * two system calls of the constructor, but a data plane killed right then (or an older
 * version, which kept the names until its process had mapped them) leaves it behind.
 */
function sweepOnce(folder: string): void {
  if (swept) return;
  swept = true;
  let names: string[] = [];
  try {
    names = readdirSync(folder);
  } catch {
    return; // not ours to list: nothing to sweep
  }
  for (const name of names) {
    const owner = name.startsWith(PREFIX) ? Number(name.slice(PREFIX.length).split("-")[0]) : NaN;
    if (!Number.isInteger(owner) || owner === process.pid || isRunning(owner)) continue;
    try {
      unlinkSync(join(folder, name));
    } catch {
      // another data plane swept it first
    }
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

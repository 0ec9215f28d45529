import { closeSync, ftruncateSync, openSync, unlinkSync, writeSync } from "node:fs";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";

/**
 * The shared memory through which a Python model process reads large input tensors: a
 * file on tmpfs (/dev/shm) that the process maps once, so that its numpy arrays are views
 * of it. The data plane writes each tensor into it once (a positioned write; Node cannot
 * map memory without a native addon) and frees the region when the request is over.
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

export class SharedInputs {
  readonly path: string;
  private readonly fd: number;
  private readonly regions: Region[] = [];
  private head = 0;
  private unlinked = false;

  constructor(readonly size: number) {
    const folder = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
    this.path = join(folder, `dynamo-kserve-python-${process.pid}-${randomUUID()}`);
    this.fd = openSync(this.path, "w+", 0o600);
    // Sparse: tmpfs gives pages only to the bytes written.
    ftruncateSync(this.fd, size);
  }

  /** Once the Python process has mapped the file, its name is no longer needed: nothing is left behind on a crash. */
  unlink(): void {
    if (this.unlinked) return;
    this.unlinked = true;
    try {
      unlinkSync(this.path);
    } catch {
      // already gone
    }
  }

  /** Copies `data` into a free region and returns its offset, or undefined when there is no room. */
  put(data: Uint8Array): number | undefined {
    const offset = this.allocate(data.byteLength);
    if (offset === undefined) return undefined;
    writeSync(this.fd, data, 0, data.byteLength, offset);
    return offset;
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
    this.unlink();
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

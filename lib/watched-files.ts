import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import { errorMessage } from "./errors.js";

/**
 * Files that are replaced while the data plane runs (a mounted Kubernetes Secret is
 * swapped atomically when it rotates): read at start, then reread every interval, and
 * handed to `apply` whenever their contents change. A change `apply` rejects (a broken
 * or half-rotated file) leaves the last good contents in force; it is logged once.
 */
export class WatchedFiles {
  private applied: readonly Buffer[];
  private rejected: readonly Buffer[] | undefined;
  /** The last read failure logged (a file missing for an hour is logged once, not every interval). */
  private unreadable: string | undefined;
  private readonly timer: NodeJS.Timeout;

  private constructor(
    private readonly paths: readonly string[],
    first: readonly Buffer[],
    private readonly apply: (contents: readonly Buffer[]) => void,
    private readonly logger: Logger,
    private readonly what: string,
    intervalMs: number,
  ) {
    this.applied = first;
    this.timer = setInterval(() => void this.check(), intervalMs);
    this.timer.unref();
  }

  /** Reads and applies the files once (throwing if that fails), then follows them. */
  static async watch(
    paths: readonly string[],
    options: { intervalMs: number; logger: Logger; what: string },
    apply: (contents: readonly Buffer[]) => void,
  ): Promise<WatchedFiles> {
    const first = await readAll(paths);
    apply(first);
    return new WatchedFiles(paths, first, apply, options.logger, options.what, options.intervalMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async check(): Promise<void> {
    let contents: Buffer[];
    try {
      contents = await readAll(this.paths);
    } catch (error) {
      if (errorMessage(error) !== this.unreadable) this.reject(undefined, error);
      this.unreadable = errorMessage(error);
      return;
    }
    this.unreadable = undefined;
    if (sameContents(contents, this.applied) || (this.rejected && sameContents(contents, this.rejected))) return;
    try {
      this.apply(contents);
      this.applied = contents;
      this.rejected = undefined;
      this.logger.info({ files: this.paths }, `${this.what} reloaded`);
    } catch (error) {
      this.reject(contents, error);
    }
  }

  private reject(contents: readonly Buffer[] | undefined, error: unknown): void {
    if (contents !== undefined) this.rejected = contents;
    this.logger.error(
      { files: this.paths, err: errorMessage(error) },
      `${this.what} not reloaded; keeping the last good one`,
    );
  }
}

async function readAll(paths: readonly string[]): Promise<Buffer[]> {
  return Promise.all(
    paths.map((path) =>
      readFile(path).catch((error: unknown) => {
        throw new Error(`cannot read ${path}: ${errorMessage(error)}`);
      }),
    ),
  );
}

const sameContents = (a: readonly Buffer[], b: readonly Buffer[]): boolean =>
  a.length === b.length && a.every((content, index) => content.equals(b[index]!));

import type { ChildProcess } from "node:child_process";
import type { Readable } from "node:stream";
import type { Logger } from "pino";

/**
 * What a Python model process prints (stdout, stderr) goes to the data plane's log, one log
 * line per printed line, within a budget of bytes: a model printing in a loop must not grow
 * the log destination's buffer without bound (pino writes asynchronously; the issue-34 model
 * took the data plane from 256 MB to 2.7 GB) nor take the event loop from other models'
 * requests. The pipes are always read at once, so the model never blocks on print; lines
 * past the budget are counted and dropped before they are joined or decoded (a dropped line
 * costs only the search for its newline), and a notice says how many.
 */

/** Bytes a process may put in the log per second (and at once, after a quiet spell). */
export const PRINTED_BYTES_PER_SECOND = 256 * 1024;
/** What a log line costs beyond its text (its time, model, version, instance and stream), so empty lines are not free. */
export const PRINTED_LINE_COST = 128;
/** A printed line longer than this is cut (a line with no newline would otherwise be kept whole). */
export const LONGEST_PRINTED_LINE = 16 * 1024;
/** How often dropped lines are reported while a process keeps printing too much. */
const DROPPED_NOTICE_MS = 1000;

/** Each line the process prints on stdout (info) or stderr (warn) becomes a log line, within the budget. */
export function logOutput(child: ChildProcess, logger: Logger): void {
  const budget = new PrintBudget(logger);
  for (const [stream, name, level] of [
    [child.stdout, "stdout", "info"],
    [child.stderr, "stderr", "warn"],
  ] as const) {
    if (stream === null) continue;
    readLines(stream, budget, (line) => logger[level]({ stream: name }, line));
  }
  child.once("close", () => budget.report());
}

/**
 * Calls `online` with each line of `stream` (without its newline) the budget takes, cutting
 * lines at LONGEST_PRINTED_LINE bytes; a line is charged as its pieces arrive, and dropped
 * whole at the first piece the budget refuses.
 */
function readLines(stream: Readable, budget: PrintBudget, online: (line: string) => void): void {
  let partial: Buffer[] = [];
  let kept = 0;
  let cut = 0;
  let begun = false;
  let dropping = false;
  const charge = (bytes: number): void => {
    if (dropping || budget.take(bytes)) return;
    dropping = true;
    partial = [];
  };
  const take = (piece: Buffer): void => {
    if (!begun) {
      begun = true;
      charge(PRINTED_LINE_COST);
    }
    const room = LONGEST_PRINTED_LINE - kept;
    if (piece.length > room) cut += piece.length - room;
    const keep = Math.min(room, piece.length);
    if (keep === 0) return;
    charge(keep);
    kept += keep;
    if (!dropping) partial.push(piece.subarray(0, keep));
  };
  const end = (): void => {
    if (!begun) charge(PRINTED_LINE_COST);
    if (dropping) budget.drop();
    else {
      const text = Buffer.concat(partial).toString("utf8");
      online(cut > 0 ? `${text}… (${cut} more bytes cut)` : text);
    }
    partial = [];
    kept = cut = 0;
    begun = dropping = false;
  };
  stream.on("data", (chunk: Buffer) => {
    let start = 0;
    for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, start)) {
      take(chunk.subarray(start, newline));
      end();
      start = newline + 1;
    }
    if (start < chunk.length) take(chunk.subarray(start));
  });
  stream.once("end", () => {
    if (begun) end();
  });
}

/** A token bucket of log bytes; the lines it refuses are counted and reported. */
class PrintBudget {
  private tokens = PRINTED_BYTES_PER_SECOND;
  private refilledAt = Date.now();
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly logger: Logger) {}

  /** Takes `bytes` from the budget if it has them. */
  take(bytes: number): boolean {
    const now = Date.now();
    this.tokens = Math.min(
      PRINTED_BYTES_PER_SECOND,
      this.tokens + ((now - this.refilledAt) * PRINTED_BYTES_PER_SECOND) / 1000,
    );
    this.refilledAt = now;
    if (this.tokens < bytes) return false;
    this.tokens -= bytes;
    return true;
  }

  /** Counts a dropped line, to be reported within DROPPED_NOTICE_MS. */
  drop(): void {
    this.dropped++;
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.report(), DROPPED_NOTICE_MS);
      this.timer.unref();
    }
  }

  /** Logs how many lines were dropped since the last notice, if any. */
  report(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.dropped === 0) return;
    this.logger.warn(
      { dropped: this.dropped, bytesPerSecond: PRINTED_BYTES_PER_SECOND },
      `the Python process printed faster than the log takes: ${this.dropped} lines dropped`,
    );
    this.dropped = 0;
  }
}

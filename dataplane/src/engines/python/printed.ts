import type { ChildProcess } from "node:child_process";
import type { Readable } from "node:stream";
import type { Logger } from "pino";

/**
 * What a Python model process prints (stdout, stderr) goes to the data plane's log, one log
 * line per printed line, within a budget: a model printing in a loop must not grow the log
 * destination's buffer without bound (pino writes asynchronously; the issue-34 model took
 * the data plane from 256 MB to 2.7 GB) nor take the event loop from other models'
 * requests. The pipes are always read at once, so the model never blocks on print; lines
 * past the budget are counted and dropped, and a notice says how many.
 */

/** Printed lines a process may put in the log per second (and at once, after a quiet spell). */
export const PRINTED_LINES_PER_SECOND = 1000;
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
    readLines(stream, (line) => {
      if (budget.take()) logger[level]({ stream: name }, line);
    });
  }
  child.once("close", () => budget.report());
}

/** Calls `online` with each line of `stream` (without its newline), cutting lines at LONGEST_PRINTED_LINE bytes. */
function readLines(stream: Readable, online: (line: string) => void): void {
  let partial: Buffer[] = [];
  let kept = 0;
  let cut = 0;
  const take = (piece: Buffer): void => {
    const room = LONGEST_PRINTED_LINE - kept;
    if (piece.length > room) cut += piece.length - room;
    if (room > 0) {
      partial.push(piece.subarray(0, room));
      kept += Math.min(room, piece.length);
    }
  };
  const end = (): void => {
    const text = Buffer.concat(partial).toString("utf8");
    online(cut > 0 ? `${text}… (${cut} more bytes cut)` : text);
    partial = [];
    kept = cut = 0;
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
    if (kept > 0 || cut > 0) end();
  });
}

/** A token bucket of log lines; what it refuses is counted and reported. */
class PrintBudget {
  private tokens = PRINTED_LINES_PER_SECOND;
  private refilledAt = Date.now();
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly logger: Logger) {}

  take(): boolean {
    const now = Date.now();
    this.tokens = Math.min(
      PRINTED_LINES_PER_SECOND,
      this.tokens + ((now - this.refilledAt) * PRINTED_LINES_PER_SECOND) / 1000,
    );
    this.refilledAt = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.dropped++;
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.report(), DROPPED_NOTICE_MS);
      this.timer.unref();
    }
    return false;
  }

  /** Logs how many lines were dropped since the last notice, if any. */
  report(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.dropped === 0) return;
    this.logger.warn(
      { dropped: this.dropped, linesPerSecond: PRINTED_LINES_PER_SECOND },
      `the Python process printed faster than the log takes: ${this.dropped} lines dropped`,
    );
    this.dropped = 0;
  }
}

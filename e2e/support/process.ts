import { execFile, spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { promisify } from "node:util";
import { createInterface } from "node:readline";

/**
 * Starts a long-running `program` that appends its stdout and stderr to `logFile` itself. Not
 * through a pipe this process drains: a test that blocks its event loop (a synchronous
 * `kubectl wait`, for minutes) leaves the pipe unread, and the child stalls on its next write
 * once 64 KiB are waiting — Traefik, logging at debug, froze mid-test that way.
 */
export function spawnLoggingTo(
  logFile: string,
  program: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): ChildProcess {
  const log = openSync(logFile, "a");
  try {
    return spawn(program, args, { stdio: ["ignore", log, log], env: { ...process.env, ...env } });
  } finally {
    // The child holds its own copy of the descriptor.
    closeSync(log);
  }
}

/** A `dynamo-kserve` process started by a test, with its JSON log lines. */
export interface CliProcess {
  readonly process: ChildProcess;
  /** Every JSON log line written so far (non-JSON lines as { msg }). */
  readonly logs: Record<string, unknown>[];
  /** The log line announcing the process is ready. */
  readonly ready: Record<string, unknown>;
  /** Everything written to stderr so far (Node's warnings, a crash's stack). */
  readonly stderr: string;
  /** Sends `signal` once (unless the process already ended) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** How long, after a process exits, its last stdout lines are waited for. */
const LAST_LINES_MS = 2000;

/**
 * Runs `node <cli> ...args` and waits for the JSON log line whose msg is `readyMessage`;
 * rejects with stderr if the process exits first.
 */
export async function startCli(
  cli: string,
  args: readonly string[],
  readyMessage: string,
  env: NodeJS.ProcessEnv = {},
  { detached = false }: { detached?: boolean } = {},
): Promise<CliProcess> {
  // detached: a process group of its own, for tests that signal the whole group (Ctrl-C, systemd).
  const child = spawn(process.execPath, [cli, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached,
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout! });
  const allRead = new Promise<void>((resolve) => lines.once("close", () => resolve()));
  // "exit" can come before the process's last lines are read (its final log line lost to the
  // test): wait for them too, bounded, since a child of its own may still hold the pipe open.
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => {
      const bound = setTimeout(() => resolve(code), LAST_LINES_MS);
      void allRead.then(() => {
        clearTimeout(bound);
        resolve(code);
      });
    }),
  );
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    lines.on("line", (line) => {
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        logs.push(entry);
        if (entry["msg"] === readyMessage) resolve(entry);
      } catch {
        logs.push({ msg: line });
      }
    });
    void exited.then((code) => reject(new Error(`${args[0]} exited with ${code} before '${readyMessage}': ${stderr}`)));
  });
  return {
    process: child,
    logs,
    ready,
    get stderr() {
      return stderr;
    },
    stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null && !child.killed) child.kill(signal);
      return exited;
    },
  };
}

/** Runs `node ...args`, which must fail; resolves with its exit code and stderr. */
export async function runFailing(args: readonly string[]): Promise<{ code: number; stderr: string }> {
  try {
    await promisify(execFile)(process.execPath, [...args]);
  } catch (error) {
    return error as { code: number; stderr: string };
  }
  throw new Error(`expected ${args.join(" ")} to fail`);
}

import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";

/**
 * The long-running processes of the test cluster and its node, each logging to
 * `<logDir>/<name>.log`; stopped with SIGTERM, SIGKILL after 10 s.
 *
 * A daemon writes its log file itself. Through a pipe this process drains, a daemon stalls on
 * its next write once 64 KiB are unread, and the tests block this process's event loop for
 * minutes (a synchronous `kubectl wait`): Traefik, logging at debug, froze mid-test that way
 * and never took the route change the test was waiting for.
 */
export class Daemons {
  private readonly running = new Map<string, ChildProcess>();

  constructor(private readonly logDir: string) {}

  /** Starts `program`; `env` is added to this process's environment. */
  start(name: string, program: string, args: readonly string[], env: Record<string, string> = {}): ChildProcess {
    const log = openSync(join(this.logDir, `${name}.log`), "a");
    try {
      const child = spawn(program, args, { stdio: ["ignore", log, log], env: { ...process.env, ...env } });
      this.running.set(name, child);
      return child;
    } finally {
      // The child holds its own copy of the descriptor.
      closeSync(log);
    }
  }

  has(name: string): boolean {
    return this.running.has(name);
  }

  async stop(name: string): Promise<void> {
    const child = this.running.get(name);
    this.running.delete(name);
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** Polls `check` every 250 ms until it is true; a check that throws counts as false. */
export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`timed out waiting for ${what}`);
}

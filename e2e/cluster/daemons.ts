import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { spawnLoggingTo } from "../support/process.js";

/**
 * The long-running processes of the test cluster and its node, each writing its own log,
 * `<logDir>/<name>.log` (spawnLoggingTo says why not a pipe); stopped with SIGTERM, SIGKILL
 * after 10 s.
 */
export class Daemons {
  private readonly running = new Map<string, ChildProcess>();

  constructor(private readonly logDir: string) {}

  /** Starts `program`; `env` is added to this process's environment. */
  start(name: string, program: string, args: readonly string[], env: Record<string, string> = {}): ChildProcess {
    const child = spawnLoggingTo(this.logFile(name), program, args, env);
    this.running.set(name, child);
    return child;
  }

  /** Where the daemon `name` writes its log. */
  logFile(name: string): string {
    return join(this.logDir, `${name}.log`);
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

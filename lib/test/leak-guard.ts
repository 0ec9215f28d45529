/**
 * Mocha plugin (`.mocharc.json` "require") that makes a leaked handle fail the run instead of
 * hanging it. Mocha runs without `exit: true`, so a run ends only when its tests and fixtures
 * closed everything they opened (servers, clients, child processes, timers, watchers). After the
 * last global teardown this plugin arms an unref'd timer: an unref'd timer keeps nothing alive, so
 * a clean run exits before it fires; if it fires, something else is still holding the process
 * open, and the guard names each such handle on stderr, kills leaked child processes and exits 1.
 *
 * LEAK_GUARD_GRACE_MS (default 5000) is how long closing handles may take to finish (a killed
 * child's exit, a socket's FIN) before they count as leaked. LEAK_GUARD_TRACE=1 records where
 * each handle and timer was created and prints it with the leak (slow: for finding one).
 */
import { createHook } from "node:async_hooks";
import { ChildProcess } from "node:child_process";
import { Server, Socket } from "node:net";

const defaultGraceMs = 5_000;

/** Node's list of the ref'd handles themselves (not only their kinds): undocumented but stable. */
interface ProcessWithHandles {
  _getActiveHandles(): unknown[];
}

/** A timer as async_hooks hands it over; `_destroyed` is set once it fired for good or was cleared. */
interface TimerResource {
  hasRef(): boolean;
  _destroyed?: boolean;
}

const trace = process.env["LEAK_GUARD_TRACE"] === "1" ? traceCreations() : undefined;

export function mochaGlobalTeardown(): void {
  setTimeout(failOnLeftovers, graceMs()).unref();
}

function graceMs(): number {
  const configured = Number(process.env["LEAK_GUARD_GRACE_MS"]);
  return Number.isFinite(configured) && configured >= 0 ? configured : defaultGraceMs;
}

/** Runs only when something else kept the process alive for the whole grace period. */
function failOnLeftovers(): void {
  const open = openHandles();
  const lines = [...open.map(describeHandle), ...describeTimers()];
  process.stderr.write(
    `\nleak guard: the run did not end ${graceMs()} ms after its last test and teardown; still open:\n` +
      (lines.length > 0 ? lines : ["(unnamed)"]).map((line) => `  - ${line}\n`).join("") +
      `  every kind open (stdio included): ${process.getActiveResourcesInfo().join(", ")}\n` +
      (trace ? "" : "  (LEAK_GUARD_TRACE=1 shows where each was created)\n"),
  );
  // A failing run leaves no process behind (a detached child's group goes with it).
  for (const child of open.filter((handle) => handle instanceof ChildProcess)) killGroup(child);
  // Mocha's own exit listener sets the exit code to its failure count; this one, added later, wins.
  process.on("exit", () => {
    process.exitCode = 1;
  });
  process.exit(1);
}

/** SIGKILL to the child's process group when it leads one (spawned detached), else to the child. */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}

function openHandles(): unknown[] {
  const stdio: unknown[] = [process.stdin, process.stdout, process.stderr];
  return (process as unknown as ProcessWithHandles)._getActiveHandles().filter((handle) => !stdio.includes(handle));
}

/** A handle in words a reader can trace back to the test that opened it. */
function describeHandle(handle: unknown): string {
  return handleName(handle) + createdAt(handle);
}

function handleName(handle: unknown): string {
  if (handle instanceof ChildProcess) {
    return `child process ${handle.pid ?? "?"}: ${handle.spawnargs.join(" ")}`;
  }
  if (handle instanceof Server) {
    const address = handle.address();
    const where = typeof address === "string" ? address : address ? `${address.address}:${address.port}` : "?";
    return `${handle.constructor.name} listening on ${where}`;
  }
  if (handle instanceof Socket) {
    const local = `${handle.localAddress ?? "?"}:${handle.localPort ?? "?"}`;
    const remote = `${handle.remoteAddress ?? "?"}:${handle.remotePort ?? "?"}`;
    return `${handle.constructor.name} ${local} -> ${remote}`;
  }
  return typeof handle === "object" && handle !== null ? handle.constructor.name : typeof handle;
}

/** Ref'd timers: where each was created when traced, else how many. */
function describeTimers(): string[] {
  if (trace) return [...trace.timers].filter(isPending).map((timer) => `Timeout${createdAt(timer)}`);
  const count = process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
  return count > 0 ? [`${count} × Timeout (a setTimeout/setInterval never cleared or unref'd)`] : [];
}

const isPending = (timer: TimerResource): boolean => timer.hasRef() && timer._destroyed !== true;

/** The creation stack traced for a handle (or for the native handle a net/child_process object wraps). */
function createdAt(handle: unknown): string {
  if (trace === undefined || typeof handle !== "object" || handle === null) return "";
  const native = (handle as { _handle?: unknown })._handle;
  const stack = trace.stacks.get(typeof native === "object" && native !== null ? native : handle);
  return stack === undefined ? "" : `, created\n${stack}`;
}

/** Records the creation stack of every async resource but promises, and which timers exist. */
function traceCreations(): { stacks: WeakMap<object, string>; timers: Set<TimerResource> } {
  const stacks = new WeakMap<object, string>();
  const timers = new Set<TimerResource>();
  const byId = new Map<number, TimerResource>();
  Error.stackTraceLimit = 40;
  createHook({
    init(asyncId, type, _triggerId, resource) {
      if (type === "PROMISE") return;
      // The first two lines are the message and this hook.
      const frames = (new Error().stack ?? "").split("\n").slice(2);
      stacks.set(resource, frames.filter((frame) => !frame.includes("node:")).join("\n"));
      if (type === "Timeout") {
        timers.add(resource as TimerResource);
        byId.set(asyncId, resource as TimerResource);
      }
    },
    destroy(asyncId) {
      const timer = byId.get(asyncId);
      if (timer === undefined) return;
      timers.delete(timer);
      byId.delete(asyncId);
    },
  }).enable();
  return { stacks, timers };
}

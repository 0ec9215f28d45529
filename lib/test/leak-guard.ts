/**
 * Mocha plugin (`.mocharc.json` "require") that makes a leaked handle fail the run instead of
 * hanging it. Mocha runs without `exit: true`, so a run ends only when its tests and fixtures
 * closed everything they opened (servers, clients, child processes, timers, watchers). After the
 * last global teardown this plugin arms an unref'd timer: an unref'd timer keeps nothing alive, so
 * a clean run exits before it fires; if it fires, something else is still holding the process
 * open, and the guard names each such handle on stderr and exits non-zero.
 *
 * LEAK_GUARD_GRACE_MS (default 5000) is how long closing handles may take to finish (a killed
 * child's exit, a socket's FIN) before they count as leaked.
 */
import { ChildProcess } from "node:child_process";
import { Server, Socket } from "node:net";

const defaultGraceMs = 5_000;

/** Node's list of the ref'd handles themselves (not only their kinds): undocumented but stable. */
interface ProcessWithHandles {
  _getActiveHandles(): unknown[];
}

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
  const handles = open.map(describeHandle);
  const timers = process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
  const lines = [
    ...handles,
    ...(timers > 0 ? [`${timers} × Timeout (a setTimeout/setInterval never cleared or unref'd)`] : []),
  ];
  process.stderr.write(
    `\nleak guard: the run did not end ${graceMs()} ms after its last test and teardown; still open:\n` +
      (lines.length > 0 ? lines : ["(unnamed)"]).map((line) => `  - ${line}\n`).join("") +
      `  resources: ${process.getActiveResourcesInfo().join(", ")}\n`,
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
  const name = typeof handle === "object" && handle !== null ? handle.constructor.name : typeof handle;
  return name;
}

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { eventually } from "../../e2e/support/eventually.js";

/** Repository root, from dist/lib/test (compiled). */
const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const MOCHA = join(REPO_ROOT, "node_modules", "mocha", "bin", "mocha.js");
const GUARD = join(REPO_ROOT, "dist", "lib", "test", "leak-guard.js");

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

/** Runs mocha with the guard (grace 300 ms, plus `env`) on one spec file whose body is `source`. */
function mochaWithGuard(dir: string, name: string, source: string, env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const spec = join(dir, `${name}.spec.mjs`);
  writeFileSync(spec, source);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [MOCHA, "--no-config", "--require", GUARD, spec],
      { env: { ...process.env, LEAK_GUARD_GRACE_MS: "300", ...env }, timeout: 30_000 },
      (_error, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr, ms: Date.now() - started }),
    );
  });
}

/** A passing test that leaves a server listening, a child process running and an interval ticking. */
const LEAKING_SPEC = `import { createServer } from "node:net";
import { spawn } from "node:child_process";
it("opens and forgets", async () => {
  await new Promise((resolve) => createServer().listen(0, "127.0.0.1", resolve));
  spawn("sleep", ["600"], { stdio: "ignore" });
  setInterval(() => undefined, 1000);
});
`;

describe("the test runs' leak guard (lib/test/leak-guard.ts)", function () {
  this.timeout(60_000);
  let dir: string;
  before(() => (dir = mkdtempSync(join(tmpdir(), "leak-guard-"))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("fails a passing run that leaves a server, a child process and a timer open, naming each and killing the child", async () => {
    const run = await mochaWithGuard(dir, "leaks", LEAKING_SPEC);
    assert.match(run.stdout, /1 passing/);
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /leak guard: the run did not end 300 ms after its last test/);
    assert.match(run.stderr, /Server listening on 127\.0\.0\.1:\d+/);
    const child = Number(/child process (\d+): sleep 600/.exec(run.stderr)?.[1]);
    assert.ok(child > 0, run.stderr);
    // Killed, not left running (once its new parent, init, has reaped it).
    await eventually(() => assert.throws(() => process.kill(child, 0), { code: "ESRCH" }), 5_000);
    assert.match(run.stderr, /1 × Timeout/);
    // Ended by the guard, not by the 30 s bound (which would leave the code null).
    assert.ok(run.ms < 20_000, `took ${run.ms} ms`);
  });

  it("says where each leaked child and timer was created under LEAK_GUARD_TRACE=1", async () => {
    const run = await mochaWithGuard(dir, "traced", LEAKING_SPEC, { LEAK_GUARD_TRACE: "1" });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /child process \d+: sleep 600, created\n\s+at .*traced\.spec\.mjs:5:/);
    assert.match(run.stderr, /Timeout, created\n\s+at .*traced\.spec\.mjs:6:/);
  });

  it("lets a run that closes what it opened end on its own, with mocha's exit code", async () => {
    const run = await mochaWithGuard(
      dir,
      "clean",
      `import { createServer } from "node:net";
it("opens and closes", async () => {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  await new Promise((resolve) => server.close(resolve));
});
it("fails", () => { throw new Error("expected"); });
`,
    );
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stdout, /1 passing[\s\S]*1 failing/);
    assert.doesNotMatch(run.stderr, /leak guard/);
  });

  it("is what every tier runs with, in place of mocha's exit: true", () => {
    const config = JSON.parse(readFileSync(join(REPO_ROOT, ".mocharc.json"), "utf8")) as Record<string, unknown>;
    assert.equal(config["exit"], undefined, "exit: true would end a leaking run before the guard sees it");
    assert.deepEqual(config["require"], ["dist/lib/test/leak-guard.js"]);
  });
});

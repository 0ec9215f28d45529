import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";

const run = promisify(execFile);

/** `npm run build`'s command, as package.json says it. */
const BUILD_COMMAND = (
  JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: { build: string } }
).scripts.build;

const REPO_COMPILER_OPTIONS = (
  JSON.parse(readFileSync(join(REPO_ROOT, "tsconfig.json"), "utf8")) as { compilerOptions: Record<string, unknown> }
).compilerOptions;

/**
 * A project laid out as this one (tsconfig.json at the root, outputs in dist/, build info
 * there), two sources, this repository's scripts/, and a node_modules/ of its own whose
 * install time the test sets.
 */
function smallProject(): string {
  const dir = mkdtempSync(join(tmpdir(), "build-test-"));
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      // This project's options (incremental or not, where the build info goes), with no types
      // to load: the small project imports nothing.
      compilerOptions: { ...REPO_COMPILER_OPTIONS, types: [] },
      include: ["src/**/*.ts"],
    }),
  );
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src", "a.ts"), "export const a: number = 1;\n");
  writeFileSync(join(dir, "src", "b.ts"), 'import { a } from "./a.js";\nexport const b = a + 1;\n');
  symlinkSync(join(REPO_ROOT, "scripts"), join(dir, "scripts"));
  mkdirSync(join(dir, "node_modules"));
  writeFileSync(join(dir, "node_modules", ".package-lock.json"), "{}\n");
  return dir;
}

async function build(dir: string): Promise<void> {
  const path = `${join(REPO_ROOT, "node_modules", ".bin")}${delimiter}${process.env["PATH"] ?? ""}`;
  await run("sh", ["-c", BUILD_COMMAND], { cwd: dir, env: { ...process.env, PATH: path } });
}

/** tsc writes its diagnostics to stdout. */
const reportsTypeError = (error: { stdout?: string }): boolean => /TS2322/.test(error.stdout ?? "");

const writtenAt = (dir: string, output: string): number => statSync(join(dir, "dist", output)).mtimeMs;

/** Sets a file's time `seconds` from now (later than any build so far when positive). */
function touch(path: string, seconds: number): void {
  const at = new Date(Date.now() + seconds * 1000);
  utimesSync(path, at, at);
}

describe("npm run build", function () {
  this.timeout(120_000);
  let dir: string;
  beforeEach(() => (dir = smallProject()));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("writes nothing when no source changed, and re-emits a source that did", async () => {
    await build(dir);
    const [a, b] = [writtenAt(dir, "src/a.js"), writtenAt(dir, "src/b.js")];
    await build(dir);
    assert.equal(writtenAt(dir, "src/a.js"), a, "an unchanged source was compiled again");
    assert.equal(writtenAt(dir, "src/b.js"), b);

    writeFileSync(join(dir, "src", "b.ts"), 'import { a } from "./a.js";\nexport const b = a + 2;\n');
    touch(join(dir, "src", "b.ts"), 2);
    await build(dir);
    assert.match(readFileSync(join(dir, "dist", "src", "b.js"), "utf8"), /a \+ 2/);
  });

  it("still fails on a type error it reported before", async () => {
    await build(dir);
    writeFileSync(join(dir, "src", "a.ts"), 'export const a: number = "one";\n');
    touch(join(dir, "src", "a.ts"), 2);
    await assert.rejects(build(dir), reportsTypeError);
    await assert.rejects(build(dir), reportsTypeError, "a second build passed over the error");
  });

  it("removes the outputs of a source that is gone", async () => {
    writeFileSync(join(dir, "src", "old.test.ts"), "export {};\n");
    await build(dir);
    assert.ok(existsSync(join(dir, "dist", "src", "old.test.js")));
    rmSync(join(dir, "src", "old.test.ts"));
    await build(dir);
    assert.equal(existsSync(join(dir, "dist", "src", "old.test.js")), false);
    assert.equal(existsSync(join(dir, "dist", "src", "old.test.js.map")), false);
    assert.ok(existsSync(join(dir, "dist", "src", "a.js")));
  });

  it("leaves what other tools write in dist/ (the docs site's JavaScript has no .ts)", async () => {
    await build(dir);
    mkdirSync(join(dir, "dist", "site", "assets"), { recursive: true });
    writeFileSync(join(dir, "dist", "site", "assets", "bundle.js"), "// the docs site's\n");
    await build(dir);
    assert.ok(existsSync(join(dir, "dist", "site", "assets", "bundle.js")));
  });

  it("writes an output again that was deleted from dist/", async () => {
    await build(dir);
    rmSync(join(dir, "dist", "src", "a.js"));
    await build(dir);
    assert.ok(existsSync(join(dir, "dist", "src", "a.js")));
  });

  it("compiles everything again after an npm install (new dependencies may compile differently)", async () => {
    await build(dir);
    const a = writtenAt(dir, "src/a.js");
    touch(join(dir, "node_modules", ".package-lock.json"), 2);
    await build(dir);
    assert.notEqual(writtenAt(dir, "src/a.js"), a);
  });
});

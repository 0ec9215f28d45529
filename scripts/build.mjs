// `npm run build` (and so `npm start`, `npm test`): compiles what changed since the last build,
// nothing when nothing did, and leaves no output whose source is gone. Run in a project
// directory (the working directory) whose tsconfig.json writes dist/ from sources at its root.
//
// - `tsc -b` compares the sources' times with dist/.tsbuildinfo and stops there when none is
//   newer; otherwise it re-checks and re-emits the changed files and what depends on them.
// - It does not look at dependencies (node_modules): after an npm install newer than the last
//   build, the build is forced, since new type declarations can change what a file compiles to.
// - Nor does it look at dist/: an output deleted by hand would stay missing, so a source
//   without its .js forces the build too.
// - A deleted or moved source leaves its .js behind, which mocha's globs would still run:
//   every .js (and .js.map) in dist/ without its .ts is deleted.
// A clean clone has no dist/, so it builds everything; `rm -rf dist` does the same here.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, rmdirSync, statSync, unlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { join, relative } from "node:path";

const OUT_DIR = "dist";
const BUILD_INFO = join(OUT_DIR, ".tsbuildinfo");
/** npm rewrites this on every install, ci and uninstall. */
const INSTALLED = join("node_modules", ".package-lock.json");

function mtime(path) {
  return existsSync(path) ? statSync(path).mtimeMs : undefined;
}

function dependenciesChanged() {
  const built = mtime(BUILD_INFO);
  const installed = mtime(INSTALLED);
  return built !== undefined && installed !== undefined && installed > built;
}

/** The .ts files under a folder (declarations aside). */
function sourcesUnder(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts"))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** True when a source the tsconfig includes (as `folder/**\/*.ts`) has no .js in dist/. */
function outputsMissing() {
  if (!existsSync(BUILD_INFO)) return false;
  const { include } = JSON.parse(readFileSync("tsconfig.json", "utf8"));
  const folders = include
    .filter((pattern) => pattern.endsWith("/**/*.ts"))
    .map((pattern) => pattern.slice(0, -"/**/*.ts".length));
  return folders
    .flatMap(sourcesUnder)
    .some((source) => !existsSync(join(OUT_DIR, `${source.slice(0, -".ts".length)}.js`)));
}

function compile() {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const args = ["-b", "tsconfig.json", ...(dependenciesChanged() || outputsMissing() ? ["--force"] : [])];
  return spawnSync(process.execPath, [tsc, ...args], { stdio: "inherit" }).status ?? 1;
}

/** The source an output was compiled from: dist/a/b.js and dist/a/b.js.map come from a/b.ts. */
function sourceOf(output) {
  const path = relative(OUT_DIR, output);
  if (path.endsWith(".js.map")) return `${path.slice(0, -".js.map".length)}.ts`;
  if (path.endsWith(".js")) return `${path.slice(0, -".js".length)}.ts`;
  return undefined;
}

/** Deletes outputs whose source is gone, then the folders left empty; returns how many files. */
function pruneStale(dir) {
  let removed = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      removed += pruneStale(path);
      if (readdirSync(path).length === 0) rmdirSync(path);
      continue;
    }
    const source = sourceOf(path);
    if (source !== undefined && !existsSync(source)) {
      unlinkSync(path);
      removed++;
    }
  }
  return removed;
}

/**
 * Only tsc's outputs are pruned: the folders of dist/ that mirror a source folder. Other tools
 * write beside them (the docs site in dist/site, whose JavaScript has no .ts to come from).
 */
function pruneStaleOutputs() {
  let removed = 0;
  for (const entry of readdirSync(OUT_DIR, { withFileTypes: true })) {
    if (entry.isDirectory() && existsSync(entry.name)) removed += pruneStale(join(OUT_DIR, entry.name));
  }
  return removed;
}

const status = compile();
if (existsSync(OUT_DIR)) {
  const removed = pruneStaleOutputs();
  if (removed > 0) console.log(`build: removed ${removed} file(s) from ${OUT_DIR}/ whose source is gone`);
}
process.exit(status);

#!/usr/bin/env node
// Regenerates proto/gen from proto/*.proto with buf (from npm) and the local
// ts-proto / protoc-gen-es plugins. With --check it generates into a temporary
// folder and fails if the checked-in output differs, so CI catches stale code.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, cpSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const genDir = join(root, "proto", "gen");
const check = process.argv.includes("--check");
const buf = join(root, "node_modules", ".bin", "buf");

function generate(outDir) {
  const run = (args) =>
    execFileSync(buf, ["generate", "proto", ...args, "-o", outDir], { cwd: root, stdio: "inherit" });
  run(["--template", "proto/buf.gen.yaml"]);
  run(["--template", "proto/buf.gen.es.yaml", "--path", "proto/model_config.proto"]);
}

function listFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

const outDir = mkdtempSync(join(tmpdir(), "dynamo-kserve-proto-"));
try {
  generate(outDir);
  if (!check) {
    rmSync(genDir, { recursive: true, force: true });
    cpSync(outDir, genDir, { recursive: true });
    console.log(`proto: regenerated ${listFiles(genDir).length} files in proto/gen`);
  } else {
    const fresh = listFiles(outDir);
    const current = listFiles(genDir);
    const stale = [...new Set([...fresh, ...current])].filter(
      (file) =>
        !fresh.includes(file) ||
        !current.includes(file) ||
        !readFileSync(join(outDir, file)).equals(readFileSync(join(genDir, file))),
    );
    if (stale.length > 0) {
      console.error(`proto: generated code is stale (${stale.join(", ")}); run \`npm run proto:gen\``);
      process.exitCode = 1;
    } else {
      console.log(`proto: ${fresh.length} generated files are up to date`);
    }
  }
} finally {
  rmSync(outDir, { recursive: true, force: true });
}

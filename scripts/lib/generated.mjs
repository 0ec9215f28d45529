// Writes generated files into a folder, or (check mode) fails if the folder's content
// differs from what the generator produced now. Shared by every code generator here.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";

function listFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

/** Reads every file under `dir` into a Map of relative path -> contents. */
export function readTree(dir) {
  return new Map(listFiles(dir).map((file) => [file, readFileSync(join(dir, file))]));
}

/**
 * @param {{ label: string, dir: string, files: Map<string, Buffer | string>, check: boolean, owned?: (file: string) => boolean, regenerate?: string }} options
 *   `owned` selects the files in `dir` this generator is responsible for (default: all);
 *   `regenerate` is the command that rewrites them, named when they are stale.
 */
export function syncGenerated({ label, dir, files, check, owned = () => true, regenerate = "the generator" }) {
  const current = listFiles(dir).filter(owned);
  const stale = [...new Set([...files.keys(), ...current])].filter((file) => {
    const fresh = files.get(file);
    const path = join(dir, file);
    return fresh === undefined || !existsSync(path) || !readFileSync(path).equals(Buffer.from(fresh));
  });
  if (check) {
    if (stale.length > 0) {
      console.error(`${label}: generated files are stale (${stale.join(", ")}); run ${regenerate}`);
      process.exitCode = 1;
    } else {
      console.log(`${label}: ${files.size} generated files are up to date`);
    }
    return;
  }
  for (const file of current) if (!files.has(file)) rmSync(join(dir, file));
  for (const [file, content] of files) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), content);
  }
  console.log(`${label}: wrote ${files.size} files in ${relative(process.cwd(), dir) || "."}`);
}

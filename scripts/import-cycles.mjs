#!/usr/bin/env node
// Fails (exit 1) when files of the repository import each other in a loop, and names the loop.
// Rooms talk downward only (ARCHITECTURE.md): a circle means a shared piece lives in a file that
// also uses it, and two files can no longer be read, tested or loaded one without the other.
//
//   node scripts/import-cycles.mjs [ROOT]     (ROOT: the repository, by default this one)
//
// Every TypeScript and JavaScript source under ROOT counts, tests and scripts included; every
// relative import counts, `import type`, re-exports and import() too (a type-only loop is still
// a loop a reader walks). Packages are not followed.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/** Folders that hold no source of ours: as eslint.config.js ignores them, and every dot-folder. */
const SKIPPED = new Set(["node_modules", "dist", "coverage"]);
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/;
/** NodeNext spells an import of a.ts as "./a.js": the source it names, in the order tried. */
const SOURCE_OF = { ".js": [".ts", ".tsx", ".js"], ".mjs": [".mts", ".mjs"], ".cjs": [".cts", ".cjs"] };

function* sourceFiles(folder) {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || SKIPPED.has(entry.name)) continue;
    const path = join(folder, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (entry.isFile() && SOURCE.test(entry.name)) yield path;
  }
}

/** The file a relative specifier names, or undefined (a package, or nothing there). */
function resolveImport(from, specifier) {
  if (!specifier.startsWith("./") && !specifier.startsWith("../")) return undefined;
  const target = resolve(dirname(from), specifier);
  const extension = Object.keys(SOURCE_OF).find((ending) => target.endsWith(ending));
  const candidates = extension
    ? SOURCE_OF[extension].map((source) => target.slice(0, -extension.length) + source)
    : [target, `${target}.ts`, join(target, "index.ts")];
  return candidates.find((candidate) => SOURCE.test(candidate) && existsSync(candidate));
}

/** Each source file and the source files it imports. */
export function importGraph(root) {
  const graph = new Map();
  for (const file of sourceFiles(root)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets = importedFiles.map(({ fileName }) => resolveImport(file, fileName)).filter(Boolean);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** The graph's strongly connected components that are loops (Tarjan), each a list of files. */
function loops(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = (file) => {
    index.set(file, index.size);
    low.set(file, index.get(file));
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file), low.get(next)));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file), index.get(next)));
    }
    if (low.get(file) !== index.get(file)) return;
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || (graph.get(file) ?? []).includes(file)) found.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return found;
}

/** The shortest path of imports from `file` back to itself inside `members` (breadth first). */
function shortestLoop(graph, file, members) {
  const cameFrom = new Map();
  const queue = [file];
  while (queue.length > 0) {
    const current = queue.shift();
    for (const next of graph.get(current) ?? []) {
      if (!members.has(next) || cameFrom.has(next)) continue;
      cameFrom.set(next, current);
      if (next === file) {
        const path = [];
        for (let step = current; step !== file; step = cameFrom.get(step)) path.unshift(step);
        return [file, ...path, file];
      }
      queue.push(next);
    }
  }
  return [file, file];
}

/** Every import loop under `root`: its files, the imports that tie them, and one loop to read first. */
export function importCycles(root) {
  const graph = importGraph(root);
  const name = (file) => relative(root, file);
  return loops(graph).map((component) => {
    const members = new Set(component);
    return {
      files: component.map(name),
      imports: component.flatMap((file) =>
        graph
          .get(file)
          .filter((next) => members.has(next))
          .map((next) => `${name(file)} -> ${name(next)}`),
      ),
      loop: shortestLoop(graph, component[0], members).map(name),
    };
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), ".."));
  const cycles = importCycles(root);
  for (const { files, imports, loop } of cycles) {
    console.error(`import cycle among ${files.length} files: ${loop.join(" -> ")}`);
    for (const line of imports) console.error(`  ${line}`);
  }
  if (cycles.length > 0) {
    console.error("Move what the files share into a module of its own that imports neither (ARCHITECTURE.md).");
    process.exit(1);
  }
}

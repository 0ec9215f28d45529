import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * BENCHMARKS.md is rewritten by `npm run bench`; other benches (bench:storage) publish a
 * section of their own, between markers, that the main bench carries over when it rewrites
 * the file.
 */

const start = (id: string): string => `<!-- section ${id}: written by its own bench, kept by npm run bench -->`;
const end = (id: string): string => `<!-- end of section ${id} -->`;
const SECTION = /<!-- section ([\w-]+): [^\n]*-->\n[\s\S]*?<!-- end of section \1 -->\n?/g;

/** `doc` with section `id` (a `## title` and `body`) in place of the old one, or appended. */
export function replaceSection(doc: string, id: string, title: string, body: string): string {
  const section = `${start(id)}\n## ${title}\n\n${body}\n${end(id)}\n`;
  const old = [...doc.matchAll(SECTION)].find((match) => match[1] === id);
  if (old !== undefined) return doc.replace(old[0], section);
  return `${doc.trimEnd()}\n\n${section}`;
}

/** Every marked section of `doc`, as written, to carry over into its replacement. */
export function markedSections(doc: string): string[] {
  return [...doc.matchAll(SECTION)].map((match) => match[0].trimEnd());
}

/** Writes section `id` of the repository's BENCHMARKS.md (a bench that publishes its results). */
export function publishSection(repositoryRoot: string, id: string, title: string, body: string): void {
  const benchmarks = join(repositoryRoot, "BENCHMARKS.md");
  writeFileSync(benchmarks, replaceSection(readFileSync(benchmarks, "utf8"), id, title, body));
}

/**
 * Writes a bench's results as bench/results/<name>-<date>.json (every number) and .md (`# title`
 * and the table), in bench/results/tmp/ for a trial run; returns their path without extension.
 */
export function writeResults(
  repositoryRoot: string,
  run: { readonly name: string; readonly trial: boolean },
  numbers: unknown,
  title: string,
  table: string,
): string {
  const folder = join(repositoryRoot, "bench", "results", ...(run.trial ? ["tmp"] : []));
  mkdirSync(folder, { recursive: true });
  const stem = join(folder, `${run.name}-${new Date().toISOString().slice(0, 10)}`);
  writeFileSync(`${stem}.json`, `${JSON.stringify(numbers, null, 2)}\n`);
  writeFileSync(`${stem}.md`, `# ${title}\n\n${table}\n`);
  return stem;
}

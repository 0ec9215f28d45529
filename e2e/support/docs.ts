import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * The docs' code blocks, read by the tests that run them: a command a reader copies from a
 * page (or from README.md) is the command a test runs, so a block that no longer works fails
 * CI. One reader for every such test (getting started locally and on Kubernetes, the
 * endpoint picker's config).
 */

/** Repository root, from dist/e2e/support (compiled). */
const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** A fenced code block: its language (after the opening fence) and its text. */
export interface CodeBlock {
  readonly language: string;
  readonly text: string;
}

/** A Markdown file of the repository, by its path from the root (`docs/...`, `README.md`). */
export const readPage = (page: string): string => readFileSync(`${REPO_ROOT}${page}`, "utf8");

const FENCE = /^(`{3,})(\S*)/;
const HEADING = /^(#{1,6})\s+(.*?)\s*$/;

/**
 * The code blocks of a page, or of one section of it: from the heading whose text is `heading`
 * to the next heading of the same or a higher level (a `#` inside a code block is no heading).
 * Throws when the page has no such heading, so a renamed section fails its test loudly.
 */
export const codeBlocks = (page: string, options: BlockQuery = {}): CodeBlock[] =>
  codeBlocksIn(readPage(page), options, page);

/** Which blocks: those under one heading, of one language. */
export interface BlockQuery {
  readonly heading?: string;
  readonly language?: string;
}

/** codeBlocks of Markdown text (`source` names it in errors). */
export function codeBlocksIn(markdown: string, options: BlockQuery, source = "the text"): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  let fence: { marker: string; language: string; lines: string[] } | undefined;
  let sectionLevel: number | undefined;
  let inSection = options.heading === undefined;
  let found = options.heading === undefined;
  for (const line of markdown.split("\n")) {
    if (fence !== undefined) {
      if (line.startsWith(fence.marker) && line.trim() === fence.marker) {
        if (inSection) blocks.push({ language: fence.language, text: fence.lines.join("\n") });
        fence = undefined;
      } else fence.lines.push(line);
      continue;
    }
    const opening = FENCE.exec(line);
    if (opening !== null) {
      fence = { marker: opening[1]!, language: opening[2]!, lines: [] };
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading === null || options.heading === undefined) continue;
    const level = heading[1]!.length;
    if (heading[2] === options.heading) {
      [inSection, sectionLevel, found] = [true, level, true];
    } else if (sectionLevel !== undefined && level <= sectionLevel) {
      [inSection, sectionLevel] = [false, undefined];
    }
  }
  if (!found) throw new Error(`${source} has no heading '${options.heading}'`);
  return blocks.filter((block) => options.language === undefined || block.language === options.language);
}

/** The commands of a shell block: continued lines joined, comments and blank lines left out. */
export function shellCommands(block: CodeBlock): string[] {
  return block.text
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .map((line) => line.replace(/(^|\s+)#.*$/, "").trim())
    .filter((line) => line !== "");
}

/** Every link target of a page (`[text](target)`, outside code), in order. */
export function linkTargets(page: string): string[] {
  const prose = readPage(page)
    .replace(/^(`{3,})[^\n]*\n[\s\S]*?^\1\s*$/gm, "")
    .replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)].map((match) => match[1]!);
}

/** A heading's anchor as the docs site (Python-Markdown's toc) makes it: `## The two commands` -> `the-two-commands`. */
export const anchorOf = (heading: string): string =>
  heading
    .normalize("NFKD")
    .replace(/[^\x20-\x7e]/g, "")
    .replace(/[^\w\s-]/g, "")
    .trim()
    .toLowerCase()
    .replace(/[-\s]+/g, "-");

/** The anchors of a page's headings (outside code). */
export function headingAnchors(page: string): string[] {
  return readPage(page)
    .replace(/^(`{3,})[^\n]*\n[\s\S]*?^\1\s*$/gm, "")
    .split("\n")
    .map((line) => HEADING.exec(line)?.[2])
    .filter((heading) => heading !== undefined)
    .map(anchorOf);
}

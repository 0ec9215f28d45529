import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { migrateCommand } from "../migrate.js";
import {
  codeBlocks,
  codeBlocksIn,
  headingAnchors,
  linkTargets,
  readPage,
  shellCommands,
} from "../../e2e/support/docs.js";

/**
 * README.md is the repository's front page, outside the docs site that `npm run docs:build`
 * checks: its links must land, and its cluster commands must be the Kubernetes page's (whose
 * commands the e2e tier runs). Its local commands are run by getting-started.http.test.ts.
 */

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** Why a README link does not land, or undefined when it does. */
function brokenLink(target: string): string | undefined {
  if (/^[a-z]+:/i.test(target)) return undefined; // http(s), mailto: not the repository's
  const [path = "", anchor] = target.split("#");
  if (path === "") return headingAnchors("README.md").includes(anchor ?? "") ? undefined : "no such heading";
  const page = normalize(path);
  if (!existsSync(join(REPO_ROOT, page))) return "no such file";
  if (anchor !== undefined && page.endsWith(".md") && !headingAnchors(page).includes(anchor))
    return `${page} has no heading with the anchor '${anchor}'`;
  return undefined;
}

describe("README", () => {
  it("links only to files and headings that exist", () => {
    const targets = linkTargets("README.md");
    assert.ok(
      targets.some((target) => target.startsWith("docs/")),
      "the README links into docs/",
    );
    const broken = targets.flatMap((target) => {
      const why = brokenLink(target);
      return why === undefined ? [] : [`${target}: ${why}`];
    });
    assert.deepEqual(broken, []);
  });

  it("finds a broken link as broken (the check can fail)", () => {
    assert.equal(brokenLink("docs/no-such-page.md"), "no such file");
    assert.match(brokenLink("docs/development.md#no-such-heading") ?? "", /no heading with the anchor/);
    assert.equal(brokenLink("docs/development.md#the-two-commands"), undefined);
  });

  it("shows the cluster commands exactly as the Kubernetes getting-started page (which the e2e tier runs)", () => {
    const [readmeBlock] = codeBlocks("README.md", { heading: "Five minutes", language: "sh" }).slice(-1);
    const [pageBlock] = codeBlocks("docs/getting-started/kubernetes.md", {
      heading: "Deploy the example model",
      language: "sh",
    });
    const pageCommands = shellCommands(pageBlock!);
    const readmeCommands = shellCommands(readmeBlock!);
    assert.ok(readmeCommands.some((command) => command.startsWith("helm install")));
    assert.deepEqual(
      readmeCommands.filter((command) => !pageCommands.includes(command)),
      [],
      "a README command that the page (and so the e2e tier) does not run",
    );
  });

  it("keeps its two commands (npm ci && npm start, bash .ci/run)", () => {
    const [block] = codeBlocks("README.md", { heading: "The two commands", language: "sh" });
    assert.deepEqual(shellCommands(block!), ["npm ci && npm start", "bash .ci/run"]);
    assert.ok(existsSync(join(REPO_ROOT, ".ci", "run")));
  });
});

describe("the docs' hand-written pages", () => {
  it("document every migrate option in the migration guide", () => {
    const guide = readPage("docs/guides/migration.md");
    const missing = migrateCommand()
      .options.filter((option) => !guide.includes(`\`${option.flags}\``))
      .map((option) => option.flags);
    assert.deepEqual(missing, [], "add these to docs/guides/migration.md");
  });
});

describe("the docs' block reader", () => {
  const PAGE = [
    "# Page",
    "## Run",
    "```sh",
    "# a shell comment, not a heading",
    "curl -s x \\",
    "  -d '{}'",
    "npm start   # serve",
    "```",
    "### Detail",
    "````python",
    "print('```')",
    "````",
    "## Next",
    "```sh",
    "not in Run",
    "```",
  ].join("\n");

  it("reads a section's blocks up to the next heading of its level, fences and all", () => {
    const blocks = codeBlocksIn(PAGE, { heading: "Run" });
    assert.deepEqual(
      blocks.map((block) => block.language),
      ["sh", "python"],
    );
    assert.equal(blocks[1]!.text, "print('```')");
    assert.throws(() => codeBlocksIn(PAGE, { heading: "No such section" }), /has no heading 'No such section'/);
  });

  it("joins continued shell lines and drops comments", () => {
    const [block] = codeBlocksIn(PAGE, { heading: "Run", language: "sh" });
    assert.deepEqual(shellCommands(block!), ["curl -s x -d '{}'", "npm start"]);
  });
});

#!/usr/bin/env node
// Writes the generated reference pages, docs/reference/{options,crds,metrics,protocols}.md,
// from the code (tools/docs/, compiled: run after `npm run build`). With --check, fails
// naming each page that differs from what the code generates now.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { syncGenerated } from "./lib/generated.mjs";

const root = new URL("..", import.meta.url).pathname;
const generator = join(root, "dist", "tools", "docs", "pages.js");
if (!existsSync(generator)) {
  console.error("docs/reference: the generator is not compiled; run npm run build first");
  process.exit(1);
}
const { referencePages } = await import(generator);

const files = await referencePages();
syncGenerated({
  label: "docs/reference",
  dir: join(root, "docs", "reference"),
  files,
  check: process.argv.includes("--check"),
  // docs/reference/ may hold hand-written pages too: only these are generated.
  owned: (file) => files.has(file),
  regenerate: "npm run docs:gen",
});

#!/usr/bin/env node
// Writes the generated reference pages, docs/reference/{options,crds,metrics,protocols}.md,
// from the code (tools/docs/, compiled: run after `npm run build`). With --check, fails
// naming each page that differs from what the code generates now.
import { join } from "node:path";
import { syncGenerated } from "./lib/generated.mjs";

const root = new URL("..", import.meta.url).pathname;
const { referencePages } = await import(join(root, "dist", "tools", "docs", "pages.js"));

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
// The data plane started to be read leaves nothing running, but prom-client's default
// metrics keep observers: end here rather than wait on them.
process.exit(process.exitCode ?? 0);

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The check `npm run lint` runs over the repository, run here over small trees of its own. */
const CHECKER = fileURLToPath(new URL("../../../scripts/import-cycles.mjs", import.meta.url));

/** Runs the check over a tree made of `files` (path -> text). */
function check(files: Record<string, string>): { status: number | null; stderr: string } {
  const root = mkdtempSync(join(tmpdir(), "import-cycles-"));
  try {
    for (const [path, text] of Object.entries(files)) writeFileSync(join(root, path), text);
    const { status, stderr } = spawnSync(process.execPath, [CHECKER, root], { encoding: "utf8" });
    return { status, stderr };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

describe("the import-cycle check (npm run lint)", function () {
  // Each case starts node, which loads the TypeScript compiler to read the imports.
  this.timeout(30_000);

  it("fails on two files that import each other, naming the loop and its imports", () => {
    const { status, stderr } = check({
      "server.ts": 'import { helper } from "./routes.js";\nexport const door = helper;\n',
      "routes.ts": 'import type { door } from "./server.js";\nexport const helper = 1;\nexport type D = typeof door;\n',
    });
    assert.equal(status, 1, stderr);
    assert.match(stderr, /import cycle among 2 files: routes\.ts -> server\.ts -> routes\.ts/);
    assert.match(stderr, /server\.ts -> routes\.ts/);
  });

  it("counts a re-export as an import", () => {
    const { status, stderr } = check({
      "a.ts": 'export { b } from "./b.js";\nexport const a = 1;\n',
      "b.ts": 'import { a } from "./a.js";\nexport const b = a;\n',
    });
    assert.equal(status, 1, stderr);
    assert.match(stderr, /a\.ts -> b\.ts -> a\.ts/);
  });

  it("passes once the shared piece has a module of its own", () => {
    const { status, stderr } = check({
      "server.ts": 'import { helper } from "./routes.js";\nexport const door = helper;\n',
      "routes.ts": 'import { shared } from "./shared.js";\nexport const helper = shared;\n',
      "shared.ts": "export const shared = 1;\n",
    });
    assert.equal(status, 0, stderr);
    assert.equal(stderr, "");
  });
});

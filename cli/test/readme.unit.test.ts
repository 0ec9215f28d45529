import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DATAPLANE_OPTIONS } from "../../lib/contract/dataplane.js";
import type { OptionDeclaration } from "../../lib/contract/options.js";
import { migrateCommand } from "../migrate.js";

const README = readFileSync(fileURLToPath(new URL("../../../README.md", import.meta.url)), "utf8");
const TABLE_HEADER = "| flag | environment | default | meaning |\n|---|---|---|---|\n";

/** The README row of one option, from its declaration. */
const rowOf = (option: OptionDeclaration<unknown>): string =>
  `| \`${option.flags}\` | \`${option.env}\` | ${option.defaultLabel ?? (option.default === undefined ? "" : String(option.default))} | ${option.help.replaceAll("|", "\\|")} |`;

describe("README", () => {
  it("has the data plane's option table exactly as the options are declared (lib/contract/dataplane.ts)", () => {
    const start = README.indexOf(TABLE_HEADER);
    assert.notEqual(start, -1, "the option table's header is missing");
    const body = README.slice(start + TABLE_HEADER.length)
      .split("\n\n")[0]!
      .trimEnd();
    const expected = Object.values(DATAPLANE_OPTIONS).map(rowOf).join("\n");
    assert.equal(body, expected, "rewrite the option table in README.md from the declarations");
  });

  it("documents every migrate option", () => {
    const missing = migrateCommand()
      .options.filter((option) => !README.includes(`\`${option.flags}\``))
      .map((option) => option.flags);
    assert.deepEqual(missing, [], "add these to the migrate section of README.md");
  });
});

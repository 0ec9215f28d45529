import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dataplaneCommand } from "../dataplane.js";
import { migrateCommand } from "../migrate.js";

const README = readFileSync(fileURLToPath(new URL("../../../README.md", import.meta.url)), "utf8");

describe("README", () => {
  it("documents every data plane option with its flag and environment variable", () => {
    const missing = dataplaneCommand()
      .options.filter((option) => !README.includes(`\`${option.flags}\``) || !README.includes(`\`${option.envVar}\``))
      .map((option) => option.flags);
    assert.deepEqual(missing, [], "add these to the option table in README.md");
  });

  it("documents every migrate option", () => {
    const missing = migrateCommand()
      .options.filter((option) => !README.includes(`\`${option.flags}\``))
      .map((option) => option.flags);
    assert.deepEqual(missing, [], "add these to the migrate section of README.md");
  });
});

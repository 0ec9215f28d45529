import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { majorOf, PINNED_NODE } from "../support/node-version.js";

const repoFile = (path: string): string =>
  readFileSync(fileURLToPath(new URL(`../../../${path}`, import.meta.url)), "utf8");

/** package.json's engines.node as its floor, when it has the one form the project uses (">=24", ">=24.1"). */
function enginesFloor(): { major: number; minor: number } | undefined {
  const { engines } = JSON.parse(repoFile("package.json")) as { engines: { node: string } };
  const floor = /^>=(\d+)(?:\.(\d+))?$/.exec(engines.node);
  return floor === null ? undefined : { major: Number(floor[1]), minor: Number(floor[2] ?? 0) };
}

describe("the Node.js the product runs on (.node-version)", () => {
  it("is a full version of an LTS (even) major", () => {
    assert.match(PINNED_NODE, /^\d+\.\d+\.\d+$/);
    assert.equal(majorOf(PINNED_NODE) % 2, 0, "odd Node majors never become LTS");
  });

  it("is the major of the Dockerfile's default base image", () => {
    const base = /^ARG BASE_IMAGE=node:(\d+)-bookworm-slim$/m.exec(repoFile("Dockerfile"));
    assert.ok(base, "the Dockerfile's BASE_IMAGE default is a node:<major>-bookworm-slim image");
    assert.equal(Number(base[1]), majorOf(PINNED_NODE));
  });

  it("is the major package.json's engines starts at, and satisfies it", () => {
    const floor = enginesFloor();
    assert.ok(floor, 'package.json engines.node is of the form ">=major[.minor]" (.ci/run checks that form)');
    assert.equal(floor.major, majorOf(PINNED_NODE));
    assert.ok(Number(PINNED_NODE.split(".")[1]) >= floor.minor);
  });

  it("is the major the tests run on under CI", function () {
    if (process.env["CI"] !== "true" && majorOf(process.version) !== majorOf(PINNED_NODE)) {
      console.warn(`\n  !!! SKIPPING: this is Node ${process.version}; CI runs on ${PINNED_NODE} (scripts/node.sh)\n`);
      this.skip();
    }
    assert.equal(majorOf(process.version), majorOf(PINNED_NODE), ".ci/run puts scripts/node.sh's node first on PATH");
  });
});

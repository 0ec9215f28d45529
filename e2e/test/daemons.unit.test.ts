import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemons } from "../cluster/daemons.js";

describe("Daemons", () => {
  let dir: string;
  let daemons: Daemons;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "daemons-"));
    daemons = new Daemons(dir);
  });
  afterEach(async () => {
    await daemons.stop("chatty");
    rmSync(dir, { recursive: true, force: true });
  });

  it("a daemon keeps running while the test blocks its event loop (a kubectl wait by execFileSync): it writes its log itself", () => {
    const marker = join(dir, "finished");
    // 1 MiB of log, far past a pipe's 64 KiB, then a mark that it got there.
    const script = `process.stdout.write("x".repeat(1 << 20), () => require("node:fs").writeFileSync(${JSON.stringify(marker)}, "")); setInterval(() => {}, 1000);`;
    daemons.start("chatty", process.execPath, ["-e", script]);
    // Blocks this process's event loop, as the e2e's synchronous kubectl calls do.
    const deadline = Date.now() + 20_000;
    while (!existsSync(marker) && Date.now() < deadline) execFileSync("sleep", ["0.2"]);
    assert.ok(existsSync(marker), "the daemon stalled writing its log while this process was blocked");
    assert.equal(statSync(join(dir, "chatty.log")).size, 1 << 20);
    assert.equal(readFileSync(join(dir, "chatty.log"), "utf8").slice(0, 3), "xxx");
  });
});

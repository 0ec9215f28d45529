import assert from "node:assert/strict";
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { WatchedFiles } from "../../../lib/watched-files.js";
import { eventually } from "../fixtures/server.js";

describe("watched files (TLS material reread as it rotates)", () => {
  it("logs a file that cannot be read once, not at every check, and applies it again once it is back", async () => {
    const directory = mkdtempSync(join(tmpdir(), "watched-"));
    const path = join(directory, "ca.crt");
    writeFileSync(path, "one");
    const lines: { level: number; msg: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
        done();
      },
    });
    const applied: string[] = [];
    const files = await WatchedFiles.watch(
      [path],
      { intervalMs: 10, logger: pino({ level: "info" }, sink), what: "test files" },
      ([contents]) => applied.push(contents!.toString()),
    );
    try {
      unlinkSync(path);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const errors = lines.filter((line) => line.level >= 50);
      assert.equal(errors.length, 1, JSON.stringify(errors));
      writeFileSync(path, "two");
      await eventually(() => assert.deepEqual(applied, ["one", "two"]));
    } finally {
      files.stop();
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

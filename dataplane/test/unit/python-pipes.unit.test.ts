import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { PassThrough } from "node:stream";
import { pino } from "pino";
import { encodeFrame, FrameReader, MalformedFrame } from "../../src/engines/python/frames.js";
import { LONGEST_PRINTED_LINE, logOutput, PRINTED_LINES_PER_SECOND } from "../../src/engines/python/printed.js";

/** A frame's bytes as one buffer, with `header` written as given (not necessarily JSON). */
function rawFrame(header: string): Buffer {
  const json = Buffer.from(header);
  const head = Buffer.alloc(8);
  head.writeUInt32LE(json.length, 0);
  return Buffer.concat([head, json]);
}

describe("python engine: what comes through a model process's pipes", () => {
  describe("frames", () => {
    it("reads frames split anywhere across chunks", () => {
      const bytes = Buffer.concat([
        ...encodeFrame({ t: "r", id: 1 }, [Buffer.from("abcd")]),
        ...encodeFrame({ t: "pong" }),
      ]);
      const reader = new FrameReader();
      const frames = [...bytes].flatMap((byte) => reader.push(Buffer.of(byte)));
      assert.deepEqual(
        frames.map((frame) => [frame.header, frame.payload.toString()]),
        [
          [{ t: "r", id: 1 }, "abcd"],
          [{ t: "pong" }, ""],
        ],
      );
    });

    it("throws MalformedFrame, never a bare SyntaxError, for a header that is not a JSON object (a bare NaN, an array)", () => {
      assert.throws(() => new FrameReader().push(rawFrame('{"t":"r","p":{"score":NaN}}')), MalformedFrame);
      assert.throws(() => new FrameReader().push(rawFrame("[1]")), /not a JSON object/);
    });
  });

  describe("printed lines", () => {
    /** A process with stdout and stderr, and the log lines its output became. */
    function printing(): { child: ChildProcess; stdout: PassThrough; lines: Record<string, unknown>[] } {
      const lines: Record<string, unknown>[] = [];
      const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
      const stdout = new PassThrough();
      const child = Object.assign(new EventEmitter(), { stdout, stderr: new PassThrough() }) as unknown as ChildProcess;
      logOutput(child, logger);
      return { child, stdout, lines };
    }
    const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

    it("logs each line, cutting one longer than the limit and saying by how much", async () => {
      const { stdout, lines } = printing();
      stdout.write(`first\n${"x".repeat(LONGEST_PRINTED_LINE + 10)}\nlast`);
      stdout.end();
      await settle();
      assert.deepEqual(
        lines.map((line) => line["msg"]),
        ["first", `${"x".repeat(LONGEST_PRINTED_LINE)}… (10 more bytes cut)`, "last"],
      );
    });

    it("drops the lines past its budget and reports how many were dropped", async () => {
      const { child, stdout, lines } = printing();
      const printed = PRINTED_LINES_PER_SECOND * 3;
      const started = Date.now();
      stdout.write("line\n".repeat(printed));
      await settle();
      // The budget refills as time passes: a full second's worth, and what came in meanwhile.
      const budget = Math.ceil(PRINTED_LINES_PER_SECOND * (1 + (Date.now() - started) / 1000));
      child.emit("close");
      const logged = lines.filter((line) => line["msg"] === "line").length;
      const notice = lines.find((line) => typeof line["dropped"] === "number");
      assert.ok(logged <= budget, `${logged} lines logged, at most ${budget}`);
      assert.equal((notice?.["dropped"] as number) + logged, printed);
    });
  });
});

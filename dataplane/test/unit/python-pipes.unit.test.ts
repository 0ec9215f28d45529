import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { PassThrough } from "node:stream";
import { pino } from "pino";
import { encodeFrame, FrameReader, MalformedFrame } from "../../src/engines/python/frames.js";
import {
  LONGEST_PRINTED_LINE,
  logOutput,
  PRINTED_BYTES_PER_SECOND,
  PRINTED_LINE_COST,
} from "../../src/engines/python/printed.js";

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
        ...encodeFrame({ kind: "response", id: 1, final: true }, [Buffer.from("abcd")]),
        ...encodeFrame({ kind: "pong" }),
      ]);
      const reader = new FrameReader();
      const frames = [...bytes].flatMap((byte) => reader.push(Buffer.of(byte)));
      assert.deepEqual(
        frames.map((frame) => [frame.header, frame.payload.toString()]),
        [
          [{ kind: "response", id: 1, final: true }, "abcd"],
          [{ kind: "pong" }, ""],
        ],
      );
    });

    it("throws MalformedFrame, never a bare SyntaxError, for a header that is not a JSON object (a bare NaN, an array)", () => {
      assert.throws(
        () => new FrameReader().push(rawFrame('{"kind":"response","parameters":{"score":NaN}}')),
        MalformedFrame,
      );
      assert.throws(() => new FrameReader().push(rawFrame("[1]")), /not a JSON object/);
    });

    it("throws MalformedFrame for a header without a kind (not a message of protocol.ts)", () => {
      assert.throws(() => new FrameReader().push(rawFrame('{"t":"r","id":1}')), /without a kind/);
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

    /**
     * Prints `count` lines of `length` bytes at once; returns the bytes the log took (each line
     * at its cost), the most the budget allows meanwhile, and how many lines were logged and dropped.
     */
    async function printAtOnce(length: number, count: number) {
      const { child, stdout, lines } = printing();
      const text = "x".repeat(length);
      const started = Date.now();
      stdout.write(`${text}\n`.repeat(count));
      await settle();
      // The budget refills as time passes: a full second's worth, and what came in meanwhile.
      const budget = PRINTED_BYTES_PER_SECOND * (1 + (Date.now() - started) / 1000);
      child.emit("close");
      const logged = lines.filter((line) => line["msg"] === text).length;
      const notice = lines.find((line) => typeof line["dropped"] === "number");
      return { bytes: logged * (length + PRINTED_LINE_COST), budget, logged, dropped: notice?.["dropped"] };
    }

    it("drops the short lines past its budget and reports how many were dropped", async () => {
      const printed = Math.ceil((3 * PRINTED_BYTES_PER_SECOND) / (4 + PRINTED_LINE_COST));
      const { bytes, budget, logged, dropped } = await printAtOnce(4, printed);
      assert.ok(bytes <= budget, `${logged} lines (${bytes} bytes) logged, at most ${budget} bytes`);
      assert.equal((dropped as number) + logged, printed);
    });

    it("budgets the bytes printed, not the lines: long lines take their length of it", async () => {
      const printed = 200;
      const { bytes, budget, logged, dropped } = await printAtOnce(LONGEST_PRINTED_LINE, printed);
      assert.ok(bytes <= budget, `${logged} lines (${bytes} bytes) logged, at most ${budget} bytes`);
      assert.ok(logged > 0, "the budget's worth is logged");
      assert.equal((dropped as number) + logged, printed);
    });
  });
});

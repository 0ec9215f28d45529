import assert from "node:assert/strict";
import { DataPlaneError } from "../../../lib/errors.js";
import { MAX_JSON_DEPTH, MAX_JSON_VALUES, parseJsonText } from "../../src/tensors/json-text.js";

const exact = (text: string): unknown => parseJsonText(text, "the body", { exactIntegers: true });

describe("JSON bodies (json-text.ts): exact 64-bit integers with JSON.parse, nesting bounded", () => {
  it("keeps whole numbers beyond 2^53 exact as bigints, wherever they are, and the rest as JSON.parse reads them", () => {
    assert.deepEqual(exact('{"a":[9007199254740993,-9223372036854775808,1,2.5],"b":{"c":18446744073709551615}}'), {
      a: [9007199254740993n, -9223372036854775808n, 1, 2.5],
      b: { c: 18446744073709551615n },
    });
    // Two tokens that round to the same double keep their own values, in order.
    assert.deepEqual(exact("[9007199254740993,9007199254740992,9007199254740993]"), [
      9007199254740993n,
      9007199254740992n,
      9007199254740993n,
    ]);
    // A safe 16-digit integer stays a number; exponents and fractions stay doubles (refused later as inexact).
    assert.deepEqual(exact("[1000000000000000,1e20,12345678901234567.0]"), [1000000000000000, 1e20, 12345678901234568]);
    assert.equal(exact("12345678901234567890"), 12345678901234567890n);
  });

  it("reads a million equal 64-bit values in one pass (each token taken by index: shifting them was quadratic, 332 s)", () => {
    const values = exact(`[${Array(1_000_000).fill("9223372036854775807").join(",")}]`) as bigint[];
    assert.equal(values.length, 1_000_000);
    assert.ok(values.every((value) => value === 9223372036854775807n));
  });

  it("reads digits inside strings as text, not numbers", () => {
    assert.deepEqual(exact('["12345678901234567890","a\\"99999999999999999",1]'), [
      "12345678901234567890",
      'a"99999999999999999',
      1,
    ]);
    assert.deepEqual(exact('{"x":"1.2345678901234567e30","y":[12345678901234567890]}'), {
      x: "1.2345678901234567e30",
      y: [12345678901234567890n],
    });
  });

  it("refuses a key given twice with a 64-bit value (JSON.parse would keep only the last)", () => {
    assert.throws(() => exact('{"a":9007199254740993,"a":9007199254740995}'), DataPlaneError);
  });

  it(`refuses nesting deeper than ${MAX_JSON_DEPTH} levels, brackets in strings not counted`, () => {
    const nested = (depth: number): string => `${"[".repeat(depth)}1${"]".repeat(depth)}`;
    assert.deepEqual(parseJsonText(nested(MAX_JSON_DEPTH), "x"), JSON.parse(nested(MAX_JSON_DEPTH)));
    assert.throws(
      () => parseJsonText(nested(MAX_JSON_DEPTH + 1), "the body"),
      /the body nests arrays and objects deeper than 100 levels/,
    );
    assert.deepEqual(parseJsonText(`["${"[".repeat(500)}"]`, "x"), ["[".repeat(500)]);
    assert.throws(() => parseJsonText("[1,", "the body"), /the body is not valid JSON/);
  });

  it("refuses text of more values than asked for, before parsing; commas in strings not counted", () => {
    // The array and its elements: count + 1 values.
    const values = (count: number): string => `[0${",0".repeat(count - 1)}]`;
    const options = { maxValues: MAX_JSON_VALUES };
    assert.equal((parseJsonText(values(MAX_JSON_VALUES - 1), "x", options) as number[]).length, MAX_JSON_VALUES - 1);
    assert.throws(
      () => parseJsonText(values(MAX_JSON_VALUES), "the body", options),
      /the body holds more than 100000 JSON values/,
    );
    assert.deepEqual(parseJsonText(`["${",".repeat(10)}"]`, "x", { maxValues: 2 }), [",".repeat(10)]);
  });
});

import assert from "node:assert/strict";
import { boundedDetail } from "../../src/limits.js";
import { MAX_ERROR_DETAIL_BYTES } from "../../src/limits.js";

const bytes = (text: string): number => Buffer.byteLength(text, "utf8");

describe("boundedDetail: error details a stock client can read", () => {
  it("leaves a detail within the bound as it is", () => {
    const detail = `model '${"m".repeat(1000)}' is not found`;
    assert.equal(boundedDetail(detail), detail);
  });

  it("cuts the middle of a long one, keeping its beginning and end and saying how much went", () => {
    const detail = `model '${"m".repeat(20_000)}' is not found`;
    const bounded = boundedDetail(detail);
    assert.ok(bytes(bounded) <= MAX_ERROR_DETAIL_BYTES, `${bytes(bounded)} bytes`);
    const match = /^model 'm+…\[(\d+) bytes cut\]…m+' is not found$/.exec(bounded);
    assert.ok(match, bounded.slice(0, 80));
    assert.equal(bytes(bounded) - bytes(`…[${match[1]} bytes cut]…`) + Number(match[1]), bytes(detail));
  });

  it("counts UTF-8 bytes and never splits a character", () => {
    for (const unit of ["é", "🙂", "中"]) {
      const bounded = boundedDetail(`${unit.repeat(5000)} tail`);
      assert.ok(bytes(bounded) <= MAX_ERROR_DETAIL_BYTES);
      assert.ok(!bounded.includes("\uFFFD"), `no replacement character for '${unit}'`);
      assert.ok(bounded.endsWith(" tail"));
    }
  });
});

import assert from "node:assert/strict";
import { code, prose, table } from "../markdown.js";

describe("the reference pages' Markdown (tools/docs/markdown.ts)", () => {
  it("writes a literal as inline code with nothing in it read as markup or ending a cell", () => {
    assert.equal(
      code("a || b && <dir>/*_x_*/`[y]`\\n"),
      "<code>a &#124;&#124; b &amp;&amp; &lt;dir&gt;/&#42;&#95;x&#95;&#42;/&#96;&#91;y&#93;&#96;&#92;n</code>",
    );
  });

  it("keeps a cell on one line", () => {
    assert.equal(code("one\n  two\tthree "), "<code>one two three</code>");
    assert.equal(prose("a description\nfolded over\n\nlines"), "a description folded over lines");
  });

  it("turns what prose quotes in backticks into code and escapes the rest", () => {
    assert.equal(
      prose("sets `name` to a|b, see <model>/*_n_*"),
      "sets <code>name</code> to a&#124;b, see &lt;model&gt;/&#42;&#95;n&#95;&#42;",
    );
  });

  it("leaves a lone backtick as text", () => {
    assert.equal(prose("it's a ` tick"), "it's a &#96; tick");
  });

  it("writes a table row per row, an empty cell as a space, and refuses a row of the wrong width", () => {
    assert.equal(table(["A", "B"], [["1", ""]]), "| A | B |\n| --- | --- |\n| 1 |   |");
    assert.throws(() => table(["A", "B"], [["1"]]), /a row of 1 cells under 2 headers/);
  });
});

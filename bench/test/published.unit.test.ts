import assert from "node:assert/strict";
import { markedSections, replaceSection } from "../harness/published.js";

describe("BENCHMARKS.md sections other benches publish", () => {
  const main = "# Benchmarks\n\nthe main bench's report\n";

  it("appends a section once, then replaces it in place", () => {
    const first = replaceSection(main, "storage-load", "Loading", "run 1");
    assert.match(
      first,
      /^# Benchmarks\n\nthe main bench's report\n\n<!-- section storage-load: .*-->\n## Loading\n\nrun 1\n/,
    );
    const second = replaceSection(`${first}\ntext after\n`, "storage-load", "Loading", "run 2");
    assert.equal(second.match(/<!-- section storage-load/g)?.length, 1);
    assert.match(second, /\n## Loading\n\nrun 2\n<!-- end of section storage-load -->\n\ntext after\n$/);
    assert.doesNotMatch(second, /run 1/);
  });

  it("hands the main bench every section to carry over, and nothing else", () => {
    const doc = replaceSection(replaceSection(main, "a", "A", "body a"), "b", "B", "body b");
    const sections = markedSections(doc);
    assert.equal(sections.length, 2);
    assert.ok(sections[0]!.includes("## A\n\nbody a") && sections[1]!.includes("## B\n\nbody b"));
    assert.ok(sections.every((section) => !section.includes("main bench's report")));
    // What the main bench writes keeps them: rewriting with them gives them back.
    assert.deepEqual(markedSections([`# Benchmarks\n\nnew report`, ...sections].join("\n\n")), sections);
  });
});

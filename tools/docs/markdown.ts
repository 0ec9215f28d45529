/**
 * Markdown for the generated reference pages, written so that MkDocs (Python-Markdown with
 * the tables extension) and GitHub render a table cell as the text it was given: no cell
 * text may end a cell (`|`), open an HTML tag (`<dir>`), emphasise (`*`, `_`) or link (`[`).
 */

/** Characters that HTML and Markdown would read as markup, as entities (valid inside `<code>` too). */
const ENTITIES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  "|": "&#124;",
  "*": "&#42;",
  _: "&#95;",
  "`": "&#96;",
  "[": "&#91;",
  "]": "&#93;",
  "\\": "&#92;",
};
const MARKUP = /[&<>|*_`[\]\\]/g;

/** Line breaks end a table row: one line, runs of white space as one space. */
const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim();

/** Text shown literally (a flag, a path, a CEL rule) as inline code. */
export function code(text: string): string {
  return `<code>${oneLine(text).replace(MARKUP, (character) => ENTITIES[character]!)}</code>`;
}

/**
 * Prose from the code (help text, a CRD description) as one cell's text: what it quotes in
 * backticks becomes inline code, and nothing else in it is read as markup.
 */
export function prose(text: string): string {
  return oneLine(text)
    .split(/(`[^`]+`)/)
    .map((part) =>
      part.startsWith("`") && part.endsWith("`") && part.length > 1
        ? code(part.slice(1, -1))
        : part.replace(MARKUP, (character) => ENTITIES[character]!),
    )
    .join("");
}

/** A table whose cells are already Markdown (from code() and prose()). */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  for (const row of rows) {
    if (row.length !== headers.length) throw new Error(`a row of ${row.length} cells under ${headers.length} headers`);
  }
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((cell) => (cell === "" ? " " : cell)).join(" | ")} |`;
  return [line(headers), line(headers.map(() => "---")), ...rows.map(line)].join("\n");
}

/** The note every generated page starts with, under its title; `sources` is Markdown. */
export function generatedNote(sources: string): string {
  return `> Generated from ${sources} by \`npm run docs:gen\`. Do not edit this page: change the code and run it again (\`npm run docs:check\`, part of \`npm test\`, fails when the page is out of date).`;
}

/** A page: its parts separated by blank lines, ending with one newline. */
export function page(parts: readonly string[]): string {
  return `${parts.filter((part) => part !== "").join("\n\n")}\n`;
}

import assert from "node:assert/strict";
import { Command, Option } from "commander";
import { DATAPLANE_OPTIONS } from "../../../lib/contract/dataplane.js";
import { dynamoKserveProgram } from "../../../cli/program.js";
import { code } from "../markdown.js";
import { optionsPage } from "../options.js";

describe("the option reference (tools/docs/options.ts)", () => {
  it("has a row for every data-plane option of the contract, with its variable and default", () => {
    const page = optionsPage(dynamoKserveProgram());
    const dataplane = page.slice(
      page.indexOf("## `dynamo-kserve dataplane`"),
      page.indexOf("## `dynamo-kserve operator`"),
    );
    for (const declaration of Object.values(DATAPLANE_OPTIONS)) {
      const shown =
        declaration.defaultLabel ?? (declaration.default === undefined ? undefined : String(declaration.default));
      const row = `| ${code(declaration.flags)} | ${code(declaration.env)} | ${shown === undefined ? " " : code(shown)} |`;
      assert.ok(dataplane.includes(row), `no row starting ${row}`);
    }
  });

  it("writes arguments, required options, choices the help does not name, and subcommands", () => {
    const program = new Command("tool");
    program
      .command("run")
      .description("runs")
      .argument("<what>", "the thing")
      .requiredOption("--mode <mode>", "how")
      .addOption(new Option("--speed <s>", "how fast").choices(["slow", "fast"]).default("slow"))
      .command("deeper")
      .description("below run");
    const page = optionsPage(program);
    assert.match(page, /^\| <code>&lt;what&gt;<\/code> \| required \| the thing \|$/m);
    assert.match(page, /^\| <code>--mode &lt;mode&gt;<\/code> \| {3}\| required \| how \|$/m);
    assert.match(
      page,
      /^\| <code>--speed &lt;s&gt;<\/code> \| {3}\| <code>slow<\/code> \| how fast \(one of <code>slow<\/code>, <code>fast<\/code>\) \|$/m,
    );
    assert.match(page, /^## `tool run deeper`$/m);
  });
});

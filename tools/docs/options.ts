import type { Argument, Command, Option } from "commander";
import { code, generatedNote, page, prose, table } from "./markdown.js";

/**
 * docs/reference/options.md: every command of the CLI with its arguments and options, read
 * from the commander commands themselves (the data plane's and the operator's options are
 * their contracts' declarations, lib/contract/, as commander holds them).
 */

/** A default as --help says it: its label if it has one, else the value. */
function defaultOf(option: Option | Argument): string {
  if (option.defaultValueDescription !== undefined) return code(option.defaultValueDescription);
  const value: unknown = option.defaultValue;
  if (value === undefined) return "";
  return code(typeof value === "string" && value !== "" ? value : JSON.stringify(value));
}

/** The meaning column: the help, and the values a choice takes unless the help names them all. */
function meaningOf(option: Option | Argument): string {
  const choices = option.argChoices ?? [];
  const unnamed = choices.some((choice) => !option.description.includes(choice));
  return unnamed ? `${prose(option.description)} (one of ${choices.map(code).join(", ")})` : prose(option.description);
}

function optionRow(option: Option): string[] {
  const required = option.mandatory ? "required" : "";
  return [
    code(option.flags),
    option.envVar === undefined ? "" : code(option.envVar),
    required || defaultOf(option),
    meaningOf(option),
  ];
}

function argumentRow(argument: Argument): string[] {
  const name = argument.required ? `<${argument.name()}>` : `[${argument.name()}]`;
  return [
    code(argument.variadic ? `${name}...` : name),
    argument.required ? "required" : defaultOf(argument),
    meaningOf(argument),
  ];
}

/** A command's section: usage, description, arguments, options; then its subcommands'. */
function commandSection(command: Command, path: readonly string[]): string[] {
  const name = [...path, command.name()].join(" ");
  const options = command.options.filter((option) => !option.hidden);
  const parts = [
    `## \`${name}\``,
    prose(command.description()),
    code(`${name} ${command.usage()}`),
    command.registeredArguments.length === 0
      ? ""
      : table(["Argument", "Default", "Meaning"], command.registeredArguments.map(argumentRow)),
    options.length === 0 ? "" : table(["Flag", "Environment variable", "Default", "Meaning"], options.map(optionRow)),
  ];
  return [...parts, ...command.commands.flatMap((sub) => commandSection(sub, [...path, command.name()]))];
}

/** The page for `program` (cli/program.ts). */
export function optionsPage(program: Command): string {
  const commands = table(
    ["Command", "What it does"],
    program.commands.map((command) => [code(`${program.name()} ${command.name()}`), prose(command.description())]),
  );
  return page([
    "# Command-line options",
    generatedNote("the commands' declarations (`cli/`, the data plane's options from `lib/contract/dataplane.ts`)"),
    "An option with an environment variable can be given by either; a flag on the command line wins over the variable, and the variable over the default. A repeatable option's variable holds a comma-separated list.",
    commands,
    ...program.commands.flatMap((command) => commandSection(command, [program.name()])),
  ]);
}

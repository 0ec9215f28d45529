import { InvalidArgumentError, Option, type Command } from "commander";

/**
 * Options declared once each — flag, environment variable, default, help, how a value is
 * parsed and written back — so that one declaration feeds the command line (commander
 * applies flag > environment variable > default and prints it all in --help), the typed
 * values a command receives, the argument list another process (the operator) builds for
 * it, and the README's option table.
 */

export interface OptionDeclaration<Value, HasDefault extends boolean = boolean> {
  /** commander's syntax: `--grpc-port <port>`, or `--use-tls` for a switch. */
  readonly flags: string;
  readonly env: string;
  readonly help: string;
  /**
   * Text to value (commander's argParser); absent for text and switches. `previous`
   * accumulates lists. (A method, so that declarations of any value type form one table.)
   */
  parse?(text: string, previous: Value | undefined): Value;
  readonly default?: Value;
  /** The default as the help and README show it, when the value alone says it badly (e.g. 64 MiB). */
  readonly defaultLabel?: string;
  readonly choices?: readonly string[];
  /** A repeatable option: each value is one more flag. */
  readonly repeatable?: boolean;
  readonly hasDefault: HasDefault;
}

type Declarations = Readonly<Record<string, OptionDeclaration<unknown>>>;

/** The values a command receives for its declarations: options with a default are always set. */
export type ValuesOf<D extends Declarations> = {
  -readonly [K in keyof D]: D[K] extends OptionDeclaration<infer Value, true>
    ? Value
    : D[K] extends OptionDeclaration<infer Value, false>
      ? Value | undefined
      : never;
};

interface Common {
  readonly env: string;
  readonly help: string;
}

/** A text value; with `fallback`, always set. */
export function text(flags: string, common: Common): OptionDeclaration<string, false>;
export function text(flags: string, common: Common, fallback: string): OptionDeclaration<string, true>;
export function text(flags: string, common: Common, fallback?: string): OptionDeclaration<string> {
  return {
    flags,
    ...common,
    ...(fallback === undefined ? {} : { default: fallback }),
    hasDefault: fallback !== undefined,
  };
}

/** One of `choices`. */
export function choice<Choice extends string>(
  flags: string,
  common: Common,
  choices: readonly Choice[],
  fallback: Choice,
): OptionDeclaration<Choice, true> {
  return { flags, ...common, choices, default: fallback, hasDefault: true };
}

/** A whole number from `min` to `max`; with `fallback`, always set. */
export function wholeNumber(
  flags: string,
  common: Common,
  range: { min: number; max?: number },
): OptionDeclaration<number, false>;
export function wholeNumber(
  flags: string,
  common: Common,
  range: { min: number; max?: number },
  fallback: number,
  label?: string,
): OptionDeclaration<number, true>;
export function wholeNumber(
  flags: string,
  common: Common,
  { min, max = Number.MAX_SAFE_INTEGER }: { min: number; max?: number },
  fallback?: number,
  label?: string,
): OptionDeclaration<number> {
  return withDefault({ flags, ...common, parse: integer(min, max) }, fallback, label);
}

/** A duration in seconds, fractions allowed; with `fallback`, always set. */
export function duration(flags: string, common: Common): OptionDeclaration<number, false>;
export function duration(
  flags: string,
  common: Common,
  fallback: number,
  label?: string,
): OptionDeclaration<number, true>;
export function duration(flags: string, common: Common, fallback?: number, label?: string): OptionDeclaration<number> {
  return withDefault({ flags, ...common, parse: seconds }, fallback, label);
}

/** A fraction from 0 to 1. */
export function fraction(flags: string, common: Common, fallback: number): OptionDeclaration<number, true> {
  return { flags, ...common, parse: ratio, default: fallback, hasDefault: true };
}

/** A repeatable value; an environment variable holds a comma-separated list. */
export function repeatable(flags: string, common: Common): OptionDeclaration<string[], false> {
  return { flags, ...common, parse: list, repeatable: true, hasDefault: false };
}

/** A switch: given or not. */
export function flag(flags: string, common: Common): OptionDeclaration<boolean, false> {
  return { flags, ...common, hasDefault: false };
}

function withDefault<Value>(
  declaration: Omit<OptionDeclaration<Value>, "hasDefault">,
  fallback: Value | undefined,
  label: string | undefined,
): OptionDeclaration<Value> {
  return fallback === undefined
    ? { ...declaration, hasDefault: false }
    : { ...declaration, default: fallback, ...(label === undefined ? {} : { defaultLabel: label }), hasDefault: true };
}

/** The option as commander parses it. */
export function commanderOption(declaration: OptionDeclaration<unknown>): Option {
  const option = new Option(declaration.flags, declaration.help).env(declaration.env);
  if (declaration.parse !== undefined) option.argParser(declaration.parse);
  if (declaration.choices !== undefined) option.choices(declaration.choices);
  if (declaration.default !== undefined) option.default(declaration.default, declaration.defaultLabel);
  return option;
}

/** Adds every declared option to `command` (in declaration order, as --help lists them). */
export function withOptions(command: Command, declarations: Declarations): Command {
  for (const declaration of Object.values(declarations)) command.addOption(commanderOption(declaration));
  return command;
}

/** The long flag alone, e.g. `--grpc-port`. */
const flagOf = (declaration: OptionDeclaration<unknown>): string => declaration.flags.split(" ")[0]!;

/**
 * The command-line arguments that give `values` (in declaration order): a switch that is
 * on is its flag, a list is its flag once per item, any other value its flag and text.
 */
export function argumentsOf<D extends Declarations>(declarations: D, values: Partial<ValuesOf<D>>): string[] {
  const args: string[] = [];
  for (const [key, declaration] of Object.entries(declarations)) {
    const value: unknown = values[key];
    if (value === undefined || value === false) continue;
    const name = flagOf(declaration);
    if (value === true) args.push(name);
    else if (Array.isArray(value)) for (const item of value) args.push(name, String(item));
    else args.push(name, String(value));
  }
  return args;
}

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error"] as const;

/** --log-level, the same for every long-running command. */
export const logLevel = choice(
  "--log-level <level>",
  { env: "DYNAMO_LOG_LEVEL", help: "trace | debug | info | warn | error" },
  LOG_LEVELS,
  "info",
);

export function integer(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}, got '${value}'`);
    }
    return parsed;
  };
}

/** A duration in seconds; fractions allowed (tests poll every 0.2 s). */
export function seconds(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0) {
    throw new InvalidArgumentError(`expected a number of seconds (0 or more), got '${value}'`);
  }
  return parsed;
}

/** A fraction from 0 to 1. */
export function ratio(value: string): number {
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isFinite(parsed) || parsed < 0 || parsed > 1) {
    throw new InvalidArgumentError(`expected a number from 0 to 1, got '${value}'`);
  }
  return parsed;
}

/** A list option: repeated flags accumulate; an environment variable holds a comma-separated list. */
export function list(value: string, previous: string[] | undefined): string[] {
  const items = value
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
  return [...(previous ?? []), ...items];
}

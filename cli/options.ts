import { InvalidArgumentError, Option } from "commander";

/**
 * Options are declared once each: flag, environment variable, default and help. Commander
 * applies the precedence flag > environment variable > default and prints all of it in
 * --help.
 */

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

/** The signals that stop a long-running service: SIGHUP too (a closed terminal, some supervisors). */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ["SIGTERM", "SIGINT", "SIGHUP"];

/**
 * Stops a long-running service on the first of SIGTERM, SIGINT or SIGHUP, then exits 0
 * (1 if stopping failed). Later signals — a repeated SIGTERM, Ctrl-C after it, a signal to
 * the whole process group that a --grpc-workers primary also passes on — are logged and
 * change nothing: the drain runs to its end (SIGKILL cuts it).
 */
export function stopOnSignals(
  service: { stop(): Promise<void> },
  logger: { info(object: object, message: string): void },
): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.info({ signal }, "already stopping");
      return;
    }
    stopping = true;
    logger.info({ signal }, "stopping");
    service.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
}

export const option = (flags: string, description: string, env: string): Option =>
  new Option(flags, description).env(env);

/** --log-level, the same for every long-running command. */
export const logLevelOption = (): Option =>
  option("--log-level <level>", "trace | debug | info | warn | error", "DYNAMO_LOG_LEVEL")
    .choices(["trace", "debug", "info", "warn", "error"])
    .default("info");

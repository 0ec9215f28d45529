import { InvalidArgumentError } from "commander";

/** A bench option's value that counts something (repetitions, rounds, seconds): a whole number, 1 or more. */
export function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!(parsed > 0 && Number.isInteger(parsed))) throw new InvalidArgumentError("must be a positive integer");
  return parsed;
}

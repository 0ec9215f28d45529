import { InvalidArgumentError } from "commander";

/** A command-line count (repetitions, seconds, requests in flight): a positive integer. */
export const positiveInteger = (value: string): number => {
  const parsed = Number(value);
  if (!(parsed > 0 && Number.isInteger(parsed))) throw new InvalidArgumentError("must be a positive integer");
  return parsed;
};

/** When the controllers of our kinds (DynamoKserveModel, DynamoKserveRepository) run again, and the time they stamp conditions with. */

/** The sooner of two requeue delays, either maybe absent. */
export function earliest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}

/** RFC 3339 to the second, as Kubernetes writes timestamps. */
export const timestamp = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

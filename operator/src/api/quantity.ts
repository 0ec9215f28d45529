/**
 * Kubernetes resource quantities ("500m", "10Gi", "1e3") as numbers: the API server rewrites
 * them to a canonical form ("10240Mi" -> "10Gi"), so they compare by value, and a cache size
 * becomes the data plane's byte count.
 */

const QUANTITY_SUFFIXES: Readonly<Record<string, number>> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The quantity's value, or undefined when the text is not a quantity. */
export function quantityValue(text: string): number | undefined {
  const match = /^([+-]?\d*\.?\d+(?:[eE][+-]?\d+)?)([a-zA-Z]*)$/.exec(text);
  const scale = match === null ? undefined : QUANTITY_SUFFIXES[match[2] as string];
  return scale === undefined ? undefined : Number(match![1]) * scale;
}

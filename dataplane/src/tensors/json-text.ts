import { internal, invalidArgument } from "../../../lib/errors.js";

/**
 * JSON request bodies read with the engine's own parser (JSON.parse, an order of magnitude
 * faster than any parser written in JavaScript: a body up to the size limit must not hold
 * the event loop for seconds), bounded in nesting, and optionally with whole numbers beyond
 * 2^53 kept exact as bigints (INT64 and UINT64 tensor data); and their writer, jsonText, which
 * writes such bigints exactly (parameters in replies, the python engine's frame headers).
 */

/**
 * Deeper than any tensor's data (a dimension per level) or any request's fields: JSON
 * nested deeper is refused before anything walks it (a walk that recurses would overflow).
 */
export const MAX_JSON_DEPTH = 100;

/** The exact values of the tokens that became one double, in the text's order, and the next one to use. */
interface Tokens {
  readonly values: (number | bigint)[];
  next: number;
}

/**
 * Values a JSON body other than an infer body may hold (arrays, objects, numbers, strings,
 * ...). Such bodies carry text and settings, a few values each; a large one is parsed on a
 * thread, and what it parsed to is copied back to the event loop: about 0.2 s per MB of
 * `[],[],...`. Bounding the values bounds that copy (a few ms for 100,000 values) whatever
 * the body's size; long text is one value.
 */
export const MAX_JSON_VALUES = 100_000;

export interface JsonTextOptions {
  /** Whole numbers beyond 2^53 as bigints (INT64 and UINT64 tensor data). */
  readonly exactIntegers?: boolean;
  /** Refuse text of more values than this. */
  readonly maxValues?: number;
}

/** Parses `text` (`what` names it in messages): nesting (and optionally values) bounded, and whole numbers beyond 2^53 as bigints when asked. */
export function parseJsonText(text: string, what: string, options: JsonTextOptions = {}): unknown {
  // A double holds every whole number of up to 15 digits: without a longer run of digits
  // (anywhere, strings included) nothing can be rounded.
  const collect = options.exactIntegers === true && /\d{16}/.test(text);
  const tokens = scan(text, what, collect, options.maxValues ?? Infinity);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalidArgument(`${what} is not valid JSON: ${(error as Error).message}`);
  }
  return tokens === undefined ? value : withExactIntegers(value, tokens, what);
}

/**
 * One pass over the text, strings skipped: refuses arrays and objects nested deeper than
 * MAX_JSON_DEPTH and, when `collect`, gathers the number tokens JSON.parse will turn into
 * unsafe integers (only a token of 16 or more digits, or with an exponent, can be one):
 * their exact values by the double each becomes, in the text's order. A whole-number token
 * is exact as a bigint; any other (1e20, 1.0e20) stays the double, which the tensor checks
 * refuse as inexact. Values are counted as a ',' or an opening bracket each (over by at
 * most one: fine for a bound). (Invalid JSON is JSON.parse's to report, after this.)
 */
function scan(text: string, what: string, collect: boolean, maxValues: number): Map<number, Tokens> | undefined {
  const tokens = collect ? new Map<number, Tokens>() : undefined;
  let depth = 0;
  let values = 1;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === 0x22) {
      // A string: to its closing quote, a backslash escaping the character after it.
      for (index++; index < text.length; index++) {
        const inner = text.charCodeAt(index);
        if (inner === 0x5c) index++;
        else if (inner === 0x22) break;
      }
    } else if (code === 0x2c || code === 0x5b || code === 0x7b) {
      if (++values > maxValues) {
        throw invalidArgument(
          `${what} holds more than ${maxValues} JSON values (only an infer request's tensor data may hold more)`,
        );
      }
      if (code !== 0x2c && ++depth > MAX_JSON_DEPTH) {
        throw invalidArgument(`${what} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
      }
    } else if (code === 0x5d || code === 0x7d) depth--;
    else if (tokens !== undefined && (code === 0x2d || (code >= 0x30 && code <= 0x39))) {
      const start = index;
      let exponent = false;
      for (; index + 1 < text.length && isNumberPart(text.charCodeAt(index + 1)); index++) {
        exponent ||= (text.charCodeAt(index + 1) | 0x20) === 0x65;
      }
      if (index + 1 - start >= 16 || exponent) record(text.slice(start, index + 1), tokens);
    }
  }
  return tokens;
}

/** Digits, '.', 'e', 'E', '+', '-': what follows a number token's first character. */
const isNumberPart = (code: number): boolean =>
  (code >= 0x30 && code <= 0x39) || code === 0x2e || code === 0x65 || code === 0x45 || code === 0x2b || code === 0x2d;

const WHOLE = /^-?\d+$/;

function record(token: string, tokens: Map<number, Tokens>): void {
  const value = Number(token);
  if (!Number.isInteger(value) || Number.isSafeInteger(value)) return;
  const exact = WHOLE.test(token) ? BigInt(token) : value;
  const same = tokens.get(value);
  if (same === undefined) tokens.set(value, { values: [exact], next: 0 });
  else same.values.push(exact);
}

/**
 * `value` with each unsafe integer replaced by its exact token. The walk meets values in
 * the text's order (arrays keep it, and objects too but for array-index keys, which no valid
 * request has), and a token only ever replaces the double it became. A token left over
 * means JSON.parse kept one of a key's two values.
 */
function withExactIntegers(value: unknown, tokens: Map<number, Tokens>, what: string): unknown {
  const exactOf = (number: number): number | bigint => {
    // An index, not shift(): a million equal values would make shifting quadratic.
    const same = tokens.get(number);
    const exact = same?.values[same.next++];
    if (exact === undefined) throw internal(`${what}: no token for the number ${number}`);
    return exact;
  };
  const isUnsafe = (item: unknown): item is number =>
    typeof item === "number" && Number.isInteger(item) && !Number.isSafeInteger(item);
  if (isUnsafe(value)) return exactOf(value);
  // A walk in the text's order on an explicit stack: each frame is a container and the
  // next of its items.
  interface Frame {
    readonly record: Record<string, unknown>;
    readonly keys: readonly string[] | undefined;
    readonly count: number;
    next: number;
  }
  const frameOf = (container: object): Frame => {
    const keys = Array.isArray(container) ? undefined : Object.keys(container);
    return {
      record: container as Record<string, unknown>,
      keys,
      count: keys?.length ?? (container as unknown[]).length,
      next: 0,
    };
  };
  const stack: Frame[] = typeof value === "object" && value !== null ? [frameOf(value)] : [];
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.next === frame.count) {
      stack.pop();
      continue;
    }
    const key = frame.keys?.[frame.next] ?? frame.next;
    frame.next++;
    const item = frame.record[key];
    if (isUnsafe(item)) frame.record[key] = exactOf(item);
    else if (typeof item === "object" && item !== null) stack.push(frameOf(item));
  }
  for (const { values, next } of tokens.values()) {
    if (next < values.length)
      throw invalidArgument(`${what} gives a key twice (its 64-bit integer value would be lost)`);
  }
  return value;
}

/** JSON text of JSON values that may hold bigints, written exactly (JSON.stringify refuses them). */
export function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    return exactJsonText(value);
  }
}

function exactJsonText(value: unknown): string {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return `[${value.map((item) => exactJsonText(item ?? null)).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const members = Object.entries(value).filter(([, item]) => item !== undefined);
    return `{${members.map(([key, item]) => `${JSON.stringify(key)}:${exactJsonText(item)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

import fc from "fast-check";

/**
 * How the fuzz tier breaks a valid request: a structural change to the decoded message (a
 * field made huge, negative, overflowing or empty), then byte-level damage to its encoding
 * (bit flips, truncation, a length prefix made enormous, inserted or repeated bytes).
 * Positions are fractions of the message, so one plan fits any seed.
 */

type Structural =
  | { kind: "none" }
  | { kind: "hugeString"; slot: number; length: number; unit: string }
  | { kind: "emptyString"; slot: number }
  | { kind: "extremeInteger"; slot: number; value: bigint }
  | { kind: "manyDims"; slot: number; count: number; value: bigint }
  | { kind: "bytes"; slot: number; length: number; fill: number }
  | { kind: "extremeNumber"; slot: number; value: number };

type ByteOp =
  | { kind: "flip"; at: number; bit: number }
  | { kind: "truncate"; at: number }
  | { kind: "hugeLength"; at: number }
  | { kind: "insert"; at: number; bytes: number[] }
  | { kind: "repeat"; from: number; to: number; times: number };

export interface MutationPlan {
  readonly method: number;
  readonly seed: number;
  readonly structural: Structural;
  readonly bytes: readonly ByteOp[];
  /** For streaming calls: how many messages to send (each one mutated by its own plan). */
  readonly extra: readonly MutationPlan[];
}

const position = fc.double({ min: 0, max: 1, noNaN: true });
const slot = fc.nat();

const structural: fc.Arbitrary<Structural> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: "none" as const }) },
  fc.record({
    kind: fc.constant("hugeString" as const),
    slot,
    length: fc.integer({ min: 1_000, max: 60_000 }),
    unit: fc.constantFrom("a", "é", "\u0000", "%", "🙂"),
  }),
  fc.record({ kind: fc.constant("emptyString" as const), slot }),
  fc.record({
    kind: fc.constant("extremeInteger" as const),
    slot,
    value: fc.constantFrom(0n, -1n, 2n ** 31n, 2n ** 32n - 1n, 2n ** 53n + 1n, 2n ** 62n, 2n ** 63n - 1n, -(2n ** 63n)),
  }),
  fc.record({
    kind: fc.constant("manyDims" as const),
    slot,
    count: fc.constantFrom(0, 7, 10_000),
    value: fc.constantFrom(1n, 0n, 2n ** 40n),
  }),
  fc.record({
    kind: fc.constant("bytes" as const),
    slot,
    length: fc.constantFrom(0, 1, 3, 4097, 300_000),
    fill: fc.nat({ max: 255 }),
  }),
  fc.record({
    kind: fc.constant("extremeNumber" as const),
    slot,
    value: fc.constantFrom(0, -1, 2 ** 32 - 1, 2 ** 31, Number.MAX_SAFE_INTEGER, -0.5, 1e308),
  }),
);

const byteOp: fc.Arbitrary<ByteOp> = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: position, bit: fc.nat({ max: 7 }) }),
  fc.record({ kind: fc.constant("truncate" as const), at: position }),
  fc.record({ kind: fc.constant("hugeLength" as const), at: position }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: position,
    bytes: fc.array(fc.nat({ max: 255 }), { minLength: 1, maxLength: 8 }),
  }),
  fc.record({
    kind: fc.constant("repeat" as const),
    from: position,
    to: position,
    times: fc.integer({ min: 2, max: 50 }),
  }),
);

const single = fc.record({
  method: fc.nat(),
  seed: fc.nat(),
  structural,
  // Half the plans keep the encoding intact, so most requests get past parsing into the pipeline.
  bytes: fc.oneof(fc.constant([] as ByteOp[]), fc.array(byteOp, { minLength: 1, maxLength: 3 })),
  extra: fc.constant([] as MutationPlan[]),
});

export const mutationPlan: fc.Arbitrary<MutationPlan> = fc
  .tuple(single, fc.array(single, { maxLength: 2 }))
  .map(([plan, extra]) => ({ ...plan, extra }));

/** A place in a decoded message holding a value of some kind, with a way to replace it. */
interface Slot {
  readonly value: unknown;
  set(value: unknown): void;
}

/** Every leaf and array of a decoded message (strings, numbers, bigints, bytes, arrays of bigints). */
function slotsOf(message: unknown): Slot[] {
  const slots: Slot[] = [];
  const visit = (holder: Record<string | number, unknown>, key: string | number): void => {
    const value = holder[key];
    const slot: Slot = { value, set: (replacement) => (holder[key] = replacement) };
    if (value instanceof Uint8Array || typeof value !== "object" || value === null) {
      if (value !== undefined) slots.push(slot);
      return;
    }
    if (Array.isArray(value)) slots.push(slot);
    for (const inner of Object.keys(value)) visit(value as Record<string, unknown>, inner);
  };
  const root = { message };
  visit(root, "message");
  return slots;
}

/** Applies a structural change to a deep copy of `message`; a kind no slot of which fits leaves it as it is. */
export function mutateStructure<T extends object>(message: T, change: Structural): T {
  const copy = structuredClone(message);
  if (change.kind === "none") return copy;
  const fits = (value: unknown): boolean => {
    switch (change.kind) {
      case "hugeString":
      case "emptyString":
        return typeof value === "string";
      case "extremeInteger":
        return typeof value === "bigint";
      case "manyDims":
        return Array.isArray(value) && value.every((item) => typeof item === "bigint");
      case "bytes":
        return value instanceof Uint8Array;
      case "extremeNumber":
        return typeof value === "number";
    }
  };
  const candidates = slotsOf(copy).filter((candidate) => fits(candidate.value));
  if (candidates.length === 0) return copy;
  const target = candidates[change.slot % candidates.length]!;
  switch (change.kind) {
    case "hugeString":
      target.set(change.unit.repeat(Math.ceil(change.length / change.unit.length)));
      break;
    case "emptyString":
      target.set("");
      break;
    case "extremeInteger":
      target.set(change.value);
      break;
    case "manyDims":
      target.set(Array.from({ length: change.count }, () => change.value));
      break;
    case "bytes":
      target.set(new Uint8Array(change.length).fill(change.fill));
      break;
    case "extremeNumber":
      target.set(change.value);
      break;
  }
  return copy;
}

/** Applies byte-level damage to an encoded message. */
export function mutateBytes(encoded: Uint8Array, ops: readonly ByteOp[]): Buffer {
  let bytes = Buffer.from(encoded);
  const at = (fraction: number): number => Math.min(bytes.length, Math.floor(fraction * bytes.length));
  for (const op of ops) {
    switch (op.kind) {
      case "flip": {
        const index = Math.min(at(op.at), bytes.length - 1);
        if (index >= 0) bytes[index] = bytes[index]! ^ (1 << op.bit);
        break;
      }
      case "truncate":
        bytes = bytes.subarray(0, at(op.at));
        break;
      case "hugeLength": {
        // A varint of 2^32 - 1 where a length or a tag may be: "this field is 4 GiB long".
        const index = at(op.at);
        bytes = Buffer.concat([
          bytes.subarray(0, index),
          Buffer.of(0xff, 0xff, 0xff, 0xff, 0x0f),
          bytes.subarray(index),
        ]);
        break;
      }
      case "insert": {
        const index = at(op.at);
        bytes = Buffer.concat([bytes.subarray(0, index), Buffer.from(op.bytes), bytes.subarray(index)]);
        break;
      }
      case "repeat": {
        const [from, to] = [at(Math.min(op.from, op.to)), at(Math.max(op.from, op.to))];
        const piece = bytes.subarray(from, to);
        bytes = Buffer.concat([
          bytes.subarray(0, to),
          ...Array.from({ length: op.times }, () => piece),
          bytes.subarray(to),
        ]);
        break;
      }
    }
  }
  return bytes;
}

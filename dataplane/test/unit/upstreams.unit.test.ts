import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { GRPC_CODE_OF, kindOfGrpcCode } from "../../../lib/grpc/status-codes.js";
import { SequenceAffinity } from "../../src/engines/kserve-grpc/sequences.js";
import type { SequenceId } from "../../src/tensors/parameters.js";

const text = (value: string): SequenceId => ({ kind: "string", value });
const number = (value: number): SequenceId => ({ kind: "uint", value: BigInt(value) });

describe("sequence affinity of a forwarded model (kserve-grpc)", () => {
  let now = 0;
  const clock = () => now;
  beforeEach(() => (now = 0));

  it("keeps a sequence on its endpoint while it is used, and forgets it once idle past the limit", () => {
    const affinity = new SequenceAffinity<string>(1000, 100, clock);
    affinity.bind(text("s1"), "A");
    now = 900;
    assert.equal(affinity.get(text("s1")), "A", "used within the idle limit");
    now = 1800;
    assert.equal(affinity.get(text("s1")), "A", "the last use restarted the idle clock");
    now = 2801;
    assert.equal(affinity.get(text("s1")), undefined, "idle for longer than the limit");
    assert.equal(affinity.size, 0);
  });

  it("stays bounded when clients never send sequence_end: the least recently used goes", () => {
    const affinity = new SequenceAffinity<string>(60_000, 1000, clock);
    for (let sequence = 0; sequence < 100_000; sequence++) {
      now = sequence; // every sequence opened and abandoned, one per millisecond
      affinity.bind(number(sequence + 1), "A");
      if (sequence === 500) affinity.get(number(10)); // sequence 10 stays in use
    }
    assert.ok(affinity.size <= 1000, `${affinity.size} sequences remembered`);
    assert.equal(affinity.get(number(100_000)), "A");
    assert.equal(affinity.get(number(1)), undefined);
  });

  it("forgets a sequence at its end", () => {
    const affinity = new SequenceAffinity<string>(60_000, 10, clock);
    affinity.bind(text("s"), "B");
    affinity.end(text("s"));
    assert.equal(affinity.get(text("s")), undefined);
  });

  it('keeps the integer 5 and the string "5" apart: they are different sequences', () => {
    const affinity = new SequenceAffinity<string>(60_000, 10, clock);
    affinity.bind(number(5), "A");
    affinity.bind(text("5"), "B");
    assert.equal(affinity.get(number(5)), "A");
    assert.equal(affinity.get(text("5")), "B");
    affinity.end(text("5"));
    assert.equal(affinity.get(number(5)), "A", "ending one leaves the other open");
  });
});

describe("one table between error kinds and gRPC codes", () => {
  it("maps each kind to a code and that code back to the kind", () => {
    for (const [kind, code] of Object.entries(GRPC_CODE_OF)) assert.equal(kindOfGrpcCode(code), kind);
  });

  it("classifies codes without a kind of their own as Internal", () => {
    assert.equal(kindOfGrpcCode(status.UNKNOWN), "Internal");
    assert.equal(kindOfGrpcCode(status.DATA_LOSS), "Internal");
  });
});

import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import assert from "node:assert/strict";
import { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { forwardedConfig, useScriptedForwarding } from "../fixtures/forwarding.js";
import { scriptedRequest } from "../fixtures/scripted-upstream.js";
import { RawClient, type RawOutcome } from "./raw-client.js";

/**
 * Requests to a pass-through model are read only to their top-level fields
 * (server/request-decoding.ts) and sent on as they came: whatever those fields are — cut,
 * repeated, reordered, of a wire type the field does not have, or unknown — the outcome
 * through the data plane must be the one the upstream gives when called directly (code,
 * text, every reply byte). The model's name stays the upstream's (the one thing the data
 * plane reads to route the request; a request naming another model is another model's),
 * and its version one it serves. Seeded: FUZZ_SEED (default 15), FUZZ_PASS_THROUGH_RUNS
 * (default 300).
 */

const SEED = Number(process.env["FUZZ_SEED"] ?? 15);
const RUNS = Number(process.env["FUZZ_PASS_THROUGH_RUNS"] ?? 300);
const INFER = "/inference.GRPCInferenceService/ModelInfer";
const DEADLINE_MS = 10_000;
const MODEL = "scripted";

/** One top-level field as it was encoded: its number and its bytes, tag included. */
interface RawField {
  readonly number: number;
  readonly bytes: Uint8Array;
}

function fieldsOf(message: Uint8Array): RawField[] {
  const reader = new BinaryReader(message);
  const fields: RawField[] = [];
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const [number, wireType] = reader.tag();
    reader.skip(wireType, number);
    fields.push({ number, bytes: message.subarray(start, reader.pos) });
  }
  return fields;
}

type FieldChange =
  | { kind: "cut"; at: number }
  | { kind: "repeat"; at: number }
  | { kind: "move"; from: number; to: number }
  | { kind: "insert"; at: number; number: number; wireType: "varint" | "fixed32" | "fixed64" | "bytes"; size: number };

const MODEL_NAME = 1;
/** model_name, model_version; parameters, inputs, outputs. */
const RENAMING_OR_NESTED = new Set([1, 2, 4, 5, 6]);

/** A field of any number (a known one with a foreign wire type too), validly encoded. */
function encodedField(change: Extract<FieldChange, { kind: "insert" }>): Uint8Array {
  const writer = new BinaryWriter();
  switch (change.wireType) {
    case "varint":
      return writer
        .tag(change.number, WireType.Varint)
        .uint64(BigInt(change.size) ** 3n)
        .finish();
    case "fixed32":
      return writer.tag(change.number, WireType.Bit32).fixed32(change.size).finish();
    case "fixed64":
      return writer.tag(change.number, WireType.Bit64).fixed64(BigInt(change.size)).finish();
    case "bytes":
      return writer.tag(change.number, WireType.LengthDelimited).bytes(new Uint8Array(change.size).fill(0x61)).finish();
  }
}

function applied(fields: RawField[], change: FieldChange): RawField[] {
  const next = [...fields];
  const index = (at: number): number => at % Math.max(1, next.length);
  switch (change.kind) {
    case "cut": {
      const at = index(change.at);
      // The name routes the request, and a name the data plane does not serve is another
      // model's business: only its repetition is fair game.
      if (next[at]?.number !== MODEL_NAME) next.splice(at, 1);
      break;
    }
    case "repeat": {
      const at = index(change.at);
      next.splice(at, 0, next[at]!);
      break;
    }
    case "move": {
      const [moved] = next.splice(index(change.from), 1);
      next.splice(index(change.to), 0, moved!);
      break;
    }
    case "insert": {
      // A length-delimited model_name or model_version would rename the request, and filler
      // bytes in a message-typed field (parameters, inputs, outputs) are a malformed message
      // the scripted peer's own recorder cannot read: both left out.
      const skipped = change.wireType === "bytes" && RENAMING_OR_NESTED.has(change.number);
      if (!skipped) next.splice(index(change.at), 0, { number: change.number, bytes: encodedField(change) });
      break;
    }
  }
  return next;
}

const fieldChange: fc.Arbitrary<FieldChange> = fc.oneof(
  fc.record({ kind: fc.constant("cut" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("repeat" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("move" as const), from: fc.nat(), to: fc.nat() }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: fc.nat(),
    number: fc.oneof(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 13, max: 536_870_911 })),
    wireType: fc.constantFrom("varint" as const, "fixed32" as const, "fixed64" as const, "bytes" as const),
    size: fc.integer({ min: 0, max: 300 }),
  }),
);

/** A request the scripted upstream echoes, or answers with a status. */
const seed = fc.record({
  id: fc.string({ maxLength: 12 }),
  version: fc.constantFrom("", "1"),
  failWith: fc.option(fc.constantFrom(3, 5, 9, 13), { nil: undefined }),
});

describe("pass-through requests with mutated top-level fields: the outcome through the data plane is the upstream's", function () {
  this.timeout(600_000);
  const forwarding = useScriptedForwarding((upstream) => ({ [MODEL]: forwardedConfig(MODEL, upstream) }));
  let direct: RawClient;
  let through: RawClient;

  before(() => {
    direct = new RawClient(forwarding.upstream.address);
    through = new RawClient(`127.0.0.1:${forwarding.server.grpcPort}`);
  });

  after(() => {
    direct?.close();
    through?.close();
  });

  const comparable = ({ code, details, responses }: RawOutcome) => ({
    code,
    details,
    responses: responses.map((bytes) => bytes.toString("hex")),
  });

  it("gives the upstream's code, text and reply bytes for every mutation", async () => {
    await fc.assert(
      fc.asyncProperty(seed, fc.array(fieldChange, { minLength: 1, maxLength: 4 }), async (base, changes) => {
        const script =
          base.failWith === undefined ? {} : { status: base.failWith, details: `scripted ${base.failWith}` };
        const request = scriptedRequest(MODEL, script, { id: base.id, modelVersion: base.version });
        let fields = fieldsOf(ModelInferRequest.encode(request).finish());
        for (const change of changes) fields = applied(fields, change);
        const message = Buffer.concat(fields.map((field) => field.bytes));
        const expected = await direct.unary(INFER, message, DEADLINE_MS);
        const got = await through.unary(INFER, message, DEADLINE_MS);
        assert.deepEqual(comparable(got), comparable(expected));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

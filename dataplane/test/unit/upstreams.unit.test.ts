import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { GRPC_CODE_OF, kindOfGrpcCode } from "../../../lib/grpc/status-codes.js";
import { kserveGrpcEngine } from "../../../lib/engines/kserve-grpc.js";
import { parseText } from "../../../lib/model-repository/config.js";
import { toModelSpec } from "../../../lib/model-repository/spec.js";
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

describe("kserve-grpc TLS parameters", () => {
  const settingsOf = (parameters: Record<string, string>) => {
    const lines = Object.entries({ backend: "kserve-grpc", upstream: "127.0.0.1:8001", ...parameters })
      .filter(([key]) => key !== "backend")
      .map(([key, value]) => `parameters { key: "${key}" value { string_value: "${value}" } }`);
    const source = "m/config.pbtxt";
    return kserveGrpcEngine.settings(
      toModelSpec(parseText(['name: "m"', 'backend: "kserve-grpc"', ...lines].join("\n"), source), source),
      source,
    );
  };

  it("reads none when upstream_tls is not set, the files and name when it is", () => {
    assert.equal(settingsOf({}).tls, undefined);
    assert.deepEqual(settingsOf({ upstream_tls: "true" }).tls, {});
    assert.deepEqual(
      settingsOf({
        upstream_tls: "true",
        upstream_ca_file: "/tls/ca.crt",
        upstream_cert_file: "/tls/tls.crt",
        upstream_key_file: "/tls/tls.key",
        upstream_server_name: "triton.example",
      }).tls,
      { caFile: "/tls/ca.crt", certFile: "/tls/tls.crt", keyFile: "/tls/tls.key", serverName: "triton.example" },
    );
  });

  it("refuses a bad combination with an error naming the parameter", () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ upstream_tls: "yes" }, /parameters\["upstream_tls"\] must be true or false, not 'yes'/],
      [
        { upstream_ca_file: "/tls/ca.crt" },
        /parameters\["upstream_ca_file"\] is set but parameters\["upstream_tls"\] is not "true"/,
      ],
      [{ upstream_server_name: "x" }, /parameters\["upstream_server_name"\] is set but/],
      [{ upstream_tls: "true", upstream_cert_file: "/tls/tls.crt" }, /parameters\["upstream_key_file"\] is missing/],
      [{ upstream_tls: "true", upstream_key_file: "/tls/tls.key" }, /parameters\["upstream_cert_file"\] is missing/],
      [{ upstream_tls: "true", upstream_ca_file: " " }, /parameters\["upstream_ca_file"\] is empty/],
    ];
    for (const [parameters, expected] of cases)
      assert.throws(() => settingsOf(parameters), expected, JSON.stringify(parameters));
  });
});

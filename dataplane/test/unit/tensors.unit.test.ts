import assert from "node:assert/strict";
import { DataPlaneError } from "../../../lib/errors.js";
import { countBytesElements, joinBytesElements, splitBytesElements } from "../../src/tensors/bytes.js";
import { DATATYPE_NAMES, DATATYPES, datatypeFromConfig } from "../../../lib/model-repository/datatypes.js";
import { decodeInputs, encodeOutputs, type InputContract } from "../../src/tensors/request.js";
import { emptyContents, rawToTyped, typedToRaw } from "../../src/tensors/typed.js";
import { samplingInputs } from "../../src/tensors/sampling-inputs.js";
import type { InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import { parseText } from "../../../lib/model-repository/config.js";
import { toModelSpec } from "../../../lib/model-repository/spec.js";

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

const invalid = (fn: () => unknown, pattern: RegExp): void => {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof DataPlaneError);
    assert.equal(error.kind, "InvalidArgument");
    assert.match(error.message, pattern);
    return true;
  });
};

describe("datatypes", () => {
  it("maps every KServe datatype to its config enum and back", () => {
    for (const name of DATATYPE_NAMES) assert.equal(datatypeFromConfig(DATATYPES[name].configType), name);
    assert.equal(datatypeFromConfig(0), undefined);
  });
});

describe("BYTES framing", () => {
  it("frames and splits elements, including empty ones", () => {
    const framed = joinBytesElements([utf8("ab"), utf8(""), utf8("xyz")]);
    assert.deepEqual([...framed.subarray(0, 4)], [2, 0, 0, 0]);
    assert.equal(countBytesElements(framed, "T"), 3);
    assert.deepEqual(
      splitBytesElements(framed).map((element) => new TextDecoder().decode(element)),
      ["ab", "", "xyz"],
    );
  });

  it("rejects a truncated prefix and an overlong element, naming the tensor", () => {
    invalid(() => countBytesElements(Uint8Array.of(1, 0), "T"), /tensor 'T'.*truncated 4-byte length prefix/);
    invalid(() => countBytesElements(Uint8Array.of(9, 0, 0, 0, 65), "T"), /declares 9 bytes but only 1 remain/);
  });
});

describe("typed contents", () => {
  const roundTrip: [(typeof DATATYPE_NAMES)[number], unknown[]][] = [
    ["BOOL", [true, false, true]],
    ["UINT8", [0, 255]],
    ["UINT16", [0, 65535]],
    ["UINT32", [0, 4294967295]],
    ["UINT64", [0n, 18446744073709551615n]],
    ["INT8", [-128, 127]],
    ["INT16", [-32768, 32767]],
    ["INT32", [-2147483648, 2147483647]],
    ["INT64", [-9223372036854775808n, 9223372036854775807n]],
    ["FP32", [1.5, -2.25]],
    ["FP64", [Math.PI, -1e300]],
    ["BYTES", [utf8("hello"), utf8("")]],
  ];
  for (const [datatype, values] of roundTrip) {
    it(`round-trips ${datatype} through raw form`, () => {
      const field = DATATYPES[datatype].typedField!;
      const contents = { ...emptyContents(), [field]: values };
      const raw = typedToRaw("T", datatype, contents, values.length);
      if (datatype !== "BYTES") assert.equal(raw.byteLength, values.length * DATATYPES[datatype].byteSize);
      assert.deepEqual(rawToTyped(datatype, raw)[field], values);
    });
  }

  it("reads raw values at unaligned offsets", () => {
    const buffer = new Uint8Array(9);
    new DataView(buffer.buffer).setFloat64(1, 2.5, true);
    assert.deepEqual(rawToTyped("FP64", buffer.subarray(1)).fp64Contents, [2.5]);
  });

  it("rejects counts, ranges and fields that do not fit the datatype", () => {
    invalid(
      () => typedToRaw("T", "INT32", { ...emptyContents(), intContents: [1] }, 2),
      /needs 2 elements.*int_contents holds 1/,
    );
    invalid(
      () => typedToRaw("T", "INT8", { ...emptyContents(), intContents: [128] }, 1),
      /element 0 \(128\) is out of range for INT8/,
    );
    invalid(() => typedToRaw("T", "UINT8", { ...emptyContents(), uintContents: [256] }, 1), /out of range for UINT8/);
    invalid(
      () => typedToRaw("T", "INT32", { ...emptyContents(), intContents: [1], fp32Contents: [1] }, 1),
      /takes contents\.int_contents, but contents\.fp32_contents is set/,
    );
    invalid(() => typedToRaw("T", "FP16", emptyContents(), 0), /FP16 has no typed 'contents' field/);
  });
});

describe("request decoding", () => {
  const contract: InputContract = {
    modelName: "m",
    maxBatchSize: 4,
    inputs: [
      { name: "A", datatype: "FP32", dims: [2], optional: false },
      { name: "B", datatype: "BYTES", dims: [-1], optional: true },
    ],
  };
  const request = (inputs: { name: string; datatype: string; shape: bigint[] }[], raw: Uint8Array[] = []) => ({
    modelName: "m",
    modelVersion: "",
    id: "",
    parameters: {},
    outputs: [],
    inputs: inputs.map((input) => ({ ...input, parameters: {}, contents: undefined })),
    rawInputContents: raw,
  });
  const fp32 = (...values: number[]): Uint8Array => new Uint8Array(Float32Array.from(values).buffer);

  it("keeps raw inputs as views and reports the batch size", () => {
    const data = fp32(1, 2, 3, 4);
    const decoded = decodeInputs(request([{ name: "A", datatype: "FP32", shape: [2n, 2n] }], [data]), contract);
    assert.equal(decoded.batchSize, 2);
    assert.equal(decoded.tensors[0]?.data, data);
  });

  it("rejects each kind of bad input with a message naming it", () => {
    const a = { name: "A", datatype: "FP32", shape: [1n, 2n] };
    invalid(() => decodeInputs(request([{ ...a, name: "Z" }], [fp32(1, 2)]), contract), /unexpected input 'Z'.*A, B/);
    invalid(
      () => decodeInputs(request([{ ...a, datatype: "INT32" }], [fp32(1, 2)]), contract),
      /expects FP32, got 'INT32'/,
    );
    invalid(
      () => decodeInputs(request([{ ...a, shape: [1n, 3n] }], [fp32(1, 2, 3)]), contract),
      /shape \[1,3\] does not match/,
    );
    invalid(() => decodeInputs(request([{ ...a, shape: [2n] }], [fp32(1, 2)]), contract), /shape \[2\] does not match/);
    invalid(
      () => decodeInputs(request([{ ...a, shape: [5n, 2n] }], [fp32(...new Array(10).fill(0))]), contract),
      /batch size 5 is outside 1\.\.4/,
    );
    invalid(() => decodeInputs(request([a], [fp32(1)]), contract), /raw data is 4 bytes.*needs 8/);
    invalid(() => decodeInputs(request([a, a], [fp32(1, 2), fp32(1, 2)]), contract), /given twice/);
    invalid(() => decodeInputs(request([a], []), contract), /needs 2 elements/);
    invalid(
      () => decodeInputs(request([a], [fp32(1, 2), fp32(3)]), contract),
      /raw_input_contents has 2 entries but the request has 1 inputs/,
    );
    const onlyB = request([{ name: "B", datatype: "BYTES", shape: [1n, 1n] }], [joinBytesElements([utf8("x")])]);
    invalid(() => decodeInputs(onlyB, contract), /missing required input 'A'/);
    invalid(
      () =>
        decodeInputs(
          request([a, { name: "B", datatype: "BYTES", shape: [1n, 2n] }], [fp32(1, 2), joinBytesElements([utf8("x")])]),
          contract,
        ),
      /needs 2 BYTES elements, raw data holds 1/,
    );
    invalid(
      () =>
        decodeInputs(
          request(
            [a, { name: "B", datatype: "BYTES", shape: [2n, 1n] }],
            [fp32(1, 2), joinBytesElements([utf8("x"), utf8("y")])],
          ),
          contract,
        ),
      /disagree on the batch size/,
    );
  });

  it("passes any well-formed input through when the model declares no tensors", () => {
    const open: InputContract = { modelName: "m", maxBatchSize: 4, inputs: undefined };
    const data = fp32(1, 2, 3);
    const decoded = decodeInputs(request([{ name: "ANY", datatype: "FP32", shape: [1n, 3n] }], [data]), open);
    assert.equal(decoded.tensors[0]?.data, data, "raw bytes are not copied");
    assert.equal(decoded.tensors[0]?.datatype, "FP32");
    invalid(
      () => decodeInputs(request([{ name: "X", datatype: "FLOAT", shape: [1n, 1n] }], [fp32(1)]), open),
      /'FLOAT' is not a KServe datatype/,
    );
    invalid(
      () => decodeInputs(request([{ name: "X", datatype: "FP32", shape: [1n, 2n] }], [fp32(1)]), open),
      /raw data is 4 bytes.*needs 8/,
    );
    invalid(
      () =>
        decodeInputs(
          request([{ name: "X", datatype: "FP32", shape: [9n, 1n] }], [fp32(...new Array(9).fill(0))]),
          open,
        ),
      /batch size 9 is outside 1\.\.4/,
    );
  });

  it("rejects a request that mixes typed and raw contents", () => {
    const mixed = request([{ name: "A", datatype: "FP32", shape: [1n, 2n] }], [fp32(1, 2)]);
    mixed.inputs[0]!.contents = { ...emptyContents(), fp32Contents: [1, 2] } as never;
    invalid(() => decodeInputs(mixed, contract), /both 'contents' and raw_input_contents/);
  });

  it("replies in raw outputs, as Triton does, the tensors' own bytes", () => {
    const tensor = { name: "O", datatype: "FP32" as const, shape: [1], data: fp32(1) };
    const half = { name: "H", datatype: "FP16" as const, shape: [1], data: Uint8Array.of(0, 60) };
    const { outputs, rawOutputContents } = encodeOutputs([tensor, half]);
    assert.deepEqual(rawOutputContents, [tensor.data, half.data]);
    assert.equal(rawOutputContents[0], tensor.data);
    assert.deepEqual(
      outputs.map((output) => output.contents),
      [undefined, undefined],
    );
  });
});

/** TensorRT-LLM's layout with 64-bit sampling inputs (max_tokens INT64, random_seed UINT64). */
const SPEC = toModelSpec(
  parseText(
    `name: "llm" backend: "mocker"
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] },
        { name: "max_tokens" data_type: TYPE_INT64 dims: [ 1 ] },
        { name: "random_seed" data_type: TYPE_UINT64 dims: [ 1 ] optional: true },
        { name: "temperature" data_type: TYPE_FP32 dims: [ 1 ] optional: true } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]`,
    "llm",
  ),
  "llm",
);

/** Parameters as MAX sends them: numeric strings. */
const strings = (values: Record<string, string>): Record<string, InferParameter> =>
  Object.fromEntries(
    Object.entries(values).map(([key, value]) => [key, { parameterChoice: { $case: "stringParam", value } }]),
  );

describe("sampling inputs from request parameters (TensorRT-LLM's layout), in raw form", () => {
  it("writes each declared input's value in its datatype", () => {
    const { inputs, raw } = samplingInputs(SPEC, strings({ max_tokens: "32", seed: "7", temperature: "0.5" }));
    assert.deepEqual(
      inputs.map(({ name, datatype, shape, contents }) => ({ name, datatype, shape, contents })),
      [
        { name: "max_tokens", datatype: "INT64", shape: [1n], contents: undefined },
        { name: "random_seed", datatype: "UINT64", shape: [1n], contents: undefined },
        { name: "temperature", datatype: "FP32", shape: [1n], contents: undefined },
      ],
    );
    assert.equal(Buffer.from(raw[0]!).readBigInt64LE(0), 32n);
    assert.equal(Buffer.from(raw[1]!).readBigUInt64LE(0), 7n);
    assert.equal(Buffer.from(raw[2]!).readFloatLE(0), 0.5);
  });

  it("refuses a value its 64-bit input cannot hold, naming the input (it wrapped: 1e19 became -8446744073709551616)", () => {
    invalid(() => samplingInputs(SPEC, strings({ max_tokens: "1e19" })), /input 'max_tokens'.*INT64/);
    invalid(() => samplingInputs(SPEC, strings({ max_tokens: "16", seed: "-1" })), /input 'random_seed'.*UINT64/);
  });
});

describe("typed INT64 / UINT64 contents to raw: checked as JSON data is", () => {
  it("refuses a bigint out of the datatype's range naming the tensor (it wrapped silently)", () => {
    const contents = { ...emptyContents(), int64Contents: [1n, 2n ** 63n] };
    invalid(() => typedToRaw("big", "INT64", contents, 2), /tensor 'big': element 1 .*INT64/);
    const unsigned = { ...emptyContents(), uint64Contents: [-1n] };
    invalid(() => typedToRaw("seed", "UINT64", unsigned, 1), /tensor 'seed': element 0 .*UINT64/);
    const fine = { ...emptyContents(), int64Contents: [-(2n ** 63n)] };
    assert.equal(Buffer.from(typedToRaw("t", "INT64", fine, 1)).readBigInt64LE(0), -(2n ** 63n));
  });
});

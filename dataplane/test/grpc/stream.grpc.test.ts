import assert from "node:assert/strict";
import type {
  InferParameter,
  ModelInferRequest,
  ModelStreamInferResponse,
} from "../../../proto/gen/ts/grpc_service.js";
import { call, inferRequest, streamAll, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

const int32 = (...values: number[]): Uint8Array => new Uint8Array(Int32Array.from(values).buffer);
const uint32 = (...values: number[]): Uint8Array => new Uint8Array(Uint32Array.from(values).buffer);
const flag = (value: boolean): InferParameter => ({ parameterChoice: { $case: "boolParam", value } });

/** A repeat_int32 request: OUT = values[i], response i after delays[i] ms. */
function repeatRequest(
  id: string,
  values: number[],
  delays: number[],
  parameters: Record<string, InferParameter> = {},
) {
  return inferRequest({
    modelName: "repeat_int32",
    id,
    parameters,
    inputs: [
      { name: "IN", datatype: "INT32", shape: [BigInt(values.length)], parameters: {}, contents: undefined },
      { name: "DELAY", datatype: "UINT32", shape: [BigInt(delays.length)], parameters: {}, contents: undefined },
    ],
    rawInputContents: [int32(...values), uint32(...delays)],
  });
}

/** The request with its first input's datatype replaced (a mismatch with the config). */
function withDatatype(request: ModelInferRequest, datatype: string): ModelInferRequest {
  const [first, ...rest] = request.inputs;
  return { ...request, inputs: [{ ...first!, datatype }, ...rest] };
}

const outValue = (reply: ModelStreamInferResponse): number | undefined => {
  const raw = reply.inferResponse?.rawOutputContents[0];
  return raw === undefined ? undefined : new DataView(raw.buffer, raw.byteOffset, raw.byteLength).getInt32(0, true);
};
const finalFlag = (reply: ModelStreamInferResponse): unknown =>
  reply.inferResponse?.parameters["triton_final_response"]?.parameterChoice?.value;

describe("ModelStreamInfer (real server over loopback)", function () {
  this.timeout(20_000);
  const serving = useServer();
  let server: ServerProcess;
  before(() => ({ server } = serving));

  it("runs requests on one stream concurrently and interleaves their responses", async () => {
    const replies = await streamAll(server.client, [
      repeatRequest("a", [1, 2, 3], [0, 200, 200]),
      repeatRequest("b", [10, 20], [100, 200]),
    ]);
    assert.ok(replies.every((reply) => reply.errorMessage === ""));
    assert.deepEqual(
      replies.map((reply) => reply.inferResponse?.id),
      ["a", "b", "a", "b", "a"],
    );
    const valuesOf = (id: string) => replies.filter((r) => r.inferResponse?.id === id).map(outValue);
    assert.deepEqual(valuesOf("a"), [1, 2, 3]);
    assert.deepEqual(valuesOf("b"), [10, 20]);
    assert.ok(replies.every((reply) => finalFlag(reply) === false));
    const idx = replies.filter((r) => r.inferResponse?.id === "a").map((r) => r.inferResponse?.outputs[1]?.name);
    assert.deepEqual(idx, ["IDX", "IDX", "IDX"]);
  });

  it("answers a failing request with error_message and keeps the stream open", async () => {
    const replies = await streamAll(server.client, [
      repeatRequest("ok-1", [7], [0]),
      inferRequest({ modelName: "no_such_model", id: "bad-model" }),
      withDatatype(repeatRequest("bad-type", [1], [0]), "FP32"),
      repeatRequest("ok-2", [8], [50]),
    ]);
    const byId = (id: string) => replies.filter((reply) => reply.inferResponse?.id === id);
    assert.match(byId("bad-model")[0]!.errorMessage, /Request for unknown model: 'no_such_model' is not found/);
    assert.match(byId("bad-type")[0]!.errorMessage, /tensor 'IN': datatype mismatch.*expects INT32, got 'FP32'/);
    assert.deepEqual(byId("ok-1").map(outValue), [7]);
    assert.deepEqual(byId("ok-2").map(outValue), [8]);
    assert.equal(byId("ok-2")[0]!.errorMessage, "");
  });

  it("sends an empty final response when the client asks for it", async () => {
    const replies = await streamAll(server.client, [
      repeatRequest("f", [4, 5], [0, 0], { triton_enable_empty_final_response: flag(true) }),
    ]);
    assert.equal(replies.length, 3);
    assert.deepEqual(replies.map(finalFlag), [false, false, true]);
    assert.equal(replies[2]!.inferResponse?.outputs.length, 0);
    assert.equal(replies[2]!.inferResponse?.parameters["triton_enable_empty_final_response"], undefined);
  });

  it("serves unary models on a stream with one final response each", async () => {
    const request = inferRequest({
      modelName: "identity_int32",
      id: "u",
      inputs: [{ name: "INPUT0", datatype: "INT32", shape: [4n], parameters: {}, contents: undefined }],
      rawInputContents: [int32(1, 2, 3, 4)],
    });
    const replies = await streamAll(server.client, [request, { ...request, id: "v" }]);
    assert.deepEqual(replies.map((reply) => reply.inferResponse?.id).sort(), ["u", "v"]);
    assert.ok(replies.every((reply) => finalFlag(reply) === true));
  });

  it("stops a request when the client cancels the stream, and keeps serving", async () => {
    const stream = server.client.modelStreamInfer();
    stream.on("error", () => undefined);
    stream.write(repeatRequest("slow", [1, 2], [0, 60_000]));
    await new Promise<void>((resolve) => stream.once("data", () => resolve()));
    stream.cancel();
    assert.equal((await call(server.client, "serverLive", {})).live, true);
    const replies = await streamAll(server.client, [repeatRequest("after", [3], [0])]);
    assert.deepEqual(replies.map(outValue), [3]);
  });
});

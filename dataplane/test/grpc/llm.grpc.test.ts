import { credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { InferenceExtensionsClient } from "../../../proto/gen/ts/extensions.js";
import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { joinBytesElements, splitBytesElements } from "../../src/tensors/bytes.js";
import { callError, infer, inferRequest, streamTimed, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

const prompt = (text: string, parameters: Record<string, InferParameter> = {}, model = "mock_llm"): ModelInferRequest =>
  inferRequest({
    modelName: model,
    id: `p-${text}`,
    parameters,
    inputs: [{ name: "text_input", datatype: "BYTES", shape: [1n], parameters: {}, contents: undefined }],
    rawInputContents: [joinBytesElements([new TextEncoder().encode(text)])],
  });

const texts = (response: ModelInferResponse, name: string): string[] => {
  const index = response.outputs.findIndex((output) => output.name === name);
  return splitBytesElements(response.rawOutputContents[index]!).map((bytes) => new TextDecoder().decode(bytes));
};

const maxTokens = (value: number): Record<string, InferParameter> => ({
  max_tokens: { parameterChoice: { $case: "int64Param", value: BigInt(value) } },
});

describe("mocker LLM and ModelInferStream (real server over loopback)", function () {
  this.timeout(20_000);
  const serving = useServer();
  let server: ServerProcess;
  before(() => ({ server } = serving));

  it("streams one token per response on ModelStreamInfer, honouring max_tokens, with the configured latencies", async () => {
    const replies = await streamTimed(server.client, [prompt("hello", maxTokens(5))]);
    assert.equal(replies.length, 5);
    assert.ok(replies.every(({ reply }) => reply.errorMessage === "" && reply.inferResponse?.id === "p-hello"));
    const finish = replies.map(({ reply }) => texts(reply.inferResponse!, "finish_reason")[0]);
    assert.deepEqual(finish, ["", "", "", "", "length"]);
    assert.ok(replies[0]!.at >= 45, `time to first token ${replies[0]!.at} ms (ttft_ms 50)`);
    assert.ok(
      replies[4]!.at - replies[0]!.at >= 35,
      `4 inter-token gaps of itl_ms 10: ${replies[4]!.at - replies[0]!.at} ms`,
    );
    const text = replies.map(({ reply }) => texts(reply.inferResponse!, "text_output")[0]).join("");
    assert.equal(text.split(" ").length, 5);
    const again = (await streamTimed(server.client, [prompt("hello", maxTokens(5))]))
      .map(({ reply }) => texts(reply.inferResponse!, "text_output")[0])
      .join("");
    assert.equal(again, text, "deterministic for the same prompt");
    const other = (await streamTimed(server.client, [prompt("another prompt", maxTokens(5))]))
      .map(({ reply }) => texts(reply.inferResponse!, "text_output")[0])
      .join("");
    assert.notEqual(other, text);
  });

  it("streams the same tokens over the server-streaming ModelInferStream extension", async () => {
    const client = new InferenceExtensionsClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
    try {
      const responses: ModelInferResponse[] = [];
      await new Promise<void>((resolve, reject) => {
        const call = client.modelInferStream(prompt("hello", maxTokens(5)), new Metadata());
        call.on("data", (response: ModelInferResponse) => responses.push(response));
        call.on("end", resolve);
        call.on("error", reject);
      });
      const viaBidi = (await streamTimed(server.client, [prompt("hello", maxTokens(5))])).map(
        ({ reply }) => texts(reply.inferResponse!, "text_output")[0],
      );
      assert.deepEqual(
        responses.map((response) => texts(response, "text_output")[0]),
        viaBidi,
      );
      assert.ok(responses.every((response) => response.id === "p-hello"));
      const failure = await new Promise<ServiceError>((resolve) => {
        const call = client.modelInferStream(prompt("x", {}, "no_such_model"), new Metadata());
        call.on("data", () => undefined);
        call.on("error", (error: ServiceError) => resolve(error));
      });
      assert.equal(failure.code, status.NOT_FOUND);
      assert.match(failure.details, /Request for unknown model: 'no_such_model' is not found/);
    } finally {
      client.close();
    }
  });

  it("rejects bad LLM inputs with INVALID_ARGUMENT naming them", async () => {
    const bad = await streamTimed(server.client, [
      prompt("x", { max_tokens: { parameterChoice: { $case: "stringParam", value: "lots" } } }),
    ]);
    assert.match(bad[0]!.reply.errorMessage, /parameter 'max_tokens' must be a number/);
    const twoPrompts = inferRequest({
      ...prompt("x"),
      inputs: [{ name: "text_input", datatype: "BYTES", shape: [2n], parameters: {}, contents: undefined }],
      rawInputContents: [joinBytesElements([new TextEncoder().encode("a"), new TextEncoder().encode("b")])],
    });
    assert.match(
      (await streamTimed(server.client, [twoPrompts]))[0]!.reply.errorMessage,
      /shape \[2\] does not match the model's \[1\]/,
    );
    const unary = await callError(server.client, "modelInfer", prompt("x"));
    assert.equal(unary.code, status.UNIMPLEMENTED);
  });

  it("answers unary ModelInfer on a decoupled model that opts in (mock_llm_dynamo) with its responses gathered into one", async () => {
    const streamed = await streamTimed(server.client, [prompt("hello", maxTokens(5), "mock_llm_dynamo")]);
    const text = streamed.map(({ reply }) => texts(reply.inferResponse!, "text_output")[0]).join("");
    assert.equal(streamed.length, 5);
    const reply = await infer(server.client, prompt("hello", maxTokens(5), "mock_llm_dynamo"));
    assert.deepEqual(texts(reply, "text_output"), [text]);
    assert.deepEqual(texts(reply, "finish_reason"), ["length"]);
    assert.equal(reply.id, "p-hello");
    assert.equal(reply.parameters["triton_final_response"], undefined, "a unary reply has no final flag");
    // Triton's rule stays the default, and its message names the way out.
    const refused = await callError(server.client, "modelInfer", prompt("x"));
    assert.equal(refused.code, status.UNIMPLEMENTED);
    assert.match(refused.details, /mock_llm.*ModelStreamInfer.*parameters\["model_infer_gathers_responses"\]/);
  });
});

import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { parseAllDocuments } from "yaml";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { InferParameter, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { joinBytesElements, splitBytesElements } from "../../src/tensors/bytes.js";
import { CLI } from "../fixtures/paths.js";
import { TestRepository } from "../fixtures/repository.js";
import {
  callError,
  eventually,
  infer,
  inferRequest,
  startServer,
  streamAll,
  type ServerProcess,
} from "../fixtures/server.js";
import { requireOpenAiPeer, startOpenAiPeer, type Peer } from "../fixtures/peers.js";

const MOCK_TEXT = "The quick brown fox jumps over the lazy dog";

/** Runs the CLI; rejects (with its output) when it exits non-zero. */
const runProgramOrFail = (program: string, args: string[]): Promise<{ stdout: string; stderr: string }> =>
  promisify(execFile)(process.execPath, [program, ...args]);

const llmConfig = (name: string, url: string, { decoupled = false, mode = "completions", model = "mock-gpt" } = {}) => `
name: "${name}"
backend: "vllm"
max_batch_size: 0
${decoupled ? "model_transaction_policy { decoupled: true }" : ""}
parameters { key: "engine" value { string_value: "openai" } }
parameters { key: "url" value { string_value: "${url}" } }
parameters { key: "upstream_model" value { string_value: "${model}" } }
parameters { key: "mode" value { string_value: "${mode}" } }
input [
  { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "streaming" data_type: TYPE_BOOL dims: [ 1 ] optional: true }
]
output [
  { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] },
  { name: "finish_reason" data_type: TYPE_STRING dims: [ -1 ] }
]
`;

function llmRequest(
  model: string,
  prompt: string,
  streaming: boolean,
  parameters: Record<string, InferParameter> = {},
) {
  return inferRequest({
    modelName: model,
    id: `r-${model}`,
    parameters,
    inputs: [
      { name: "text_input", datatype: "BYTES", shape: [1n], parameters: {}, contents: undefined },
      { name: "streaming", datatype: "BOOL", shape: [1n], parameters: {}, contents: undefined },
    ],
    rawInputContents: [joinBytesElements([new TextEncoder().encode(prompt)]), Uint8Array.of(streaming ? 1 : 0)],
  });
}

const textsOf = (response: ModelInferResponse, name: string): string[] => {
  const index = response.outputs.findIndex((output) => output.name === name);
  return splitBytesElements(response.rawOutputContents[index]!).map((bytes) => new TextDecoder().decode(bytes));
};

/**
 * An SSE upstream that streams every 50 ms until its request's connection closes (it never
 * ends on its own), recording when each closed (LiteLLM's mock answers too fast to cancel).
 */
async function slowSseServer(): Promise<{ server: Server; url: string; closedAt: number[] }> {
  const closedAt: number[] = [];
  const server = createServer((request, response) => {
    request.resume();
    response.writeHead(200, { "content-type": "text/event-stream" });
    let index = 0;
    const timer = setInterval(() => {
      response.write(
        `data: ${JSON.stringify({ choices: [{ index: 0, text: `t${index++} `, finish_reason: null }] })}\n\n`,
      );
    }, 50);
    response.on("close", () => {
      clearInterval(timer);
      closedAt.push(Date.now());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, closedAt };
}

describe("openai engine against a real OpenAI-compatible server (LiteLLM proxy)", function () {
  this.timeout(180_000);
  let peer: Peer;
  let slow: Awaited<ReturnType<typeof slowSseServer>>;
  let repository: TestRepository;
  let server: ServerProcess;

  before(async function () {
    requireOpenAiPeer(this);
    [peer, slow] = await Promise.all([startOpenAiPeer(), slowSseServer()]);
    const url = `http://${peer.address}/v1`;
    repository = new TestRepository({
      llm_completions: llmConfig("llm_completions", url),
      llm_chat_stream: llmConfig("llm_chat_stream", url, { decoupled: true, mode: "chat" }),
      llm_unknown_model: llmConfig("llm_unknown_model", url, { model: "no-such-model" }),
      llm_down: llmConfig("llm_down", "http://127.0.0.1:1/v1"),
      llm_slow: llmConfig("llm_slow", slow.url, { decoupled: true }),
    });
    server = await startServer(["--model-repository", repository.dir]);
  });

  after(async () => {
    await server?.stop();
    repository?.remove();
    slow?.server.close();
    await peer?.kill();
  });

  it("maps text_input to a completions prompt and the choice to text_output and finish_reason", async () => {
    const reply = await infer(
      server.client,
      llmRequest("llm_completions", "Say something", false, {
        max_tokens: { parameterChoice: { $case: "int64Param", value: 16n } },
        temperature: { parameterChoice: { $case: "doubleParam", value: 0.5 } },
      }),
    );
    assert.deepEqual(textsOf(reply, "text_output"), [MOCK_TEXT]);
    assert.deepEqual(textsOf(reply, "finish_reason"), ["stop"]);
    assert.equal(reply.id, "r-llm_completions");
  });

  it("streams chat deltas from SSE, one response per event, on ModelStreamInfer", async () => {
    const replies = await streamAll(server.client, [llmRequest("llm_chat_stream", "Hello", true)]);
    assert.ok(replies.length > 3, `${replies.length} responses`);
    assert.ok(replies.every((reply) => reply.errorMessage === ""));
    assert.equal(replies.map((reply) => textsOf(reply.inferResponse!, "text_output")[0]).join(""), MOCK_TEXT);
  });

  it("refuses streaming=true on ModelInfer with INVALID_ARGUMENT", async () => {
    const error = await callError(server.client, "modelInfer", llmRequest("llm_completions", "x", true));
    assert.equal(error.code, status.INVALID_ARGUMENT);
    assert.match(error.details, /streaming=true needs a decoupled model/);
  });

  it("maps upstream HTTP errors and an unreachable upstream to gRPC codes with messages", async () => {
    const unknown = await callError(server.client, "modelInfer", llmRequest("llm_unknown_model", "x", false));
    assert.equal(unknown.code, status.INVALID_ARGUMENT);
    assert.match(unknown.details, /upstream http:\/\/127\.0\.0\.1:\d+\/v1\/completions answered HTTP 400/);
    const down = await callError(server.client, "modelInfer", llmRequest("llm_down", "x", false));
    assert.equal(down.code, status.UNAVAILABLE);
    assert.match(down.details, /model 'llm_down': upstream http:\/\/127\.0\.0\.1:1\/v1\/completions is unavailable/);
  });

  it("serves a Triton vLLM-backend model migrated with --vllm-url, its clients' tensors unchanged", async () => {
    const triton = mkdtempSync(join(tmpdir(), "dynamo-kserve-vllm-repo-"));
    const migrated = new TestRepository();
    let served: ServerProcess | undefined;
    try {
      // A Triton vLLM model as its docs lay it out: no tensors declared (the backend adds them).
      mkdirSync(join(triton, "opt", "1"), { recursive: true });
      writeFileSync(
        join(triton, "opt", "config.pbtxt"),
        'backend: "vllm"\nmodel_transaction_policy { decoupled: true }\n',
      );
      writeFileSync(join(triton, "opt", "1", "model.json"), '{"model": "mock-gpt", "gpu_memory_utilization": 0.5}');
      const { stdout, stderr } = await runProgramOrFail(CLI, [
        "migrate",
        triton,
        "--vllm-url",
        `http://${peer.address}/v1`,
        "--namespace",
        "ml",
      ]);
      assert.match(
        stderr,
        new RegExp(`opt .*vllm +openai +served by the vLLM OpenAI server at http://${peer.address}/v1 as 'mock-gpt'`),
      );
      const configMap = parseAllDocuments(stdout)
        .map((document) => document.toJSON() as { kind: string; data?: Record<string, string> })
        .find((object) => object.kind === "ConfigMap");
      migrated.writeModel("opt", configMap!.data!["config.pbtxt"]!);
      served = await startServer(["--model-repository", migrated.dir]);
      const vllmRequest = (stream: boolean) =>
        inferRequest({
          modelName: "opt",
          id: "vllm",
          inputs: ["text_input", "stream", "sampling_parameters", "exclude_input_in_output"].map((name, index) => ({
            name,
            datatype: index === 1 || index === 3 ? "BOOL" : "BYTES",
            shape: [1n],
            parameters: {},
            contents: undefined,
          })),
          rawInputContents: [
            joinBytesElements([new TextEncoder().encode("Hello")]),
            Uint8Array.of(stream ? 1 : 0),
            joinBytesElements([new TextEncoder().encode('{"max_tokens": "16", "temperature": "0"}')]),
            Uint8Array.of(1),
          ],
        });
      const whole = await streamAll(served.client, [vllmRequest(false)]);
      assert.deepEqual(
        whole.map((reply) => textsOf(reply.inferResponse!, "text_output")),
        [[MOCK_TEXT]],
      );
      const tokens = await streamAll(served.client, [vllmRequest(true)]);
      assert.ok(tokens.length > 3, `${tokens.length} responses`);
      assert.equal(tokens.map((reply) => textsOf(reply.inferResponse!, "text_output")[0]).join(""), MOCK_TEXT);
    } finally {
      await served?.stop();
      migrated.remove();
      rmSync(triton, { recursive: true, force: true });
    }
  });

  it("closes the upstream HTTP request when the client cancels", async () => {
    const stream = server.client.modelStreamInfer();
    stream.on("error", () => undefined);
    await new Promise<void>((resolve) => {
      stream.on("data", () => resolve());
      stream.write(llmRequest("llm_slow", "go", true));
    });
    const before = slow.closedAt.length;
    const cancelledAt = Date.now();
    stream.cancel();
    // The upstream streams until its request is closed: a close it sees came from the cancel.
    await eventually(() => assert.ok(slow.closedAt.length > before, "the upstream request is still open"), 10_000, 5);
    console.log(`      client cancel -> upstream connection closed: ${slow.closedAt[before]! - cancelledAt} ms`);
  });
});

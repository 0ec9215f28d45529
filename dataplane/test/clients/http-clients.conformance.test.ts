import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CACHE_DIR, requireProgram } from "../../../e2e/support/prerequisites.js";
import { requireTritonPeers, startTritonPeer, type Peer } from "../fixtures/peers.js";
import { EXAMPLE_TOKENIZER, REPO_ROOT } from "../fixtures/paths.js";
import { TestRepository } from "../fixtures/repository.js";
import { runProgram } from "../fixtures/programs.js";
import { SecretFiles, tlsArgs } from "../fixtures/secret-files.js";
import { createTestCa } from "../../../e2e/support/certificates.js";
import { startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * The HTTP front door driven by the clients people use: the openai SDK (against the mock
 * LLM, and against a model forwarded to a real Triton: HTTP in, gRPC out), the KServe SDK's
 * REST client, curl on Triton's generate extension, and a short aiperf run.
 */

const here = join(REPO_ROOT, "dataplane", "test", "clients");
const venvPython = (variable: string, name: string): string =>
  join(process.env[variable] ?? join(CACHE_DIR, name), "bin", "python");
const CLIENTS = venvPython("DYNAMO_KSERVE_CLIENTS_VENV", "venv-clients");
const AIPERF = join(process.env["DYNAMO_KSERVE_AIPERF_VENV"] ?? join(CACHE_DIR, "venv-aiperf"), "bin");
const CURL = "/usr/bin/curl";

/** A model forwarded to the Triton peer's echo_llm, declaring the LLM tensors. */
const remoteLlmConfig = (upstream: string): string => `
name: "remote_llm"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${upstream}" } }
parameters { key: "upstream_model" value { string_value: "echo_llm" } }
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] }, { name: "finish_reason" data_type: TYPE_STRING dims: [ 1 ] } ]
`;

describe("the HTTP front door with real clients (openai SDK, KServe SDK, curl, aiperf)", function () {
  this.timeout(300_000);
  let peer: Peer;
  let repository: TestRepository;
  let server: ServerProcess;
  let base: string;

  before(async function () {
    requireProgram(this, CLIENTS, "the HTTP clients venv (openai, kserve)", "run scripts/setup-python.sh");
    requireProgram(this, join(AIPERF, "aiperf"), "aiperf", "run scripts/setup-python.sh");
    requireProgram(this, CURL, "curl", "apt-get install curl");
    requireTritonPeers(this);
    peer = await startTritonPeer("llm");
    repository = new TestRepository({ remote_llm: remoteLlmConfig(peer.address) });
    server = await startServer(["--model-repository", repository.dir]);
    base = `http://127.0.0.1:${server.httpPort}`;
  });

  after(async () => {
    await server?.stop();
    repository?.remove();
    await peer?.kill();
  });

  /** Runs openai_sdk_checks.py on `model` (`streams`: "tokens" or "whole"); all six checks pass. */
  const sdkChecks = async (model: string, streams: "tokens" | "whole"): Promise<void> => {
    const { code, output } = await runProgram(CLIENTS, [
      join(here, "openai_sdk_checks.py"),
      `${base}/v1`,
      model,
      streams,
    ]);
    assert.equal(code, 0, output);
    assert.match(output, /^6 passed, 0 failed$/m);
  };

  it("serves the openai SDK on the mock LLM: completions and chat, streamed per token with usage", async () => {
    await sdkChecks("mock_llm", "tokens");
  });

  it("serves the openai SDK on TensorRT-LLM's layout (mock_llm_trtllm: max_tokens a required input)", async () => {
    await sdkChecks("mock_llm_trtllm", "tokens");
  });

  it("serves the openai SDK on a model forwarded to a real Triton (HTTP in, gRPC out)", async () => {
    await sdkChecks("remote_llm", "whole");
    const reply = (await (
      await fetch(`${base}/v1/completions`, {
        method: "POST",
        body: JSON.stringify({ model: "remote_llm", prompt: "ping" }),
      })
    ).json()) as { choices: { text: string; finish_reason: string }[] };
    assert.deepEqual(reply.choices[0], { index: 0, text: "echo: ping", logprobs: null, finish_reason: "stop" });
  });

  it("serves the KServe SDK's REST client (v2): health, binary and JSON tensors, errors", async () => {
    const { code, output } = await runProgram(CLIENTS, [join(here, "kserve_sdk_checks.py"), base]);
    assert.equal(code, 0, output);
    assert.match(output, /^4 passed, 0 failed$/m);
  });

  it("answers curl on generate and generate_stream", async () => {
    const body = JSON.stringify({ text_input: "hello", parameters: { max_tokens: 5 } });
    const post = ["-sS", "--fail-with-body", "-X", "POST", "-H", "content-type: application/json", "-d", body];
    const whole = await runProgram(CURL, [...post, `${base}/v2/models/mock_llm/generate`]);
    assert.equal(whole.code, 0, whole.output);
    const reply = JSON.parse(whole.output) as Record<string, unknown>;
    assert.equal(reply["model_name"], "mock_llm");
    assert.equal((reply["text_output"] as string).split(" ").length, 5);
    assert.equal(reply["finish_reason"], "length");
    const stream = await runProgram(CURL, ["-N", ...post, `${base}/v2/models/mock_llm/generate_stream`]);
    assert.equal(stream.code, 0, stream.output);
    const events = stream.output.split("\n\n").filter((event) => event.startsWith("data: "));
    assert.equal(events.length, 5, stream.output);
    const texts = events.map((event) => (JSON.parse(event.slice(6)) as { text_output: string }).text_output);
    assert.equal(texts.join(""), reply["text_output"]);
  });

  for (const model of ["mock_llm", "mock_llm_trtllm"]) {
    it(`takes a short aiperf run against /v1/chat/completions (streaming) on ${model}`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-aiperf-"));
      try {
        const artifacts = join(dir, "artifacts");
        const profile = await runProgram(join(AIPERF, "aiperf"), [
          "profile",
          ...["--model", model, "--url", base, "--endpoint-type", "chat", "--streaming"],
          // No Hugging Face Hub here: the example word tokenizer (the mock's tokens are words).
          ...["--tokenizer", EXAMPLE_TOKENIZER, "--request-count", "40", "--concurrency", "8"],
          ...["--output-tokens-mean", "8", "--synthetic-input-tokens-mean", "16"],
          ...["--artifact-dir", artifacts, "--ui-type", "none"],
        ]);
        assert.equal(profile.code, 0, profile.output);
        const results = JSON.parse(readFileSync(join(artifacts, "profile_export_aiperf.json"), "utf8")) as Record<
          string,
          { avg?: number } | undefined
        >;
        assert.equal(results["request_count"]?.avg, 40);
        assert.equal(results["error_request_count"]?.avg ?? 0, 0);
        // max_tokens reached the engine: every reply had exactly 8 tokens.
        assert.equal(results["output_sequence_length"]?.avg, 8);
        assert.ok((results["time_to_first_token"]?.avg ?? 0) >= 50, "the mock's 50 ms to the first token");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

describe("Python's HTTP clients over TLS get the 413 of an oversized body (requests, tritonclient.http)", function () {
  this.timeout(120_000);
  const LIMIT = 64 * 1024;
  const TRITONCLIENT = venvPython("DYNAMO_KSERVE_VENV", "venv");
  const files = new SecretFiles();
  let server: ServerProcess;

  before(async function () {
    requireProgram(this, CLIENTS, "the HTTP clients venv (requests)", "run scripts/setup-python.sh");
    requireProgram(this, TRITONCLIENT, "the tritonclient venv", "run scripts/setup-python.sh");
    const ca = await createTestCa("test CA");
    files.writeIdentity(await ca.issue("data plane", { dns: ["localhost"], ips: ["127.0.0.1"] }));
    files.write({ "ca.crt": ca.certificate });
    server = await startServer([...tlsArgs(files), "--max-message-size", String(LIMIT)]);
  });
  after(async () => {
    await server?.stop();
    files.remove();
  });

  for (const [client, python] of [
    ["requests", () => CLIENTS],
    ["tritonclient", () => TRITONCLIENT],
  ] as const) {
    it(`${client}: 413 naming the limit, for bodies 4 and 64 times it (an SSL EOF before)`, async () => {
      const { code, output } = await runProgram(python(), [
        join(here, "tls_413_checks.py"),
        `localhost:${server.httpPort}`,
        files.path("ca.crt"),
        String(LIMIT),
        client,
      ]);
      assert.equal(code, 0, output);
      const lines = output.trim().split("\n");
      assert.equal(lines.length, 2, output);
      for (const line of lines) assert.match(line, new RegExp(`^\\d+ 413 .*limit of ${LIMIT} bytes`), output);
    });
  }
});

import assert from "node:assert/strict";
import { Agent, request as httpRequest, type IncomingMessage } from "node:http";
import { scrape, valueOf, type Sample } from "../../../e2e/support/prometheus.js";
import { mockerConfig } from "../fixtures/repository.js";
import { eventually, startServer, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

/**
 * The generate extension and the OpenAI routes on the front door: errors in each one's
 * shape, and what happens when a streaming client goes away (the engine stops, nothing
 * stays in flight, other clients are unaffected) or the server is told to stop (a stream in
 * flight finishes).
 */

/** 20 ms per token: a stream of 1,000 tokens would take 20 s. */
const SLOW = mockerConfig("slow_llm", { ttftMs: 20, itlMs: 20, decoupled: true });

/** Opens an SSE request and resolves once `events` events arrived, with a way to hang up. */
function openStream(
  port: number,
  path: string,
  body: unknown,
  events: number,
): Promise<{ response: IncomingMessage; hangUp(): void; received: () => number }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      { host: "127.0.0.1", port, path, method: "POST", headers: { "content-type": "application/json" } },
      (response) => {
        let count = 0;
        let resolved = false;
        response.on("data", (chunk: Buffer) => {
          count += chunk
            .toString()
            .split("\n\n")
            .filter((event) => event.startsWith("data: ")).length;
          if (count >= events && !resolved) {
            resolved = true;
            resolve({ response, hangUp: () => request.destroy(), received: () => count });
          }
        });
        response.on("error", () => undefined);
      },
    );
    request.on("error", (error) => (error.message.includes("socket hang up") ? undefined : reject(error)));
    request.end(JSON.stringify(body));
  });
}

describe("generate and OpenAI routes on the HTTP front door", function () {
  this.timeout(30_000);
  const serving = useServer({ slow_llm: SLOW });
  const url = (path: string): string => `http://127.0.0.1:${serving.server.httpPort}${path}`;
  const post = (path: string, body: unknown): Promise<Response> =>
    fetch(url(path), { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) });
  const metrics = (): Promise<Sample[]> => scrape(`http://127.0.0.1:${serving.server.metricsPort}/metrics`);

  it("answers bad generate requests with Triton's error shape, naming the field", async () => {
    const unknown = await post("/v2/models/mock_llm/generate", { text_input: "x", prompt: "y" });
    assert.equal(unknown.status, 400);
    assert.match(((await unknown.json()) as { error: string }).error, /unknown field 'prompt'.*its inputs: text_input/);
    const badType = await post("/v2/models/mock_llm/generate", { text_input: 7 });
    assert.equal(badType.status, 400);
    assert.match(((await badType.json()) as { error: string }).error, /field 'text_input'.*must be a string/);
    const tokens = await post("/v2/models/mock_llm/generate", { text_input: "x", parameters: { max_tokens: 0 } });
    assert.equal(tokens.status, 400);
    assert.match(((await tokens.json()) as { error: string }).error, /max_tokens/);
  });

  it("answers POST /v2/models/{m}/infer on a decoupled model that opts in with its responses gathered; 501 naming the opt-in otherwise", async () => {
    const body = { inputs: [{ name: "text_input", datatype: "BYTES", shape: [1], data: ["a b c"] }] };
    const gathered = await post("/v2/models/mock_llm_dynamo/infer", body);
    assert.equal(gathered.status, 200);
    const reply = (await gathered.json()) as { outputs: { name: string; data: string[] }[] };
    const text = reply.outputs.find((output) => output.name === "text_output")?.data.join("") ?? "";
    assert.equal(text.trim().split(/\s+/).length, 16, text);
    const refused = await post("/v2/models/mock_llm/infer", body);
    assert.equal(refused.status, 501);
    assert.match(((await refused.json()) as { error: string }).error, /model_infer_gathers_responses/);
  });

  it("lists only models with the LLM tensor interface on /v1/models", async () => {
    const models = (await (await fetch(url("/v1/models"))).json()) as { data: { id: string }[] };
    assert.deepEqual(models.data.map((model) => model.id).sort(), [
      "mock_llm",
      "mock_llm_dynamo",
      "mock_llm_trtllm",
      "mock_llm_vllm",
      "slow_llm",
    ]);
  });

  it("answers bad OpenAI requests in OpenAI's error shape", async () => {
    const expectError = async (body: unknown, status: number, message: RegExp): Promise<void> => {
      const reply = await post("/v1/chat/completions", body);
      assert.equal(reply.status, status);
      const { error } = (await reply.json()) as { error: { message: string; type: string } };
      assert.match(error.message, message);
      assert.equal(error.type, status < 500 ? "invalid_request_error" : "server_error");
    };
    await expectError("{not json", 400, /not valid JSON/);
    await expectError({ model: "mock_llm" }, 400, /'messages' must be a non-empty array/);
    await expectError(
      { model: "mock_llm", messages: [{ role: "user", content: "x" }], temprature: 1 },
      400,
      /unknown field 'temprature'/,
    );
    await expectError(
      { model: "identity_fp32", messages: [{ role: "user", content: "x" }] },
      400,
      /LLM tensor interface/,
    );
  });

  it("answers options it does not take 400 naming the parameter (a 5xx would be retried by the openai SDK)", async () => {
    for (const [param, value] of [
      ["n", 2],
      ["tools", [{ type: "function", function: { name: "f" } }]],
      ["logprobs", true],
    ] as const) {
      const reply = await post("/v1/chat/completions", {
        model: "mock_llm",
        messages: [{ role: "user", content: "x" }],
        [param]: value,
      });
      assert.equal(reply.status, 400, param);
      const { error } = (await reply.json()) as { error: { message: string; type: string; param: string } };
      assert.deepEqual([error.type, error.param], ["invalid_request_error", param]);
      assert.match(error.message, new RegExp(`'${param}'`));
    }
  });

  it("retrieves one model on /v1/models/{id} (the openai SDK's models.retrieve), 404 in OpenAI's shape otherwise", async () => {
    const found = await fetch(url("/v1/models/mock_llm_trtllm"));
    assert.equal(found.status, 200);
    const model = (await found.json()) as Record<string, unknown>;
    assert.deepEqual([model["id"], model["object"], model["owned_by"]], ["mock_llm_trtllm", "model", "dynamo-kserve"]);
    assert.equal(typeof model["created"], "number");
    for (const id of ["no_such_model", "identity_fp32"]) {
      const missing = await fetch(url(`/v1/models/${id}`));
      assert.equal(missing.status, 404);
      const { error } = (await missing.json()) as { error: { message: string; code: string } };
      assert.equal(error.code, "model_not_found");
      assert.match(error.message, new RegExp(`'${id}'`));
    }
  });

  it("serves TensorRT-LLM's layout (mock_llm_trtllm, max_tokens a required input) on the OpenAI routes", async () => {
    const words = (text: string): number => text.trim().split(/\s+/).length;
    const completion = await post("/v1/completions", {
      model: "mock_llm_trtllm",
      prompt: "hello there",
      max_tokens: 3,
    });
    assert.equal(completion.status, 200, await completion.clone().text());
    const { choices } = (await completion.json()) as { choices: { text: string; finish_reason: string }[] };
    assert.equal(words(choices[0]!.text), 3, choices[0]!.text);
    // No max_tokens: OpenAI's default, 16.
    const chat = await post("/v1/chat/completions", {
      model: "mock_llm_trtllm",
      messages: [{ role: "user", content: "hello there" }],
    });
    assert.equal(chat.status, 200, await chat.clone().text());
    const reply = (await chat.json()) as { choices: { message: { content: string } }[] };
    assert.equal(words(reply.choices[0]!.message.content), 16);
  });

  it("ends the mock's answer at a stop sequence, left out, with finish_reason stop (whole and streamed)", async () => {
    const ask = async (extra: Record<string, unknown>): Promise<{ text: string; finish_reason: string }> => {
      const reply = await post("/v1/completions", { model: "mock_llm", prompt: "tell me", max_tokens: 12, ...extra });
      assert.equal(reply.status, 200, await reply.clone().text());
      return ((await reply.json()) as { choices: { text: string; finish_reason: string }[] }).choices[0]!;
    };
    const full = await ask({});
    assert.equal(full.finish_reason, "length");
    const stop = full.text.split(" ").slice(3, 5).join(" ");
    const expected = full.text.slice(0, full.text.indexOf(stop));
    assert.deepEqual(await ask({ stop: [stop, "never appears"] }), {
      index: 0,
      text: expected,
      logprobs: null,
      finish_reason: "stop",
    });
    const streamed = await post("/v1/completions", {
      model: "mock_llm",
      prompt: "tell me",
      max_tokens: 12,
      stop,
      stream: true,
    });
    const events = (await streamed.text())
      .split("\n\n")
      .filter((event) => event.startsWith("data: {"))
      .map((event) => JSON.parse(event.slice(6)) as { choices: { text: string; finish_reason: string | null }[] });
    assert.equal(events.map((event) => event.choices[0]!.text).join(""), expected);
    assert.equal(events.at(-1)!.choices[0]!.finish_reason, "stop");
    // Every token is searched for each stop sequence: their number is bounded.
    const many = await post("/v1/completions", {
      model: "mock_llm",
      prompt: "x",
      stop: Array.from({ length: 17 }, (_, i) => `s${i}`),
    });
    assert.equal(many.status, 400);
    assert.match(
      ((await many.json()) as { error: { message: string } }).error.message,
      /at most 16 stop sequences, got 17/,
    );
  });

  it("stops the engine when an SSE client hangs up midway; other clients are unaffected", async () => {
    const completionsBefore = valueOf(await metrics(), "http_server_requests_total", {
      method: "POST",
      route: "/v1/completions",
      status: "200",
    });
    for (const [path, body, endpoint] of [
      [
        "/v1/chat/completions",
        { model: "slow_llm", messages: [{ role: "user", content: "go" }], max_tokens: 1000, stream: true },
        "chat_completions",
      ],
      [
        "/v2/models/slow_llm/generate_stream",
        { text_input: "go", parameters: { max_tokens: 1000 } },
        "generate_stream",
      ],
    ] as const) {
      const stream = await openStream(serving.server.httpPort, path, body, 3);
      const during = post("/v1/completions", { model: "mock_llm", prompt: "meanwhile", max_tokens: 4 });
      const hungUpAt = performance.now();
      stream.hangUp();
      // The engine stops: nothing of slow_llm stays in flight, and the request ends as an error.
      await eventually(async () =>
        assert.equal(valueOf(await metrics(), "dynamo_frontend_inflight_requests", { model: "slow_llm" }), 0),
      );
      const stoppedMs = performance.now() - hungUpAt;
      console.log(`      ${endpoint}: hang-up -> engine stopped: ${stoppedMs.toFixed(0)} ms`);
      assert.ok(stoppedMs < 2000, `the engine stopped ${stoppedMs} ms after the hang-up`);
      const samples = await metrics();
      assert.equal(
        valueOf(samples, "dynamo_frontend_requests_total", {
          model: "slow_llm",
          endpoint,
          request_type: "stream",
          status: "error",
        }),
        1,
      );
      // It produced far fewer than the 1,000 tokens it was asked for.
      assert.ok(stream.received() < 50);
      const reply = await during;
      assert.equal(reply.status, 200);
      assert.equal(((await reply.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens, 4);
    }
    // Streams (replies written past fastify) are counted by route like any request; one
    // its client hung up on is 499.
    const samples = await metrics();
    const counted = (route: string, status: string): number =>
      valueOf(samples, "http_server_requests_total", { method: "POST", route, status });
    assert.equal(counted("/v1/chat/completions", "499"), 1);
    assert.equal(counted("/v2/models/:model/generate_stream", "499"), 1);
    assert.equal(counted("/v1/completions", "200") - completionsBefore, 2);
  });
});

describe("a decoupled model's responses gathered into one HTTP reply: bounded by --max-message-size", function () {
  this.timeout(60_000);
  const LIMIT = 64 * 1024;
  // No delays between tokens, and opted in to gathering on infer.
  const FAST = `${mockerConfig("fast_llm", { decoupled: true })}parameters { key: "model_infer_gathers_responses" value { string_value: "true" } }\n`;
  const serving = useServer({ fast_llm: FAST }, ["--max-message-size", String(LIMIT)]);
  const post = (path: string, body: unknown): Promise<Response> =>
    fetch(`http://127.0.0.1:${serving.server.httpPort}${path}`, { method: "POST", body: JSON.stringify(body) });

  it("fails a gathered answer past the limit 429 (RESOURCE_EXHAUSTED) naming the model and the limit, and serves one within it", async () => {
    // 100,000 tokens: ~700 KB of text, ten times the limit.
    const parameters = { max_tokens: 100_000 };
    const infer = await post("/v2/models/fast_llm/infer", {
      inputs: [{ name: "text_input", datatype: "BYTES", shape: [1], data: ["a b c"] }],
      parameters,
    });
    const generate = await post("/v2/models/fast_llm/generate", { text_input: "a b c", parameters });
    for (const reply of [infer, generate]) {
      assert.equal(reply.status, 429, (await reply.clone().text()).slice(0, 300));
      const { error } = (await reply.json()) as { error: string };
      assert.match(error, new RegExp(`model 'fast_llm'.*exceed the limit of ${LIMIT} bytes`));
    }
    const small = await post("/v2/models/fast_llm/generate", {
      text_input: "a b c",
      parameters: { max_tokens: 1000 },
    });
    assert.equal(small.status, 200);
  });
});

describe("the HTTP front door on stop: a stream in flight finishes, then the port closes", function () {
  this.timeout(30_000);
  let server: ServerProcess;
  after(async () => server?.process.exitCode === null && (await server.stop()));

  it("lets an SSE stream finish after SIGTERM and exits 0", async () => {
    server = await startServer(["--shutdown-grace-secs", "20"]);
    const stream = await openStream(
      server.httpPort,
      "/v1/completions",
      { model: "mock_llm", prompt: "drain", max_tokens: 80, stream: true },
      2,
    );
    const done = new Promise<void>((resolve) => stream.response.on("end", resolve));
    const code = server.stop("SIGTERM");
    await done;
    // 80 tokens, then the closing [DONE].
    assert.equal(stream.received(), 81);
    assert.equal(await code, 0);
  });

  it("while draining, serves each request and tells keep-alive clients to reconnect (Connection: close)", async () => {
    server = await startServer(["--drain-delay-secs", "3"]);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const infer = () =>
      new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
        const outgoing = httpRequest(
          {
            port: server.httpPort,
            host: "127.0.0.1",
            method: "POST",
            path: "/v2/models/identity_fp32/infer",
            agent,
            headers: { "content-type": "application/json" },
          },
          (response) => {
            response.resume();
            response.on("end", () =>
              resolve({ status: response.statusCode!, connection: response.headers.connection }),
            );
          },
        );
        outgoing.on("error", reject);
        outgoing.end(
          JSON.stringify({ inputs: [{ name: "INPUT0", shape: [1, 4], datatype: "FP32", data: [1, 2, 3, 4] }] }),
        );
      });
    assert.deepEqual(await infer(), { status: 200, connection: "keep-alive" });
    const code = server.stop("SIGTERM");
    // Within the drain delay: still served, on the same kept-alive connection, which it closes.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(await infer(), { status: 200, connection: "close" });
    assert.equal(await code, 0);
    agent.destroy();
  });
});

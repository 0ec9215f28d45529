import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useServer } from "../../dataplane/test/fixtures/serving.js";
import { scrape, valueOf } from "../../e2e/support/prometheus.js";
import { POD, until, useActivators } from "./fixtures.js";

/** A reply as the client saw it: status, headers and the whole body. */
interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** POSTs `body` as JSON on a connection of its own (or `agent`'s). */
function post(port: number, path: string, body: unknown, headers: Record<string, string> = {}, agent?: Agent) {
  return new Promise<Reply>((resolve, reject) => {
    const request = httpRequest(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        ...(agent === undefined ? {} : { agent }),
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () =>
          resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks).toString() }),
        );
        response.on("error", reject);
      },
    );
    request.on("error", reject);
    request.end(JSON.stringify(body));
  });
}

const IDENTITY = { inputs: [{ name: "INPUT0", datatype: "FP32", shape: [1, 3], data: [1, 2, 3] }] };
const CHAT = { model: "mock_llm", messages: [{ role: "user", content: "hello there" }], stream: true, max_tokens: 8 };

/** The activator's HTTP/1.1 port in front of a real data plane (the "pod"), its pod watch scripted. */
describe("activator: HTTP requests held until a pod is ready, then relayed", function () {
  this.timeout(60_000);
  const serving = useServer();
  const activators = useActivators();

  it("holds a KServe v2 infer and a streaming OpenAI chat completion while no pod is ready, then relays both (every event of the stream)", async () => {
    const t = await activators.start(serving.server);
    const port = t.activator.httpPort;
    const infer = post(port, "/v2/models/identity_fp32/infer", IDENTITY);
    const chat = post(port, "/v1/chat/completions", CHAT);
    await until(() => t.activator.holding.held === 2, "both requests are held");
    t.pods.set([POD]);
    const inferred = await infer;
    assert.equal(inferred.status, 200, inferred.body);
    assert.deepEqual((JSON.parse(inferred.body) as { outputs: { data: number[] }[] }).outputs[0]?.data, [1, 2, 3]);
    const streamed = await chat;
    assert.equal(streamed.status, 200, streamed.body);
    assert.match(String(streamed.headers["content-type"]), /text\/event-stream/);
    const events = streamed.body.split("\n\n").filter((event) => event.startsWith("data: "));
    assert.equal(events.at(-1), "data: [DONE]");
    assert.ok(events.length >= 3, streamed.body);
  });

  it("answers 504 with KServe v2's error shape when no pod is ready within the hold timeout", async () => {
    const under = await activators.start(serving.server, { holdTimeoutMs: 300 });
    const reply = await post(under.activator.httpPort, "/v2/models/identity_fp32/infer", IDENTITY);
    assert.equal(reply.status, 504);
    assert.match((JSON.parse(reply.body) as { error: string }).error, /scaled to zero.*within 0\.3 s/);
    const metrics = await scrape(`http://127.0.0.1:${under.activator.metricsPort}/metrics`);
    assert.equal(valueOf(metrics, "dynamo_activator_held_requests_total", { outcome: "deadline" }), 1);
  });

  it("answers 503 past --max-held-requests and 401 without a valid token, holding neither", async () => {
    const dir = mkdtempSync(join(tmpdir(), "activator-tokens-"));
    const file = join(dir, "tokens");
    writeFileSync(file, "# the model's token\nsecret\n");
    try {
      const t = await activators.start(serving.server, { maxHeldRequests: 1, authTokenFile: file });
      const port = t.activator.httpPort;
      const bare = await post(port, "/v2/models/identity_fp32/infer", IDENTITY);
      assert.equal(bare.status, 401);
      assert.match((JSON.parse(bare.body) as { error: string }).error, /missing credentials/);
      assert.equal(t.activator.holding.held, 0);
      const token = { authorization: "Bearer secret" };
      const first = post(port, "/v2/models/identity_fp32/infer", IDENTITY, token);
      await until(() => t.activator.holding.held === 1, "the first request is held");
      const second = await post(port, "/v2/models/identity_fp32/infer", IDENTITY, token);
      assert.equal(second.status, 503);
      assert.match((JSON.parse(second.body) as { error: string }).error, /too many requests/);
      t.pods.set([POD]);
      assert.equal((await first).status, 200);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("sends a request to the next ready pod when the first refuses the connection; replies close their connections once handed over", async () => {
    const t = await activators.start(serving.server);
    const agent = new Agent({ keepAlive: true });
    try {
      const held = post(t.activator.httpPort, "/v2/models/identity_fp32/infer", IDENTITY, {}, agent);
      await until(() => t.activator.holding.held === 1, "the request is held");
      t.pods.set([{ name: "dead-0", ip: "127.0.0.3" }]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      t.pods.set([POD]);
      const reply = await held;
      assert.equal(reply.status, 200, reply.body);
      const later = await post(t.activator.httpPort, "/v2/models/identity_fp32/infer", IDENTITY, {}, agent);
      assert.equal(later.status, 200);
      assert.equal(later.headers["connection"], "close", "the client is sent on to the pods");
    } finally {
      agent.destroy();
    }
  });
});

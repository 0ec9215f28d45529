import assert from "node:assert/strict";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { promptRequest } from "../fixtures/requests.js";
import { mockerConfig, TestRepository } from "../fixtures/repository.js";
import { infer, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * The kserve-grpc engine's routing policies, told apart: two upstreams serve the same
 * model, one slow (half a second a request) and one fast. Round robin sends each half
 * the requests; least_outstanding sends the slow one only what finds it idle.
 */

const llmConfig = (ttftMs: number): string => mockerConfig("llm", { ttftMs, maxTokens: 1 });

const forwardedConfig = (name: string, upstreams: string, routing: string) => `
name: "${name}"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${upstreams}" } }
parameters { key: "upstream_model" value { string_value: "llm" } }
parameters { key: "routing" value { string_value: "${routing}" } }
`;

const REQUESTS = 24;
const CONCURRENCY = 3;

describe("kserve-grpc routing: round_robin and least_outstanding told apart (real upstream data planes)", function () {
  this.timeout(60_000);
  const repositories: TestRepository[] = [];
  let slow: ServerProcess;
  let fast: ServerProcess;
  let front: ServerProcess;

  before(async () => {
    const served = (config: string) => {
      const repository = new TestRepository();
      repository.writeModel("llm", config);
      repositories.push(repository);
      return repository.dir;
    };
    [slow, fast] = await Promise.all([
      startServer(["--model-repository", served(llmConfig(500))]),
      startServer(["--model-repository", served(llmConfig(0))]),
    ]);
    const upstreams = `127.0.0.1:${slow.grpcPort},127.0.0.1:${fast.grpcPort}`;
    const repository = new TestRepository({
      llm_round_robin: forwardedConfig("llm_round_robin", upstreams, "round_robin"),
      llm_least: forwardedConfig("llm_least", upstreams, "least_outstanding"),
    });
    repositories.push(repository);
    front = await startServer(["--model-repository", repository.dir]);
  });
  after(async () => {
    await Promise.all([front?.stop(), slow?.stop(), fast?.stop()]);
    repositories.forEach((repository) => repository.remove());
  });

  /** Sends REQUESTS requests, CONCURRENCY at a time, and returns how many the slow upstream served. */
  async function servedBySlow(model: string): Promise<number> {
    const before = valueOf(
      await scrape(`http://127.0.0.1:${slow.metricsPort}/metrics`),
      "nv_inference_request_success",
      {
        model: "llm",
      },
    );
    let sent = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (sent < REQUESTS) {
          sent++;
          await infer(front.client, promptRequest({ model }));
        }
      }),
    );
    const after = valueOf(
      await scrape(`http://127.0.0.1:${slow.metricsPort}/metrics`),
      "nv_inference_request_success",
      {
        model: "llm",
      },
    );
    return after - before;
  }

  it("round_robin: each upstream takes half the requests, slow or not", async () => {
    assert.equal(await servedBySlow("llm_round_robin"), REQUESTS / 2);
  });

  it("least_outstanding: the slow upstream takes only what finds it idle, the fast one the rest", async () => {
    const slowCount = await servedBySlow("llm_least");
    console.log(`      least_outstanding: the slow upstream served ${slowCount} of ${REQUESTS}`);
    assert.ok(slowCount <= REQUESTS / 4, `the slow upstream served ${slowCount} of ${REQUESTS}`);
  });
});

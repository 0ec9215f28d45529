import { credentials } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { GRPCInferenceServiceClient } from "../../../proto/gen/ts/grpc_service.js";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { identityRequest } from "../fixtures/requests.js";
import { call, dataPlaneFailing, eventually, infer, startServer, type ServerProcess } from "../fixtures/server.js";

describe("--grpc-workers: several processes on one port", function () {
  this.timeout(30_000);
  let server: ServerProcess;
  before(async () => (server = await startServer(["--grpc-workers", "2"])));
  after(async () => server?.stop());

  /** A client on a connection of its own (grpc-js would otherwise share one between clients). */
  const freshClient = (): GRPCInferenceServiceClient =>
    new GRPCInferenceServiceClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure(), {
      "grpc.use_local_subchannel_pool": 1,
    });

  it("spreads connections over the workers, which all follow LogSettings", async () => {
    const first = freshClient();
    await call(first, "logSettings", {
      settings: { log_verbose_level: { parameterChoice: { $case: "uint32Param", value: 1 } } },
    });
    first.close();
    for (let i = 0; i < 20; i++) {
      const client = freshClient();
      await infer(client, identityRequest({ id: `spread-${i}` }));
      client.close();
    }
    await eventually(() => {
      const served = server.logs.filter((entry) => String(entry["requestId"]).startsWith("spread-"));
      assert.equal(served.length, 20);
      assert.equal(new Set(served.map((entry) => entry["pid"])).size, 2, "both workers served and logged at debug");
    });
  });

  it("serves the HTTP front door from the workers too, on one port", async () => {
    // New connections each time (undici would reuse one): the primary hands them out.
    const pids = new Set<unknown>();
    for (let i = 0; i < 10; i++) {
      const reply = await fetch(`http://127.0.0.1:${server.httpPort}/v2/models/identity_fp32/infer`, {
        method: "POST",
        headers: { "content-type": "application/json", connection: "close" },
        body: JSON.stringify({
          id: `http-${i}`,
          inputs: [{ name: "INPUT0", shape: [1, 1], datatype: "FP32", data: [i] }],
        }),
      });
      assert.equal(reply.status, 200);
      await reply.arrayBuffer();
    }
    await eventually(() => {
      for (const entry of server.logs) if (String(entry["requestId"]).startsWith("http-")) pids.add(entry["pid"]);
      assert.equal(pids.size, 2, "both workers served HTTP");
    });
  });

  it("serves one /metrics summed over the workers, and readiness", async () => {
    const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
    assert.equal(valueOf(samples, "nv_inference_exec_count", { model: "identity_fp32", version: "1" }), 30);
    const served = (endpoint: string): number =>
      valueOf(samples, "dynamo_frontend_requests_total", { model: "identity_fp32", endpoint, status: "success" });
    assert.deepEqual([served("ModelInfer"), served("infer")], [20, 10]);
    const ready = await fetch(`http://127.0.0.1:${server.metricsPort}/v2/health/ready`);
    assert.equal(ready.status, 200);
  });

  it("stops every worker on SIGTERM and exits 0", async () => {
    const workers = new Set(
      server.logs.filter((entry) => entry["msg"] === "worker listening").map((entry) => entry["pid"] as number),
    );
    assert.equal(workers.size, 2);
    assert.equal(await server.stop(), 0);
    for (const pid of workers) assert.throws(() => process.kill(pid, 0), /ESRCH/, `worker ${pid} is gone`);
  });

  it("refuses explicit model control with several workers", async () => {
    const failed = await dataPlaneFailing(["--grpc-workers", "2", "--model-control-mode", "explicit"]);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /--grpc-workers above 1 needs --model-control-mode none or poll/);
  });
});

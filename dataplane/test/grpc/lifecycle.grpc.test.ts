import { credentials } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { connect, type ClientHttp2Session } from "node:http2";
import type { ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { GRPCInferenceServiceClient } from "../../../proto/gen/ts/grpc_service.js";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { READINESS_SERVICE } from "../../../lib/contract/layout.js";
import { freePorts } from "../../../e2e/support/ports.js";
import { HealthTestClient } from "../fixtures/health.js";
import { CLI } from "../fixtures/paths.js";
import { MODELS_PYTHON } from "../fixtures/peers.js";
import { promptRequest } from "../fixtures/requests.js";
import { mockerConfig, TestRepository } from "../fixtures/repository.js";
import { call, eventually, infer, startServer, streamAll, type ServerProcess } from "../fixtures/server.js";

/** A unary (not decoupled) simulated LLM that takes ~300 ms: a request that is surely in flight. */
const SLOW_UNARY = mockerConfig("slow_unary", { ttftMs: 300, itlMs: 5, maxTokens: 4 });

describe("connection tuning and graceful shutdown (real sockets)", function () {
  this.timeout(30_000);

  describe("HTTP/2 connection settings", () => {
    let server: ServerProcess;
    let session: ClientHttp2Session | undefined;
    before(async () => {
      server = await startServer([
        "--grpc-max-concurrent-streams",
        "7",
        "--grpc-keepalive-time-secs",
        "0.3",
        "--grpc-max-connection-age-secs",
        "1",
        "--grpc-max-connection-age-grace-secs",
        "1",
      ]);
    });
    after(async () => {
      session?.destroy();
      await server?.stop();
    });

    it("advertises max concurrent streams, pings idle clients, and ages connections out with GOAWAY", async () => {
      session = connect(`http://127.0.0.1:${server.grpcPort}`);
      session.on("error", () => undefined);
      const opened = Date.now();
      const settings = await new Promise<{ maxConcurrentStreams?: number }>((resolve) =>
        session!.once("remoteSettings", resolve),
      );
      assert.equal(settings.maxConcurrentStreams, 7);
      const pinged = new Promise<number>((resolve) => session!.once("ping", () => resolve(Date.now() - opened)));
      const goaway = new Promise<number>((resolve) => session!.once("goaway", () => resolve(Date.now() - opened)));
      const pingAfter = await pinged;
      assert.ok(pingAfter < 1500, `first keepalive ping after ${pingAfter} ms`);
      const goawayAfter = await goaway;
      // grpc-js adds up to ±10 % jitter to the age.
      assert.ok(goawayAfter >= 800 && goawayAfter < 3000, `GOAWAY after ${goawayAfter} ms`);
    });

    it("keeps a client's requests succeeding across connection ageing (it reconnects)", async () => {
      const client = new GRPCInferenceServiceClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
      try {
        const until = Date.now() + 2500;
        let served = 0;
        while (Date.now() < until) {
          assert.equal((await call(client, "serverLive", {})).live, true);
          served++;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        assert.ok(served > 50, `${served} requests`);
      } finally {
        client.close();
      }
    });
  });

  describe("SIGTERM", () => {
    const repository = new TestRepository({ slow_unary: SLOW_UNARY });
    after(() => repository.remove());

    it("drains: NOT_SERVING first, serves during the drain delay, finishes every in-flight call, then exits 0", async () => {
      const server = await startServer(["--model-repository", repository.dir, "--drain-delay-secs", "0.4"]);
      const health = new HealthTestClient(`127.0.0.1:${server.grpcPort}`);
      // Our own channel: the fixture's closes with stop().
      const client = new GRPCInferenceServiceClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
      const watched = health.watch("inference.GRPCInferenceService");
      try {
        await eventually(() => assert.deepEqual(watched.statuses, ["SERVING"]));
        // In flight when SIGTERM arrives: 4 unary calls of ~300 ms, 2 streams of 30 tokens (~350 ms).
        const unary = Array.from({ length: 4 }, () => infer(client, promptRequest({ model: "slow_unary" })));
        const streams = Array.from({ length: 2 }, () => streamAll(client, [promptRequest({ maxTokens: 30 })]));
        await new Promise((resolve) => setTimeout(resolve, 100));
        const exited = server.stop("SIGTERM");
        await eventually(() => assert.deepEqual(watched.statuses, ["SERVING", "NOT_SERVING"]), 2000, 10);
        // Still served during the drain delay (endpoints have not caught up yet).
        const during = await infer(client, promptRequest({ model: "slow_unary" }));
        assert.equal(during.outputs[0]?.name, "text_output");
        const settled = await Promise.allSettled([...unary, ...streams]);
        assert.deepEqual(
          settled
            .filter((result) => result.status === "rejected")
            .map((result) => String((result as PromiseRejectedResult).reason)),
          [],
        );
        for (const replies of await Promise.all(streams)) {
          const tokens = (replies as ModelStreamInferResponse[]).filter((reply) => reply.inferResponse?.outputs.length);
          assert.equal(tokens.length, 30);
        }
        assert.equal(await exited, 0);
        assert.ok(server.logs.some((entry) => entry["msg"] === "data plane stopped"));
      } finally {
        watched.stream.cancel();
        health.close();
        client.close();
      }
    });
  });

  describe("start-up", () => {
    const repository = new TestRepository();
    before(() => {
      repository.writeModel(
        "initializes_slowly",
        'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n',
      );
      writeFileSync(
        repository.path("initializes_slowly", "1", "model.py"),
        "import time\n\nclass TritonPythonModel:\n    def initialize(self, args):\n        time.sleep(3600)\n",
      );
      repository.writeModel("loads_at_once", mockerConfig("loads_at_once", {}));
    });
    after(() => repository.remove());

    it("is live (gRPC health '' and /v2/health/live) while its start-up loads run, and ready only once they are done", async () => {
      const [grpcPort, httpPort, metricsPort] = await freePorts(3);
      const dataPlane = spawn(
        process.execPath,
        [
          ...[CLI, "dataplane", "--host", "127.0.0.1", "--model-repository", repository.dir, "--python", MODELS_PYTHON],
          ...["--model-control-mode", "explicit", "--load-model", "initializes_slowly"],
          ...["--grpc-port", String(grpcPort), "--http-port", String(httpPort), "--metrics-port", String(metricsPort)],
        ],
        { stdio: "ignore" },
      );
      const exited = new Promise<boolean>((resolve) => dataPlane.once("exit", () => resolve(true)));
      const health = new HealthTestClient(`127.0.0.1:${grpcPort}`);
      try {
        // A model's initialize hangs for an hour, past the liveness probe's 30 s: the pod must stay live.
        await eventually(async () => assert.equal(await health.check(""), "SERVING"), 20_000);
        const live = await fetch(`http://127.0.0.1:${metricsPort}/v2/health/live`);
        assert.equal(live.status, 200);
        assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/v2/health/ready`)).status, 503);
        assert.equal(await health.check(READINESS_SERVICE), "NOT_SERVING");
        // Not yet serving, nothing is in flight: SIGTERM ends it (its Python processes follow it).
        dataPlane.kill("SIGTERM");
        assert.equal(await exited, true);
      } finally {
        health.close();
        dataPlane.kill("SIGKILL");
      }
    });

    it("is not ready while a start-up load runs, though another model is ready: a pod takes no request for a model it has not loaded", async () => {
      const [grpcPort, httpPort, metricsPort] = await freePorts(3);
      const dataPlane = spawn(
        process.execPath,
        [
          ...[CLI, "dataplane", "--host", "127.0.0.1", "--model-repository", repository.dir, "--python", MODELS_PYTHON],
          ...[
            "--model-control-mode",
            "explicit",
            "--load-model",
            "initializes_slowly",
            "--load-model",
            "loads_at_once",
          ],
          ...["--model-load-timeout-secs", "15"],
          ...["--grpc-port", String(grpcPort), "--http-port", String(httpPort), "--metrics-port", String(metricsPort)],
        ],
        { stdio: "ignore" },
      );
      const health = new HealthTestClient(`127.0.0.1:${grpcPort}`);
      const client = new GRPCInferenceServiceClient(`127.0.0.1:${grpcPort}`, credentials.createInsecure());
      const httpReady = async (): Promise<number> =>
        (await fetch(`http://127.0.0.1:${metricsPort}/v2/health/ready`)).status;
      try {
        await eventually(async () => assert.equal(await health.check("loads_at_once"), "SERVING"), 20_000);
        const loading = await call(client, "modelReady", { name: "initializes_slowly", version: "" });
        assert.equal(loading.ready, false, "the slow model's initialize still runs");
        assert.equal(await health.check(READINESS_SERVICE), "NOT_SERVING");
        assert.equal((await call(client, "serverReady", {})).ready, false);
        assert.equal(await httpReady(), 503);
        // The load timeout (15 s: room for a slow start on a busy machine) ends the slow load:
        // the start-up is done, one model serves.
        await eventually(async () => assert.equal(await health.check(READINESS_SERVICE), "SERVING"), 40_000);
        assert.equal((await call(client, "serverReady", {})).ready, true);
        assert.equal(await httpReady(), 200);
        assert.equal((await call(client, "modelReady", { name: "initializes_slowly", version: "" })).ready, false);
      } finally {
        health.close();
        client.close();
        dataPlane.kill("SIGKILL");
      }
    });
  });
});

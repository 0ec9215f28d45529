import { status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import type { GRPCInferenceServiceClient } from "../../../proto/gen/ts/grpc_service.js";
import { TestRepository } from "../fixtures/repository.js";
import { addSubRequest } from "../fixtures/requests.js";
import { call, infer, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * Reloading or unloading an ONNX model retires its engine only after the requests it is
 * running have finished: under load, no request fails with "Session already disposed".
 */

/** The add_sub model with any batch (no max_batch_size): big inputs keep session.run busy. */
const addSubConfig = (revision: number): string => `
# revision ${revision}
name: "add_sub_big"
platform: "onnxruntime_onnx"
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 4 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1, 4 ] }
]
`;

const ROWS = 65_536;
const bigRequest = addSubRequest("add_sub_big", [BigInt(ROWS), 4n]);

function addSubRepository(): TestRepository {
  const repository = new TestRepository();
  mkdirSync(repository.path("add_sub_big", "1"), { recursive: true });
  copyFileSync(repository.path("add_sub_onnx", "1", "model.onnx"), repository.path("add_sub_big", "1", "model.onnx"));
  writeFileSync(repository.path("add_sub_big", "config.pbtxt"), addSubConfig(0));
  return repository;
}

const pauseMs = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What the clients of underLoad have had answered so far. */
interface Progress {
  served: number;
}

/**
 * Resolves once a request was served after `since` (a count read from `progress` before): a
 * step of a test waits for it so that every reload has requests around it however slowly this
 * machine serves them (a busy one served 37 requests in the 3.5 s of 80 edits, where a quiet one
 * serves hundreds).
 */
async function servedSince(progress: Progress, since: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (progress.served <= since) {
    if (Date.now() > deadline) throw new Error(`no request served for 30 s (${progress.served} so far)`);
    await pauseMs(5);
  }
}

/** `concurrency` clients sending bigRequest back to back until `until` resolves; every failure's code and detail. */
async function underLoad(
  client: GRPCInferenceServiceClient,
  concurrency: number,
  until: Promise<void>,
  progress: Progress = { served: 0 },
): Promise<{ served: number; failures: { code: number; details: string }[] }> {
  let running = true;
  // Stops when `until` fails too (its calls fail once a timed-out test's afterEach stopped the server).
  const stop = (): void => {
    running = false;
  };
  void until.then(stop, stop);
  const failures: { code: number; details: string }[] = [];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (running) {
        try {
          await infer(client, bigRequest);
          progress.served++;
        } catch (error) {
          const { code, details } = error as ServiceError;
          failures.push({ code, details });
          // A closed client (afterEach's server.stop() after a timeout) fails calls without
          // I/O: without this turn of the event loop the clients would starve every timer,
          // `until`'s included, and spin forever.
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
    }),
  );
  return { served: progress.served, failures };
}

describe("ONNX reload and unload under load (real server over loopback)", function () {
  this.timeout(60_000);
  let repository: TestRepository;
  let server: ServerProcess | undefined;
  beforeEach(() => (repository = addSubRepository()));
  afterEach(async () => {
    await server?.stop();
    repository.remove();
  });

  it("poll mode: 80 edits of the config while 4 clients send requests, and none fails", async () => {
    server = await startServer(["--model-repository", repository.dir, "--repository-poll-secs", "0.02"]);
    const progress: Progress = { served: 0 };
    const edits = (async () => {
      for (let revision = 1; revision <= 80; revision++) {
        const before = progress.served;
        await pauseMs(40);
        await servedSince(progress, before);
        // Replaced whole, as a ConfigMap volume does: a poll must not read a half-written file.
        const next = repository.path("add_sub_big", `.config.pbtxt.${revision}`);
        writeFileSync(next, addSubConfig(revision));
        renameSync(next, repository.path("add_sub_big", "config.pbtxt"));
      }
      await pauseMs(300);
    })();
    const { served, failures } = await underLoad(server.client, 4, edits, progress);
    const reloads = server.logs.filter((entry) => entry["msg"] === "model reloaded").length;
    console.log(`      ${served} served, ${failures.length} failed, ${reloads} reloads`);
    assert.deepEqual(failures, [], `${failures.length} of ${served + failures.length} failed over ${reloads} reloads`);
    assert.ok(reloads >= 10, `${reloads} reloads`);
    assert.ok(served >= 80, `${served} requests`);
  });

  it("explicit mode: 15 unload/load cycles under load; a request is refused at admission or served, never cut", async () => {
    server = await startServer([
      "--model-repository",
      repository.dir,
      "--model-control-mode",
      "explicit",
      "--load-model",
      "add_sub_big",
    ]);
    const running = server;
    const progress: Progress = { served: 0 };
    const cycles = (async () => {
      for (let cycle = 0; cycle < 15; cycle++) {
        const before = progress.served;
        await pauseMs(80);
        await servedSince(progress, before);
        await call(running.client, "repositoryModelUnload", {
          repositoryName: "",
          modelName: "add_sub_big",
          parameters: {},
        });
        await pauseMs(40);
        await call(running.client, "repositoryModelLoad", {
          repositoryName: "",
          modelName: "add_sub_big",
          parameters: {},
        });
      }
      await pauseMs(200);
    })();
    const { served, failures } = await underLoad(server.client, 4, cycles, progress);
    const cut = failures.filter((failure) => failure.code !== status.UNAVAILABLE && failure.code !== status.NOT_FOUND);
    assert.deepEqual(cut, [], `${cut.length} requests cut of ${served + failures.length}`);
    assert.ok(served >= 15, `${served} requests`);
  });
});

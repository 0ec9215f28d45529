import { credentials, status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { GRPCInferenceServiceClient, type InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import {
  MODELS_PYTHON,
  requireTritonPeers,
  requireTritonServer,
  startTritonServer,
  type Peer,
} from "../fixtures/peers.js";
import { callError, infer, startServer, type ServerProcess } from "../fixtures/server.js";
import { sleepRequest, writeSleeper } from "../fixtures/sleeper.js";

/**
 * Triton's scheduling, checked against a real Triton running the same config.pbtxt and
 * model.py (its Python backend): a full queue is refused with the same code and message
 * class, and priorities reorder a saturated model the same way. Requests are sent a few
 * hundred milliseconds apart so each server sees them in the same order; the model sleeps
 * long enough (2 s) for the later ones to queue behind it.
 */

/** As tritonclient sends it (uint64_param; Triton also takes int64_param). */
const priority = (level: number): Record<string, InferParameter> => ({
  priority: { parameterChoice: { $case: "uint64Param", value: BigInt(level) } },
});

describe("scheduling beside a real Triton: the same configs give the same answers", function () {
  this.timeout(180_000);
  let repository: string;
  let ours: ServerProcess | undefined;
  let triton: (Peer & { readonly httpAddress: string }) | undefined;
  let tritonClient: GRPCInferenceServiceClient | undefined;

  before(async function () {
    requireTritonPeers(this);
    requireTritonServer(this);
    repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-scheduling-"));
    writeSleeper(repository, "bounded", "dynamic_batching { default_queue_policy { max_queue_size: 1 } }");
    writeSleeper(repository, "ranked", "dynamic_batching { priority_levels: 2 default_priority_level: 2 }");
    [ours, triton] = await Promise.all([
      startServer(["--model-repository", repository, "--python", MODELS_PYTHON]),
      startTritonServer([repository]),
    ]);
    tritonClient = new GRPCInferenceServiceClient(triton.address, credentials.createInsecure());
  });
  after(async () => {
    tritonClient?.close();
    await ours?.stop();
    await triton?.kill();
    if (repository !== undefined) rmSync(repository, { recursive: true, force: true });
  });

  /** Both servers' clients, by name. */
  const servers = (): [string, GRPCInferenceServiceClient][] => [
    ["dynamo-kserve", ours!.client],
    ["triton", tritonClient!],
  ];

  it("refuses the request past max_queue_size UNAVAILABLE, 'Exceeds maximum queue size', on both", async () => {
    const outcomes = await Promise.all(
      servers().map(async ([name, client]) => {
        const running = infer(client, sleepRequest("bounded", 2));
        await sleep(500);
        const queued = infer(client, sleepRequest("bounded", 0.01));
        await sleep(300);
        const extra = await callError(client, "modelInfer", sleepRequest("bounded", 0.01));
        await Promise.all([running, queued]);
        return { name, code: extra.code, details: extra.details };
      }),
    );
    for (const { name, code, details } of outcomes) {
      assert.equal(code, status.UNAVAILABLE, name);
      assert.match(details, /Exceeds maximum queue size/, name);
    }
  });

  it("runs the higher priority first on a saturated model, on both", async () => {
    const orders = await Promise.all(
      servers().map(async ([name, client]) => {
        const finished: string[] = [];
        const send = (label: string, seconds: number, level: number) =>
          infer(client, sleepRequest("ranked", seconds, priority(level))).then(() => finished.push(label));
        const busy = send("busy", 2, 0);
        await sleep(500);
        const low = send("low", 0.01, 2);
        await sleep(100);
        const lower = send("lower", 0.01, 0);
        await sleep(100);
        const high = send("high", 0.01, 1);
        await Promise.all([busy, low, lower, high]);
        return { name, finished };
      }),
    );
    for (const { name, finished } of orders) assert.deepEqual(finished, ["busy", "high", "low", "lower"], name);
  });
});

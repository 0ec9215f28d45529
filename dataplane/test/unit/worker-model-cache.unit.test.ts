import assert from "node:assert/strict";
import { join } from "node:path";
import { parsedDataPlaneArguments } from "../../../cli/dataplane.js";
import { modelStorageSettings } from "../../src/main.js";

/**
 * --grpc-workers N: each worker keeps a model cache of its own, in one emptyDir whose
 * sizeLimit is --model-cache-max-bytes (the operator sets both from storage.cacheSize).
 */
describe("the model cache of --grpc-workers workers", () => {
  const settings = async (
    worker?: { slot: number; workers: number },
    maxBytes = 1000,
  ): Promise<{ dir: string; max: number }> => {
    const args = await parsedDataPlaneArguments([
      "--model-cache-dir",
      "/model-cache",
      "--model-cache-max-bytes",
      String(maxBytes),
      "--grpc-workers",
      "4",
    ]);
    const { cacheDir, cacheMaxBytes } = modelStorageSettings(args, worker);
    return { dir: cacheDir, max: cacheMaxBytes };
  };

  it("shares the bound between the workers, so together they never pass the emptyDir's sizeLimit", async () => {
    assert.deepEqual(await settings(), { dir: "/model-cache", max: 1000 });
    const shares = await Promise.all([0, 1, 2, 3].map((slot) => settings({ slot, workers: 4 })));
    assert.equal(new Set(shares.map(({ dir }) => dir)).size, 4, "a folder each");
    assert.ok(shares.reduce((sum, { max }) => sum + max, 0) <= 1000, JSON.stringify(shares));
    assert.equal((await settings({ slot: 0, workers: 4 }, 3)).max, 1, "a bound stays a bound (0 is none)");
    assert.equal((await settings({ slot: 0, workers: 4 }, 0)).max, 0, "no bound stays none");
  });

  it("gives a replacement worker its predecessor's folder, so what the dead one left is cleaned, not leaked", async () => {
    assert.equal((await settings({ slot: 2, workers: 4 })).dir, join("/model-cache", "worker-2"));
  });
});

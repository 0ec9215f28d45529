import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { freePort } from "../../../e2e/support/ports.js";
import { ModelStorage } from "../../src/storage/model-storage.js";

/** Folders and buckets mixed (--model-repository given several times): the first that has a model serves it. */
describe("model storage: a folder before a bucket that cannot be listed", () => {
  let root: string;
  let storage: ModelStorage | undefined;
  beforeEach(() => (root = mkdtempSync(join(tmpdir(), "model-storage-"))));
  afterEach(async () => {
    await storage?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("loads the folder's model without the bucket, and fails one only the bucket could have", async () => {
    const folder = join(root, "repository");
    mkdirSync(join(folder, "local", "1"), { recursive: true });
    writeFileSync(join(folder, "local", "config.pbtxt"), "backend: 'onnxruntime'");
    writeFileSync(join(folder, "single.pbtxt"), "backend: 'onnxruntime'");
    // Nothing listens there: every listing fails as unreachable.
    const closed = await freePort();
    storage = await ModelStorage.open({
      repositories: [folder, `s3://127.0.0.1:${closed}/bucket/repo`],
      loadPaths: [],
      cacheDir: join(root, "cache"),
      cacheMaxBytes: 0,
      stores: { requestTimeoutMs: 2000, secretValues: { AWS_ACCESS_KEY_ID: "id", AWS_SECRET_ACCESS_KEY: "key" } },
      logger: pino({ level: "silent" }),
    });
    await storage.syncModel("local");
    await storage.syncModel("single");
    await assert.rejects(storage.syncModel("elsewhere"), { name: "StorageError", kind: "unreachable" });
  });
});

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { START_OBJECT_STORE, requireObjectStore, type ObjectStoreServer } from "../../../lib/test/object-stores.js";
import { EXAMPLES } from "../fixtures/paths.js";
import { addSubRequest } from "../fixtures/requests.js";
import { call, eventually, infer, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * The data plane on a gs:// and an as:// repository, end to end: the flags a user gives
 * (--gcs-endpoint, --azure-endpoint, --storage-secret-dir) reach the stores, the model is
 * served from the bucket, and a version added to it is served within a poll. What each store
 * does on its own is the conformance suite's (lib/test/object-store.conformance.grpc.test.ts);
 * the data plane's model cache is tested on S3 (object-storage.grpc.test.ts).
 */

const ADD_SUB_ONNX = join(EXAMPLES, "add_sub_onnx");

for (const kind of ["fake-gcs", "azurite"] as const) {
  describe(`a model repository in ${kind === "fake-gcs" ? "Cloud Storage (gs://, fake-gcs-server)" : "Azure Blob Storage (as://, Azurite)"}`, function () {
    this.timeout(120_000);
    const bucket = "models";
    let store: ObjectStoreServer;
    let server: ServerProcess;
    const scratch: string[] = [];
    const folder = (name: string): string => {
      const dir = mkdtempSync(join(tmpdir(), `${name}-`));
      scratch.push(dir);
      return dir;
    };

    before(async function () {
      requireObjectStore(this, kind);
      store = await START_OBJECT_STORE[kind]();
      await store.createBucket(bucket);
      await store.putFolder(ADD_SUB_ONNX, bucket, "repo/add_sub_onnx");
      const secrets = folder("storage-secret");
      await store.writeSecretDir(secrets);
      server = await startServer([
        ...["--model-repository", store.location(bucket, "repo")],
        ...store.dataPlaneArguments(secrets),
        ...["--model-cache-dir", folder("model-cache"), "--repository-poll-secs", "1"],
      ]);
    });
    after(async () => {
      await server?.stop();
      await store?.stop();
      for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
    });

    it("serves the model from the bucket", async () => {
      const reply = await infer(server.client, addSubRequest("add_sub_onnx", [1n, 4n]));
      assert.deepEqual([...new Float32Array(Uint8Array.from(reply.rawOutputContents[0]!).buffer)], [1, 2, 3, 4]);
    });

    it("serves a version added to the bucket within a poll", async () => {
      await store.put(bucket, "repo/add_sub_onnx/2/model.onnx", readFileSync(join(ADD_SUB_ONNX, "1", "model.onnx")));
      const config = readFileSync(join(ADD_SUB_ONNX, "config.pbtxt"), "utf8");
      await store.put(bucket, "repo/add_sub_onnx/config.pbtxt", `${config}\nversion_policy: { all: {} }\n`);
      await eventually(async () => {
        const metadata = await call(server.client, "modelMetadata", { name: "add_sub_onnx", version: "" });
        assert.deepEqual(metadata.versions, ["1", "2"]);
      });
    });
  });
}

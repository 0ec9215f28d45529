import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseStorageLocation } from "../storage/locations.js";
import {
  START_OBJECT_STORE,
  requireObjectStore,
  type ObjectStoreKind,
  type ObjectStoreServer,
} from "./object-stores.js";

const ADD_SUB = fileURLToPath(new URL("../../../examples/model_repository/add_sub_onnx", import.meta.url));

type Credentials = Record<string, string>;

/** Credentials each store must refuse, and its answer (fake-gcs-server checks none). */
interface Refused {
  readonly what: string;
  readonly values: (good: Credentials) => Credentials;
  readonly answer: RegExp;
}

const S3_REFUSED: readonly Refused[] = [
  {
    what: "a wrong secret",
    values: (good) => ({ ...good, AWS_SECRET_ACCESS_KEY: "wrong" }),
    answer: /SignatureDoesNotMatch/,
  },
  {
    what: "an access key it does not know",
    values: (good) => ({ ...good, AWS_ACCESS_KEY_ID: "AKIAUNKNOWN000000000" }),
    answer: /InvalidAccessKeyId/,
  },
];

const REFUSED: Readonly<Record<ObjectStoreKind, readonly Refused[]>> = {
  seaweedfs: S3_REFUSED,
  moto: S3_REFUSED,
  "fake-gcs": [],
  azurite: [
    {
      what: "a wrong account key",
      values: (good) => ({
        AZURE_STORAGE_CONNECTION_STRING: good["AZURE_STORAGE_CONNECTION_STRING"]!.replace(
          /AccountKey=[^;]+/,
          `AccountKey=${Buffer.from("wrong").toString("base64")}`,
        ),
      }),
      answer: /AuthorizationFailure/,
    },
  ],
};

for (const kind of Object.keys(START_OBJECT_STORE) as ObjectStoreKind[]) {
  describe(`object store test support: ${kind}`, function () {
    this.timeout(120_000);
    let store: ObjectStoreServer;
    const bucket = "models";

    before(async function () {
      requireObjectStore(this, kind);
      const started = performance.now();
      store = await START_OBJECT_STORE[kind]();
      console.log(`      ${kind} started in ${Math.round(performance.now() - started)} ms`);
      await store.createBucket(bucket);
    });

    after(async () => {
      await store?.stop();
    });

    it("puts, lists and removes objects", async () => {
      await store.put(bucket, "repo/a/config.pbtxt", 'name: "a"');
      await store.put(bucket, "repo/a/1/model.bin", new Uint8Array([1, 2, 3]));
      await store.put(bucket, "elsewhere.txt", "x");
      assert.deepEqual(await store.keys(bucket, "repo/"), ["repo/a/1/model.bin", "repo/a/config.pbtxt"]);
      await store.remove(bucket, "repo/a/1/model.bin");
      assert.deepEqual(await store.keys(bucket), ["elsewhere.txt", "repo/a/config.pbtxt"]);
    });

    it("uploads a model folder under a prefix", async () => {
      const written = await store.putFolder(ADD_SUB, bucket, "/models/add_sub_onnx/");
      assert.equal(written, 2);
      assert.deepEqual(await store.keys(bucket, "models/"), [
        "models/add_sub_onnx/1/model.onnx",
        "models/add_sub_onnx/config.pbtxt",
      ]);
    });

    it("names its location as the data plane parses it, and writes its credentials as a Secret's files", async () => {
      const location = parseStorageLocation(store.location(bucket, "models/add_sub_onnx"));
      assert.equal(location.scheme, store.scheme);
      assert.equal("prefix" in location && location.prefix, "models/add_sub_onnx");
      if (location.scheme === "s3") assert.equal(location.endpoint, store.endpoint);
      const dir = mkdtempSync(join(tmpdir(), "object-store-secret-"));
      try {
        await store.writeSecretDir(join(dir, "secret"));
        const files = readdirSync(join(dir, "secret")).sort();
        assert.deepEqual(files, Object.keys(store.secretValues).sort());
        for (const file of files)
          assert.equal(readFileSync(join(dir, "secret", file), "utf8"), store.secretValues[file]);
        const args = store.dataPlaneArguments(join(dir, "secret"));
        assert.equal(args[args.indexOf("--storage-secret-dir") + 1], join(dir, "secret"));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    for (const refused of REFUSED[kind])
      it(`refuses requests signed with ${refused.what}`, async () => {
        const intruder = store.clientWith(refused.values({ ...store.secretValues }));
        await assert.rejects(intruder.keys(bucket), (error: Error) => {
          assert.match(`${error.name} ${error.message} ${JSON.stringify(error)}`, refused.answer);
          return true;
        });
        await assert.rejects(intruder.put(bucket, "intruder.txt", "x"));
        assert.deepEqual(await store.keys(bucket, "intruder"), []);
      });

    it("stops: the process is gone and its data removed", async () => {
      const folder = join(store.logFile, "..");
      assert.ok(existsSync(folder));
      await store.stop();
      assert.ok(!existsSync(folder), `${folder} is still there`);
      await assert.rejects(fetch(store.endpoint));
    });
  });
}

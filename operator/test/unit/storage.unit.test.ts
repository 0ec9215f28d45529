import assert from "node:assert/strict";
import {
  cacheBytes,
  credentialValues,
  foundUnder,
  missingCredentials,
  modelFilesCondition,
  remoteLocationOf,
} from "../../src/resources/storage.js";
import { withoutSecrets } from "../../src/probes/model-files.js";
import { observeModelFiles, type ModelFilesObserving } from "../../src/controllers/model-files.js";

const base64 = (text: string) => Buffer.from(text).toString("base64");

describe("models in object storage (operator side)", () => {
  it("never trusts a CR's CA bundle for gs:// in the operator (the SDK would trust it process-wide): the pods check it", async () => {
    const observing = {
      configMaps: {
        get: () => ({ metadata: { resourceVersion: "1" }, data: { "ca.crt": "-----BEGIN CERTIFICATE-----" } }),
      },
      secrets: {
        get: async () => ({ metadata: { resourceVersion: "2" }, data: { "service-account.json": base64("{}") } }),
      },
      checker: {
        check: () => assert.fail("the operator listed a gs:// location with a CR's CA bundle"),
        recheckAfterMs: () => 0,
      },
    } as unknown as ModelFilesObserving;
    const owner = { apiVersion: "v1", kind: "X", metadata: { name: "m", namespace: "ns", uid: "u", generation: 1 } };
    const storage = { secretName: "gcs", caBundle: { configMapName: "ca" } };
    const outcome = await observeModelFiles(owner, "gs://models/repo", "repository", storage, observing);
    assert.equal(outcome.state, "CheckedByPods");
    assert.match(modelFilesCondition(outcome).message ?? "", /does not trust a storage\.caBundle for gs:\/\//);
  });

  it("finds models in a repository listing: <model>/config.pbtxt, <model>/<version>/..., <model>.pbtxt", () => {
    assert.deepEqual(
      foundUnder(
        [
          "densenet_onnx/config.pbtxt",
          "densenet_onnx/1/model.onnx",
          "add_sub/1/model.py",
          "single.pbtxt",
          "README.md",
          "notes/draft.txt",
          "empty/1/",
        ],
        "repository",
      ),
      ["add_sub", "densenet_onnx", "single"],
    );
    assert.deepEqual(foundUnder(["README.md", "docs/a/b.txt"], "repository"), []);
  });

  it("finds a model folder's versions: <version>/<file>, in number order", () => {
    assert.deepEqual(foundUnder(["10/model.onnx", "2/model.onnx", "config.pbtxt", "labels.txt", "x/1"], "model"), [
      "2",
      "10",
    ]);
    assert.deepEqual(foundUnder(["config.pbtxt"], "model"), []);
  });

  it("bounds the cache by storage.cacheSize (10Gi unless told), 0 meaning none", () => {
    assert.equal(cacheBytes(undefined), 10 * 2 ** 30);
    assert.equal(cacheBytes({ cacheSize: "512Mi" }), 512 * 2 ** 20);
    assert.equal(cacheBytes({ cacheSize: 1000 }), 1000);
    assert.equal(cacheBytes({ cacheSize: "0" }), 0);
  });

  it("reads only the scheme's credential keys from the Secret, and names the keys it lacks (never values)", () => {
    const secret = {
      data: { AWS_ACCESS_KEY_ID: base64("AKIDEXAMPLE"), other: base64("x"), "service-account.json": base64("{}") },
    };
    assert.deepEqual(credentialValues(secret, "s3"), { AWS_ACCESS_KEY_ID: "AKIDEXAMPLE" });
    const missing = missingCredentials(credentialValues(secret, "s3"), "s3");
    assert.match(missing!, /AWS_SECRET_ACCESS_KEY/);
    assert.equal(missing!.includes("AKIDEXAMPLE"), false);
    assert.equal(missingCredentials(credentialValues(secret, "gs"), "gs"), undefined);
    assert.match(missingCredentials({}, "as")!, /AZURE_STORAGE_CONNECTION_STRING/);
    assert.equal(missingCredentials({ AZURE_STORAGE_SAS_TOKEN: "sv=1" }, "as"), undefined);
  });

  it("parses storageUri as the data plane does, and says why a form is refused", () => {
    assert.deepEqual(remoteLocationOf("s3://127.0.0.1:8333/models/repo"), {
      scheme: "s3",
      endpoint: "http://127.0.0.1:8333",
      bucket: "models",
      prefix: "repo",
    });
    assert.match(
      (remoteLocationOf("/srv/models") as { invalid: string }).invalid,
      /not an s3:\/\/, gs:\/\/ or as:\/\//,
    );
    assert.match((remoteLocationOf("s3://b/a/../c") as { invalid: string }).invalid, /'\.\.'/);
  });

  it("says each outcome as a condition", () => {
    assert.deepEqual(
      modelFilesCondition({ state: "Found", location: "gs://m/ident", holds: "model", found: ["1", "2"] }),
      { status: "True", reason: "Ready", message: "gs://m/ident holds version folders 1, 2" },
    );
    const many = Array.from({ length: 12 }, (_, index) => `m${index}`);
    assert.match(
      modelFilesCondition({ state: "Found", location: "s3://b", holds: "repository", found: many }).message,
      /m9, and 2 more$/,
    );
    assert.equal(modelFilesCondition({ state: "CheckedByPods", location: "s3://b" }).status, "Unknown");
  });

  it("cuts credential values out of a store's message", () => {
    assert.equal(
      withoutSecrets("InvalidAccessKeyId: AKIDEXAMPLE is not known (sig SECRETSECRET)", {
        AWS_ACCESS_KEY_ID: "AKIDEXAMPLE",
        AWS_SECRET_ACCESS_KEY: "SECRETSECRET",
        AWS_SESSION_TOKEN: "",
      }),
      "InvalidAccessKeyId: [redacted] is not known (sig [redacted])",
    );
  });
});

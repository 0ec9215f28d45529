import assert from "node:assert/strict";
import { resolve } from "node:path";
import {
  childLocation,
  formatStorageLocation,
  isRemoteLocation,
  locationContains,
  parseStorageLocation,
  StorageLocationError,
  type StorageLocation,
} from "../storage/locations.js";

describe("object-storage locations", () => {
  it("reads every form Triton writes, and a local path", () => {
    const forms: [string, StorageLocation][] = [
      ["s3://models/repo/v1", { scheme: "s3", bucket: "models", prefix: "repo/v1" }],
      ["s3://models", { scheme: "s3", bucket: "models", prefix: "" }],
      ["s3://models/repo/", { scheme: "s3", bucket: "models", prefix: "repo" }],
      [
        "s3://127.0.0.1:8333/models/repo",
        { scheme: "s3", endpoint: "http://127.0.0.1:8333", bucket: "models", prefix: "repo" },
      ],
      [
        "s3://https://minio.example:9000/models",
        { scheme: "s3", endpoint: "https://minio.example:9000", bucket: "models", prefix: "" },
      ],
      ["s3://[::1]:9000/b/p", { scheme: "s3", endpoint: "http://[::1]:9000", bucket: "b", prefix: "p" }],
      ["gs://bucket/a/b", { scheme: "gs", bucket: "bucket", prefix: "a/b" }],
      [
        "as://account1/container/models",
        { scheme: "as", account: "account1", container: "container", prefix: "models" },
      ],
      ["relative/repo", { scheme: "file", path: resolve("relative/repo") }],
      ["/abs/repo", { scheme: "file", path: "/abs/repo" }],
      ["file:///abs/repo", { scheme: "file", path: "/abs/repo" }],
    ];
    for (const [text, location] of forms) assert.deepEqual(parseStorageLocation(text), location, text);
    assert.equal(isRemoteLocation("s3://b"), true);
    assert.equal(isRemoteLocation("/models"), false);
  });

  it("refuses bad forms, naming what is wrong", () => {
    const refused: [string, RegExp][] = [
      ["", /empty/],
      ["s3://", /names no bucket/],
      ["s3:///prefix", /names no bucket/],
      ["s3://host:99/", /names no bucket/],
      ["s3://https://host/b", /is not a host:port endpoint/],
      ["s3://b/a/../c", /'\.\.' segment/],
      ["s3://b/a//c", /empty, '\.' or '\.\.' segment/],
      ["s3://b/./c", /segment/],
      ["s3://b/a\u0000c", /control character/],
      ["s3://bad bucket/x", /not a bucket or container name/],
      ["as://Account/c", /3-24 lower-case letters/],
      ["as://account", /names no container/],
      ["hdfs://x/y", /scheme 'hdfs:\/\/' is not supported/],
    ];
    for (const [text, why] of refused) {
      assert.throws(
        () => parseStorageLocation(text),
        (error: unknown) => {
          assert.ok(error instanceof StorageLocationError, text);
          assert.match(error.message, why, text);
          return true;
        },
      );
    }
  });

  it("writes each location back as its URI, and appends children", () => {
    for (const text of ["s3://b/p/q", "s3://127.0.0.1:8333/b/p", "s3://https://h:1/b", "gs://b/p", "as://acct/c/p"]) {
      assert.equal(formatStorageLocation(parseStorageLocation(text)), text);
    }
    assert.equal(formatStorageLocation(childLocation(parseStorageLocation("s3://b"), "m/1")), "s3://b/m/1");
    assert.throws(() => childLocation(parseStorageLocation("s3://b/p"), "../x"), StorageLocationError);
  });

  it("says a location lies under another only on the same store and below its prefix", () => {
    const contains = (outer: string, inner: string): boolean =>
      locationContains(parseStorageLocation(outer), parseStorageLocation(inner));
    assert.equal(contains("s3://b/models", "s3://b/models"), true);
    assert.equal(contains("s3://b/models", "s3://b/models/add_sub"), true);
    assert.equal(contains("s3://b", "s3://b/anything/at/all"), true);
    assert.equal(contains("s3://b/models", "s3://b/models2/add_sub"), false, "a prefix of the name is not a folder");
    assert.equal(contains("s3://b/models", "s3://other/models/add_sub"), false);
    assert.equal(contains("s3://127.0.0.1:8333/b/m", "s3://127.0.0.1:9000/b/m/x"), false, "another endpoint");
    assert.equal(contains("s3://127.0.0.1:8333/b/m", "s3://attacker:8333/b/m/x"), false);
    assert.equal(contains("s3://b/m", "s3://127.0.0.1:8333/b/m/x"), false, "AWS is not an endpoint of the same name");
    assert.equal(contains("s3://b/m", "gs://b/m/x"), false);
    assert.equal(contains("as://acct/c/m", "as://acct/c/m/x"), true);
    assert.equal(contains("as://acct/c/m", "as://other/c/m/x"), false);
    assert.equal(contains("/models", "/models/add_sub"), true);
    assert.equal(contains("/models", "/models/../etc"), false);
    assert.equal(contains("/models", "/models-other"), false);
    assert.equal(contains("/models", "s3://b/models"), false);
    assert.equal(contains("s3://b/models", "/models"), false);
  });
});

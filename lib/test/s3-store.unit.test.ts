import assert from "node:assert/strict";
import { storageErrorOf } from "../storage/s3.js";
import { StorageError } from "../storage/store.js";

/** An error as the AWS SDK throws it: S3's code as its name, the HTTP status in $metadata. */
const sdkError = (name: string, status?: number, message = "said the store"): Error =>
  Object.assign(new Error(message), {
    name,
    ...(status !== undefined ? { $metadata: { httpStatusCode: status } } : {}),
  });

describe("S3 store: the SDK's errors as StorageErrors", () => {
  const where = "s3://127.0.0.1:8333/models/repo/add/1/model.onnx";

  it("maps S3's codes, network failures and bare statuses to kinds, naming the store and key", () => {
    const cases: [unknown, StorageError["kind"]][] = [
      [sdkError("AccessDenied", 403), "access-denied"],
      [sdkError("InvalidAccessKeyId", 403), "access-denied"],
      [sdkError("SignatureDoesNotMatch", 403), "access-denied"],
      [sdkError("CredentialsProviderError"), "access-denied"],
      [sdkError("UnknownError", 403), "access-denied"],
      [sdkError("NoSuchBucket", 404), "no-such-bucket"],
      [sdkError("NoSuchKey", 404), "not-found"],
      [sdkError("NotFound", 404), "not-found"],
      [sdkError("PreconditionFailed", 412), "changed"],
      [sdkError("UnknownError", 412), "changed"],
      [Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }), "unreachable"],
      [Object.assign(new Error("getaddrinfo ENOTFOUND nowhere"), { code: "ENOTFOUND" }), "unreachable"],
      [Object.assign(new Error("wrapped"), { cause: { code: "ECONNRESET" } }), "unreachable"],
      [sdkError("TimeoutError"), "unreachable"],
      [
        Object.assign(new Error("unable to verify the first certificate"), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" }),
        "unreachable",
      ],
      [sdkError("InternalError", 500), "other"],
    ];
    for (const [error, kind] of cases) {
      const mapped = storageErrorOf(error, where);
      assert.equal(mapped.kind, kind, (error as Error).name);
      assert.ok(mapped.message.includes(where), mapped.message);
    }
    assert.equal(
      storageErrorOf(sdkError("NoSuchBucket", 404, "The specified bucket does not exist"), "s3://b/").message,
      "no such bucket: s3://b/ (NoSuchBucket, HTTP 404, The specified bucket does not exist)",
    );
  });

  it("passes a StorageError through as it is", () => {
    const error = new StorageError("unsafe-key", "kept");
    assert.equal(storageErrorOf(error, where), error);
  });
});

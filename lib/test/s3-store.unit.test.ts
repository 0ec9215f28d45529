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

  it("maps S3's codes, network and TLS failures and bare statuses to kinds, naming the store and key", () => {
    const cases: [unknown, "list" | "download", StorageError["kind"]][] = [
      [sdkError("AccessDenied", 403), "list", "access-denied"],
      [sdkError("InvalidAccessKeyId", 403), "list", "access-denied"],
      [sdkError("SignatureDoesNotMatch", 403), "download", "access-denied"],
      [sdkError("CredentialsProviderError"), "list", "access-denied"],
      [sdkError("UnknownError", 403), "list", "access-denied"],
      [sdkError("NoSuchBucket", 404), "list", "no-such-bucket"],
      [sdkError("UnknownError", 404), "list", "no-such-bucket"],
      [sdkError("NoSuchKey", 404), "download", "not-found"],
      [sdkError("NotFound", 404), "download", "not-found"],
      [sdkError("PreconditionFailed", 412), "download", "changed"],
      [sdkError("UnknownError", 412), "download", "changed"],
      [Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }), "list", "unreachable"],
      [Object.assign(new Error("getaddrinfo ENOTFOUND nowhere"), { code: "ENOTFOUND" }), "list", "unreachable"],
      [Object.assign(new Error("wrapped"), { cause: { code: "ECONNRESET" } }), "download", "unreachable"],
      [sdkError("TimeoutError"), "list", "unreachable"],
      [
        Object.assign(new Error("unable to verify the first certificate"), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" }),
        "list",
        "unreachable",
      ],
      [sdkError("InternalError", 500), "list", "other"],
    ];
    for (const [error, operation, kind] of cases) {
      const mapped = storageErrorOf(error, where, operation);
      assert.equal(mapped.kind, kind, (error as Error).name);
      assert.ok(mapped.message.startsWith(`${where}: `), mapped.message);
    }
    assert.equal(
      storageErrorOf(sdkError("NoSuchBucket", 404, "The specified bucket does not exist"), "s3://b/", "list").message,
      "s3://b/: no such bucket (NoSuchBucket, HTTP 404, The specified bucket does not exist)",
    );
  });

  it("keeps the credentials out of the message, and passes a StorageError through", () => {
    const echoed = sdkError("SignatureDoesNotMatch", 403, "signed with AKIDEXAMPLE and wJalrXUtnFEMIK7MDENG");
    const mapped = storageErrorOf(echoed, where, "list", ["AKIDEXAMPLE", "wJalrXUtnFEMIK7MDENG"]);
    assert.ok(
      !mapped.message.includes("AKIDEXAMPLE") && !mapped.message.includes("wJalrXUtnFEMIK7MDENG"),
      mapped.message,
    );
    const error = new StorageError("unsafe-key", "kept");
    assert.equal(storageErrorOf(error, where, "download"), error);
  });
});

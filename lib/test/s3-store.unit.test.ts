import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { openS3Store, storageErrorOf } from "../storage/s3.js";
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

describe("S3 store: a listing that never ends", () => {
  let server: Server | undefined;
  afterEach(() => new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined))));

  it("fails when the endpoint hands back a continuation token it gave before (else a poll would page forever)", async function () {
    this.timeout(20_000);
    let pages = 0;
    server = createServer((_request, response) => {
      pages++;
      response.setHeader("content-type", "application/xml");
      response.end(
        `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><Prefix>repo/</Prefix><KeyCount>1</KeyCount>` +
          `<MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>same</NextContinuationToken>` +
          `<Contents><Key>repo/m/config.pbtxt</Key><ETag>"e"</ETag><Size>1</Size></Contents></ListBucketResult>`,
      );
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const store = openS3Store(
      { scheme: "s3", endpoint: `http://127.0.0.1:${port}`, bucket: "b", prefix: "" },
      { secretValues: { AWS_ACCESS_KEY_ID: "id", AWS_SECRET_ACCESS_KEY: "key" }, requestTimeoutMs: 2000 },
    );
    const listing = async (): Promise<number> => {
      let entries = 0;
      for await (const _entry of store.list("repo/")) if (++entries > 100) break;
      return entries;
    };
    try {
      await assert.rejects(listing(), { name: "StorageError", message: /continuation token/ });
      assert.ok(pages <= 3, `${pages} pages asked for`);
    } finally {
      await store.close();
    }
  });
});

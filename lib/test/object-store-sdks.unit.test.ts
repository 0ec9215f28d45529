import { RestError } from "@azure/storage-blob";
import { ApiError } from "@google-cloud/storage";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { PassThrough } from "node:stream";
import { azureAccess, azureErrorKind, isDirectoryBlob, openAzureStore } from "../storage/azure.js";
import { ClientForCredentials, readCredentials } from "../storage/credentials.js";
import { gcsErrorKind, gcsStorageOptions, newGcsClient, openGcsStore } from "../storage/gcs.js";
import { StorageError, type ObjectStore } from "../storage/store.js";
import { folderPrefix, isNetworkFailure, safeErrorText, streamToFile, withDeadline } from "../storage/transfer.js";

/** What the gs:// and as:// stores decide without a server: endpoints, credentials, error kinds. */

const AS_LOCATION = { scheme: "as", account: "acct1", container: "models", prefix: "repo" } as const;
const KEY = Buffer.from("an account key of some length").toString("base64");

describe("object stores without a server (lib/storage/{credentials,transfer,gcs,azure}.ts)", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-store-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  describe("credentials", () => {
    it("reads the keys present in a Secret's folder, trimmed, and skips the absent and the empty", async () => {
      writeFileSync(join(dir, "AZURE_STORAGE_ACCOUNT_KEY"), `${KEY}\n`);
      writeFileSync(join(dir, "AZURE_STORAGE_SAS_TOKEN"), "  \n");
      const read = await readCredentials({ secretDir: dir }, [
        "AZURE_STORAGE_CONNECTION_STRING",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_SAS_TOKEN",
      ]);
      assert.deepEqual(read, { AZURE_STORAGE_ACCOUNT_KEY: KEY });
    });

    it("takes given values over the folder, and the default chain (nothing) without either", async () => {
      writeFileSync(join(dir, "service-account.json"), "{}");
      const keys = ["service-account.json"];
      assert.deepEqual(await readCredentials({ secretDir: dir, secretValues: {} }, keys), {});
      assert.deepEqual(await readCredentials({ secretValues: { "service-account.json": "{1}" } }, keys), {
        "service-account.json": "{1}",
      });
      assert.deepEqual(await readCredentials({}, keys), {});
    });

    it("builds the client again when a credential file changes, and only then", async () => {
      const file = join(dir, "AZURE_STORAGE_SAS_TOKEN");
      writeFileSync(file, "sv=1&sig=first");
      const built: string[] = [];
      const clients = new ClientForCredentials(
        "as://a/c",
        { secretDir: dir },
        ["AZURE_STORAGE_SAS_TOKEN"],
        (values) => {
          built.push(values["AZURE_STORAGE_SAS_TOKEN"] ?? "none");
          return { token: values["AZURE_STORAGE_SAS_TOKEN"] };
        },
      );
      const first = await clients.current();
      assert.equal(await clients.current(), first);
      writeFileSync(file, "sv=1&sig=rotated");
      assert.deepEqual(await clients.current(), { token: "sv=1&sig=rotated" });
      rmSync(file);
      await clients.current();
      assert.deepEqual(built, ["sv=1&sig=first", "sv=1&sig=rotated", "none"]);
    });
  });

  describe("Azure endpoints and credentials", () => {
    it("defaults to the account's public endpoint, or the given one with {account} replaced", () => {
      assert.equal(azureAccess(AS_LOCATION, {}, {}).containerUrl, "https://acct1.blob.core.windows.net/models");
      const azurite = azureAccess(AS_LOCATION, { azureEndpoint: "http://127.0.0.1:10000/{account}/" }, {});
      assert.equal(azurite.containerUrl, "http://127.0.0.1:10000/acct1/models");
      // No credential: the default chain (DefaultAzureCredential) is loaded when the store is used.
      assert.equal(azurite.credential, undefined);
    });

    it("uses an account key as a shared key for the location's account", () => {
      const access = azureAccess(AS_LOCATION, {}, { AZURE_STORAGE_ACCOUNT_KEY: KEY });
      assert.equal(access.credential?.constructor.name, "StorageSharedKeyCredential");
      assert.equal((access.credential as { accountName?: string }).accountName, "acct1");
    });

    it("appends a SAS token as the URL's query, with or without its leading '?'", () => {
      for (const sas of ["sv=2024&sig=abc%3D", "?sv=2024&sig=abc%3D"]) {
        const access = azureAccess(AS_LOCATION, {}, { AZURE_STORAGE_SAS_TOKEN: sas });
        assert.equal(access.containerUrl, "https://acct1.blob.core.windows.net/models?sv=2024&sig=abc%3D");
        assert.equal(access.credential?.constructor.name, "AnonymousCredential");
      }
    });

    it("takes a connection string first, its BlobEndpoint over the configured endpoint", () => {
      const withEndpoint = `DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=${KEY};BlobEndpoint=http://azurite:10000/dev;`;
      const access = azureAccess(
        AS_LOCATION,
        { azureEndpoint: "http://elsewhere/{account}" },
        { AZURE_STORAGE_CONNECTION_STRING: withEndpoint, AZURE_STORAGE_SAS_TOKEN: "sig=unused" },
      );
      assert.equal(access.containerUrl, "http://azurite:10000/dev/models");
      assert.equal((access.credential as { accountName?: string }).accountName, "dev");
      const sasOnly = azureAccess(
        AS_LOCATION,
        {},
        { AZURE_STORAGE_CONNECTION_STRING: "SharedAccessSignature=sv=1&sig=x" },
      );
      assert.equal(sasOnly.containerUrl, "https://acct1.blob.core.windows.net/models?sv=1&sig=x");
    });

    it("leaves out the directories a hierarchical-namespace account lists as empty blobs", () => {
      assert.ok(isDirectoryBlob({ metadata: { hdi_isfolder: "true" } }));
      assert.ok(!isDirectoryBlob({ metadata: {} }));
      assert.ok(!isDirectoryBlob({}));
    });

    it("refuses a connection string with neither key nor signature, without echoing it", () => {
      const connectionString = "AccountName=acct1;EndpointSuffix=core.windows.net;Secretish=hunter22";
      assert.throws(
        () => azureAccess(AS_LOCATION, {}, { AZURE_STORAGE_CONNECTION_STRING: connectionString }),
        (error: unknown) =>
          error instanceof StorageError && error.kind === "access-denied" && !error.message.includes("hunter22"),
      );
    });
  });

  describe("GCS endpoint and credentials", () => {
    it("sends no token to a custom endpoint without a service account (an emulator), and one with it", () => {
      const anonymous = gcsStorageOptions({ gcsEndpoint: "http://127.0.0.1:4443/" }, undefined, "gs://b");
      assert.equal(anonymous.apiEndpoint, "http://127.0.0.1:4443");
      assert.equal(anonymous.useAuthWithCustomEndpoint, undefined);
      assert.equal(anonymous.credentials, undefined);
      const serviceAccount = JSON.stringify({ type: "service_account", client_email: "a@b", private_key: "k" });
      const authenticated = gcsStorageOptions({ gcsEndpoint: "https://private.example" }, serviceAccount, "gs://b");
      assert.equal(authenticated.useAuthWithCustomEndpoint, true);
      assert.equal((authenticated.credentials as { client_email?: string }).client_email, "a@b");
    });

    it("bounds the SDK's retries by the request timeout", () => {
      const options = gcsStorageOptions({ requestTimeoutMs: 4_500 }, undefined, "gs://b");
      assert.equal(options.timeout, 4_500);
      assert.equal(options.retryOptions?.totalTimeout, 5);
    });

    it("refuses a service-account.json that is not a JSON object, without echoing it", () => {
      assert.throws(
        () => gcsStorageOptions({}, "-----BEGIN PRIVATE KEY----- hunter22", "gs://b"),
        (error: unknown) =>
          error instanceof StorageError && error.kind === "access-denied" && !error.message.includes("hunter22"),
      );
    });

    it("lets --gcs-endpoint win over STORAGE_EMULATOR_HOST, which is used without it", () => {
      const saved = process.env["STORAGE_EMULATOR_HOST"];
      process.env["STORAGE_EMULATOR_HOST"] = "http://emulator-from-env:9023";
      try {
        const explicit = newGcsClient(gcsStorageOptions({ gcsEndpoint: "http://fake-gcs:4443" }, undefined, "gs://b"));
        assert.equal(explicit.baseUrl, "http://fake-gcs:4443/storage/v1");
        const fromEnvironment = newGcsClient(gcsStorageOptions({}, undefined, "gs://b"));
        assert.match(fromEnvironment.baseUrl, /^http:\/\/emulator-from-env:9023/);
      } finally {
        if (saved === undefined) delete process.env["STORAGE_EMULATOR_HOST"];
        else process.env["STORAGE_EMULATOR_HOST"] = saved;
      }
    });
  });

  describe("a listing that never ends", () => {
    /** An endpoint answering every request with `body`, as `contentType`. */
    const answering = async (contentType: string, body: string): Promise<{ url: string; close(): Promise<void> }> => {
      const server = createServer((_request, response) => {
        response.writeHead(200, { "content-type": contentType });
        response.end(body);
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const { port } = server.address() as AddressInfo;
      return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
    };
    const firstHundred = async (store: ObjectStore): Promise<void> => {
      let entries = 0;
      for await (const _entry of store.list("repo/")) if (++entries >= 100) break;
    };
    const repeated = { name: "StorageError", message: /repeated a continuation token/ };

    it("fails when the GCS endpoint hands back a page token it gave before", async () => {
      const endpoint = await answering(
        "application/json",
        JSON.stringify({
          kind: "storage#objects",
          nextPageToken: "same",
          items: [{ name: "repo/m/config.pbtxt", size: "1", generation: "1" }],
        }),
      );
      try {
        const store = openGcsStore(
          { scheme: "gs", bucket: "models", prefix: "" },
          { gcsEndpoint: endpoint.url, requestTimeoutMs: 5_000 },
        );
        await assert.rejects(firstHundred(store), repeated);
      } finally {
        await endpoint.close();
      }
    });

    it("fails when the Azure endpoint hands back a marker it gave before", async () => {
      const endpoint = await answering(
        "application/xml",
        `<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="x" ContainerName="c"><Prefix>repo/</Prefix><MaxResults>5000</MaxResults>` +
          `<Blobs><Blob><Name>repo/m/config.pbtxt</Name><Properties><Content-Length>1</Content-Length><Etag>"e"</Etag><BlobType>BlockBlob</BlobType></Properties></Blob></Blobs>` +
          `<NextMarker>same</NextMarker></EnumerationResults>`,
      );
      try {
        const store = openAzureStore(
          { scheme: "as", account: "devstoreaccount1", container: "c", prefix: "" },
          {
            azureEndpoint: `${endpoint.url}/{account}`,
            requestTimeoutMs: 5_000,
            secretValues: { AZURE_STORAGE_SAS_TOKEN: "sv=1&sig=x" },
          },
        );
        await assert.rejects(firstHundred(store), repeated);
      } finally {
        await endpoint.close();
      }
    });
  });

  describe("GCS preconditions", () => {
    it("asks for the listed generation (ifGenerationMatch) and reads the JSON API's 412 as changed", async () => {
      // fake-gcs-server ignores ifGenerationMatch on reads (the conformance suite checks the
      // generation header instead): here, the request itself and Cloud Storage's answer to it.
      const requests: string[] = [];
      const server = createServer((request, response) => {
        requests.push(request.url ?? "");
        response.writeHead(412, { "content-type": "application/json" });
        response.end(
          JSON.stringify({
            error: { code: 412, message: "At least one of the pre-conditions you specified did not hold." },
          }),
        );
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      try {
        const { port } = server.address() as AddressInfo;
        const store = openGcsStore(
          { scheme: "gs", bucket: "models", prefix: "" },
          { gcsEndpoint: `http://127.0.0.1:${port}`, requestTimeoutMs: 5_000 },
        );
        const entry = { key: "repo/m/1/model.onnx", size: 4, version: "1700000000000001" };
        await assert.rejects(
          store.download(entry, join(dir, "out")),
          (error: unknown) =>
            error instanceof StorageError && error.kind === "changed" && /repo\/m\/1\/model\.onnx/.test(error.message),
        );
        const url = new URL(requests[0] ?? "", "http://x");
        assert.equal(url.pathname, "/storage/v1/b/models/o/repo%2Fm%2F1%2Fmodel.onnx");
        assert.equal(url.searchParams.get("alt"), "media");
        assert.equal(url.searchParams.get("ifGenerationMatch"), entry.version);
        await store.close();
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });

  describe("error kinds", () => {
    const gcs = (code: number, message = "x"): ApiError => Object.assign(new ApiError(message), { code });
    const connectionRefused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });

    it("maps the JSON API's statuses, the list's 404 to the bucket and the download's to the object", () => {
      const table: [unknown, "list" | "download", string][] = [
        [gcs(401), "list", "access-denied"],
        [gcs(403), "download", "access-denied"],
        [gcs(404, "The specified bucket does not exist."), "list", "no-such-bucket"],
        [gcs(404, "No such object: b/k"), "download", "not-found"],
        [gcs(404, "The specified bucket does not exist."), "download", "no-such-bucket"],
        [gcs(412), "download", "changed"],
        [gcs(500), "list", "other"],
        [connectionRefused, "list", "unreachable"],
        [new Error("Could not load the default credentials."), "list", "access-denied"],
      ];
      for (const [error, operation, kind] of table)
        assert.equal(gcsErrorKind(error, operation), kind, `${String(error)} (${operation})`);
    });

    it("maps Blob service error codes first, then statuses and network failures", () => {
      const rest = (statusCode: number, code?: string): RestError =>
        new RestError("x", code === undefined ? { statusCode } : { statusCode, code });
      const table: [unknown, "list" | "download", string][] = [
        [rest(404, "ContainerNotFound"), "download", "no-such-bucket"],
        [rest(404, "BlobNotFound"), "download", "not-found"],
        [rest(404), "list", "no-such-bucket"],
        [rest(412, "ConditionNotMet"), "download", "changed"],
        [rest(403, "AuthenticationFailed"), "list", "access-denied"],
        [rest(403, "AuthorizationFailure"), "list", "access-denied"],
        [rest(403, "AuthorizationPermissionMismatch"), "download", "access-denied"],
        [rest(401), "list", "access-denied"],
        [rest(500, "InternalError"), "list", "other"],
        [new RestError("connect ECONNREFUSED", { code: "ECONNREFUSED" }), "list", "unreachable"],
        [new RestError("send failed", { code: "REQUEST_SEND_ERROR" }), "download", "unreachable"],
        [Object.assign(new Error("no credential"), { name: "CredentialUnavailableError" }), "list", "access-denied"],
        [Object.assign(new Error("chain failed"), { name: "AggregateAuthenticationError" }), "list", "access-denied"],
        [
          new Error("Bearer token authentication is not permitted for non-TLS protected (non-https) URLs."),
          "list",
          "access-denied",
        ],
      ];
      for (const [error, operation, kind] of table)
        assert.equal(azureErrorKind(error, operation), kind, `${String(error)} (${operation})`);
    });

    it("finds a network failure inside causes and aggregates", () => {
      assert.ok(isNetworkFailure(new Error("fetch failed", { cause: connectionRefused })));
      assert.ok(isNetworkFailure(new AggregateError([connectionRefused], "every address refused")));
      assert.ok(!isNetworkFailure(new Error("plain")));
    });
  });

  describe("error text", () => {
    it("keeps the first line and hides credential values, signatures and keys", () => {
      const sas = "sv=2024-08-04&ss=b&sig=AbCdEf%2Bghij%3D";
      const message = `GET https://a.blob.core.windows.net/c?${sas} failed: AccountKey=${KEY}; Bearer eyJhbGciOiJSUzI1NiJ9.payload\nsecond line`;
      const text = safeErrorText(new Error(message), [sas]);
      assert.ok(!text.includes("AbCdEf"), text);
      assert.ok(!text.includes(KEY), text);
      assert.ok(!text.includes("eyJhbGciOiJSUzI1NiJ9"), text);
      assert.ok(!text.includes("second line"), text);
      assert.match(text, /^GET https:\/\/a\.blob\.core\.windows\.net\/c\?\*\*\* failed/);
      // Words are left alone.
      assert.equal(
        safeErrorText(new Error("Bearer token authentication is not permitted"), []),
        "Bearer token authentication is not permitted",
      );
    });
  });

  describe("listing and streaming", () => {
    it("lists whole folders only", () => {
      assert.equal(folderPrefix(""), "");
      assert.equal(folderPrefix("models/a"), "models/a/");
      assert.equal(folderPrefix("models/a/"), "models/a/");
    });

    it("streams a body to a file and counts its bytes", async () => {
      const body = new PassThrough();
      const file = join(dir, "out");
      const done = streamToFile(body, file, 1_000, () => "test");
      body.write(Buffer.alloc(70_000, 1));
      body.end(Buffer.alloc(5, 2));
      assert.equal(await done, 70_005);
      assert.equal(readFileSync(file).length, 70_005);
    });

    it("fails a body that stalls as unreachable", async () => {
      const body = new PassThrough();
      body.write("a");
      const started = Date.now();
      await assert.rejects(
        streamToFile(body, join(dir, "out"), 200, () => "gs://b: downloading 'k'"),
        (error: unknown) =>
          error instanceof StorageError && error.kind === "unreachable" && /no data for 200 ms/.test(error.message),
      );
      assert.ok(Date.now() - started < 2_000);
    });

    it("fails a request with no answer within the deadline as unreachable, and aborts it", async () => {
      let aborted = false;
      await assert.rejects(
        withDeadline(
          100,
          () => "as://a/c: listing ''",
          undefined,
          (signal) => {
            signal.addEventListener("abort", () => (aborted = true));
            return new Promise<never>(() => undefined);
          },
        ),
        (error: unknown) => error instanceof StorageError && error.kind === "unreachable",
      );
      assert.ok(aborted);
      assert.equal(
        await withDeadline(
          1_000,
          () => "",
          undefined,
          () => Promise.resolve(7),
        ),
        7,
      );
    });
  });
});

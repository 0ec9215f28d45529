import { readFileSync } from "node:fs";
import { Agent as HttpsAgent } from "node:https";
import type { Readable } from "node:stream";
import { rootCertificates } from "node:tls";
import { GetObjectCommand, ListObjectsV2Command, S3Client, type S3ClientConfig } from "@aws-sdk/client-s3";
import { readCredentials } from "./credentials.js";
import { formatStorageLocation, type RemoteLocation } from "./locations.js";
import { CREDENTIAL_KEYS, StorageError, type ObjectEntry, type ObjectStore, type ObjectStoreOptions } from "./store.js";
// The stores' shared handling around their SDKs: deadlines, streaming, error text.
import * as transfer from "./transfer.js";

type S3Location = Extract<RemoteLocation, { scheme: "s3" }>;

/** The region when none is configured (MinIO, SeaweedFS, Ceph accept any; AWS redirects). */
const FALLBACK_REGION = "us-east-1";

/**
 * An S3 bucket (AWS or S3-compatible) through @aws-sdk/client-s3: the SDK signs, retries and
 * finds credentials; this file chooses the endpoint, region, addressing and credentials from
 * the location and the options, and turns the SDK's errors into StorageErrors.
 */
export function openS3Store(location: S3Location, options: ObjectStoreOptions): ObjectStore {
  const name = formatStorageLocation({ ...location, prefix: "" });
  const credentials = new S3Credentials(options);
  const client = new S3Client(clientConfig(location, options, credentials));
  const calls: S3Calls = {
    client,
    bucket: location.bucket,
    timeoutMs: transfer.requestTimeoutMs(options),
    credentials,
  };
  return {
    name,
    list: (prefix, signal) => listObjects(calls, `${name}/${prefix}`, prefix, signal),
    download: (entry, file, signal) => downloadObject(calls, `${name}/${entry.key}`, entry, file, signal),
    close: async () => client.destroy(),
  };
}

/** What each call needs: the client, the bucket, the deadline, and the credentials (to keep out of messages). */
interface S3Calls {
  readonly client: S3Client;
  readonly bucket: string;
  readonly timeoutMs: number;
  readonly credentials: S3Credentials;
}

function clientConfig(location: S3Location, options: ObjectStoreOptions, credentials: S3Credentials): S3ClientConfig {
  const endpoint = location.endpoint ?? options.s3Endpoint;
  const timeout = transfer.requestTimeoutMs(options);
  return {
    region: options.s3Region ?? sdkRegionOrFallback(),
    ...(endpoint !== undefined ? { endpoint } : {}),
    // An endpoint in the URI is an S3-compatible store: bucket names in the path, as Triton does.
    forcePathStyle: location.endpoint !== undefined || options.s3PathStyle === true,
    // AWS answers a bucket of another region with a redirect the SDK can follow.
    followRegionRedirects: endpoint === undefined,
    ...(credentials.given ? { credentials: () => credentials.current() } : {}),
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

type AwsCredentials = { accessKeyId: string; secretAccessKey: string; sessionToken?: string; expiration: Date };

/**
 * Credentials given as values (the operator's check) or as a mounted Secret's files, read
 * again on every request the SDK signs: each answer says it expires now, so the SDK never
 * keeps it, and a rotated Secret takes effect on the next request. Neither given: the SDK's
 * default chain (environment, shared files, web identity / IRSA, container, instance).
 */
class S3Credentials {
  /** The values last read, kept out of every message. */
  private known: readonly string[];

  constructor(private readonly options: ObjectStoreOptions) {
    this.known = Object.values(options.secretValues ?? {});
  }

  get given(): boolean {
    return this.options.secretValues !== undefined || this.options.secretDir !== undefined;
  }

  get secrets(): readonly string[] {
    return this.known;
  }

  async current(): Promise<AwsCredentials> {
    const values = await readCredentials(this.options, CREDENTIAL_KEYS.s3);
    this.known = Object.values(values);
    const accessKeyId = values["AWS_ACCESS_KEY_ID"];
    const secretAccessKey = values["AWS_SECRET_ACCESS_KEY"];
    if (accessKeyId === undefined || secretAccessKey === undefined) {
      const where =
        this.options.secretDir !== undefined ? `the folder '${this.options.secretDir}'` : "the values given";
      throw new StorageError("access-denied", `no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in ${where}`);
    }
    const sessionToken = values["AWS_SESSION_TOKEN"];
    return {
      accessKeyId,
      secretAccessKey,
      ...(sessionToken !== undefined ? { sessionToken } : {}),
      expiration: new Date(),
    };
  }
}

async function* listObjects(
  { client, bucket, timeoutMs, credentials }: S3Calls,
  where: string,
  prefix: string,
  signal: AbortSignal | undefined,
): AsyncIterable<ObjectEntry> {
  let token: string | undefined;
  const checkToken = transfer.continuationGuard(() => where);
  do {
    const page = await transfer
      .withDeadline(
        timeoutMs,
        () => where,
        signal,
        (abortSignal) =>
          client.send(
            // Keys URL-encoded: XML cannot carry every character a key may hold (a control character).
            new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token, EncodingType: "url" }),
            { abortSignal },
          ),
      )
      .catch((error: unknown) => {
        throw storageErrorOf(error, where, "list", credentials.secrets);
      });
    // A store that ignores the encoding says so by not echoing it: its keys came as they are.
    const encoded = page.EncodingType === "url";
    for (const object of page.Contents ?? []) {
      if (object.Key === undefined) continue;
      const key = encoded ? decodeKey(object.Key) : object.Key;
      yield { key, size: object.Size ?? 0, version: object.ETag ?? "" };
    }
    token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    checkToken(token);
  } while (token !== undefined);
}

/** A key as a listing with EncodingType=url gives it (form encoding: '+' may stand for a space). */
function decodeKey(key: string): string {
  return decodeURIComponent(key.replace(/\+/g, "%20"));
}

/** Streams the object into `file` (never whole in memory), on the condition that it is still the version listed. */
async function downloadObject(
  { client, bucket, timeoutMs, credentials }: S3Calls,
  where: string,
  entry: ObjectEntry,
  file: string,
  signal: AbortSignal | undefined,
): Promise<number> {
  try {
    const object = await transfer.withDeadline(
      timeoutMs,
      () => where,
      signal,
      (abortSignal) =>
        client.send(
          new GetObjectCommand({
            Bucket: bucket,
            Key: entry.key,
            ...(entry.version !== "" ? { IfMatch: entry.version } : {}),
          }),
          { abortSignal },
        ),
    );
    const body = object.Body as Readable | undefined;
    if (body === undefined) throw transfer.storageFailure("other", where, "the store sent no body");
    return await transfer.streamToFile(body, file, timeoutMs, () => where, signal);
  } catch (error) {
    throw storageErrorOf(error, where, "download", credentials.secrets);
  }
}

/** S3's error codes (the SDK's error names) and TLS's, by the kind they mean. */
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
  PreconditionFailed: "changed",
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

/**
 * The StorageError an SDK error means, naming the store and key (`where`) and the SDK's
 * code and message, with every credential value kept out.
 */
export function storageErrorOf(
  error: unknown,
  where: string,
  operation: "list" | "download",
  secrets: readonly string[] = [],
): StorageError {
  if (error instanceof StorageError) return error;
  const fields = (error ?? {}) as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } };
  const code = [fields.name, fields.code].find((name) => name !== undefined && KINDS_BY_CODE[name] !== undefined);
  const status = fields.$metadata?.httpStatusCode;
  const kind =
    (code !== undefined ? KINDS_BY_CODE[code] : undefined) ??
    (transfer.isNetworkFailure(error) ? "unreachable" : undefined) ??
    transfer.statusKind(status, operation) ??
    "other";
  const said = [
    fields.code ?? fields.name,
    status !== undefined ? `HTTP ${status}` : undefined,
    transfer.safeErrorText(error, secrets),
  ].filter(
    (part) => part !== undefined && part !== "" && part !== "UnknownError" && part !== "Unknown" && part !== "Error",
  );
  return transfer.storageFailure(kind, where, said.join(", "));
}

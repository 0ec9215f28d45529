import type { RemoteScheme } from "./locations.js";

/**
 * The credential keys each scheme's store reads from a Secret (its values, or its files in
 * --storage-secret-dir); the operator reads the same keys from the Secret it checks with.
 */
export const CREDENTIAL_KEYS = {
  s3: ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"],
  gs: ["service-account.json"],
  as: ["AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN"],
} as const satisfies { readonly [S in RemoteScheme]: readonly string[] };

/**
 * One object store, as the data plane's model cache, the operator's access check and migrate
 * need it: list a prefix, download one object to a file. Each scheme's implementation
 * (s3.ts, gcs.ts, azure.ts) wraps that cloud's maintained SDK — signing, retries and the
 * credential chain are the SDK's — and is loaded only when a location of its scheme is used
 * (`openObjectStore`, in open.ts: each store imports this file, so this one imports none of
 * them), so a process that never reads a bucket never maps an SDK.
 */
export interface ObjectStore {
  /** What the store is (`s3://host:port/bucket`, `gs://bucket`, ...), for messages; never holds credentials. */
  readonly name: string;
  /**
   * Every object under `prefix` ("" for the whole bucket or container; otherwise a key prefix
   * ending with "/"), in pages as the store returns them. Folder markers (keys ending with
   * "/", size 0) are included as listed; callers skip them.
   */
  list(prefix: string, signal?: AbortSignal): AsyncIterable<ObjectEntry>;
  /**
   * Streams one object to `file` (created or truncated), with memory bounded by the stream's
   * buffers whatever the object's size. With `entry.version`, the download is conditional on
   * it (S3 If-Match on the ETag, GCS ifGenerationMatch, Azure If-Match): an object rewritten
   * since it was listed fails with kind "changed", never a mix of two versions. Returns the
   * bytes written.
   */
  download(entry: ObjectEntry, file: string, signal?: AbortSignal): Promise<number>;
  /** Releases the SDK's connections. */
  close(): Promise<void>;
}

export interface ObjectEntry {
  /** The full key, as the store lists it. */
  readonly key: string;
  readonly size: number;
  /** What changes whenever the object's bytes do: the ETag (S3, Azure) or generation (GCS). */
  readonly version: string;
}

/** How the stores are reached: the data plane's MODEL_STORAGE_OPTIONS, or what the operator read from a CR. */
export interface ObjectStoreOptions {
  /**
   * Credential files (a mounted Secret's folder), read again when they change: AWS_ACCESS_KEY_ID,
   * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; service-account.json; AZURE_STORAGE_CONNECTION_STRING,
   * AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN. Absent: each SDK's standard chain.
   */
  readonly secretDir?: string;
  /**
   * Credentials given as values (the operator's check, with a Secret it read), the same keys
   * as the files of `secretDir`. Never logged.
   */
  readonly secretValues?: Readonly<Record<string, string>>;
  /** PEM certificates trusted for https endpoints besides the system's. */
  readonly caFile?: string;
  readonly s3Endpoint?: string;
  readonly s3Region?: string;
  readonly s3PathStyle?: boolean;
  readonly gcsEndpoint?: string;
  /** With `{account}` standing for the storage account. */
  readonly azureEndpoint?: string;
  /** How long one request may wait for the store before it fails as "unreachable" (default 30 s). */
  readonly requestTimeoutMs?: number;
}

/** What went wrong with a store, in the words a CR condition and a load error use. */
export type StorageErrorKind =
  /** Credentials refused or missing, or no permission on the bucket. */
  | "access-denied"
  | "no-such-bucket"
  /** The endpoint refused, timed out or could not be resolved. */
  | "unreachable"
  /** The object is gone (deleted between listing and download). */
  | "not-found"
  /** The object was rewritten between listing and download. */
  | "changed"
  /** A key that cannot be a file under the cache (`..`, absolute, control characters). */
  | "unsafe-key"
  /** The cache's --model-cache-max-bytes would be passed. */
  | "cache-full"
  | "other";

export class StorageError extends Error {
  override readonly name = "StorageError";
  constructor(
    readonly kind: StorageErrorKind,
    message: string,
  ) {
    super(message);
  }
}

import { ApiError, Storage, type File, type StorageOptions } from "@google-cloud/storage";
import { readFile } from "node:fs/promises";
import { getCACertificates, setDefaultCACertificates } from "node:tls";
import { ClientForCredentials } from "./credentials.js";
import { formatStorageLocation, type RemoteLocation } from "./locations.js";
import {
  CREDENTIAL_KEYS,
  StorageError,
  type ObjectEntry,
  type ObjectStore,
  type ObjectStoreOptions,
  type StorageErrorKind,
} from "./store.js";
import {
  folderPrefix,
  isNetworkFailure,
  requestTimeoutMs,
  safeErrorText,
  statusKind,
  storageFailure,
  streamToFile,
  continuationGuard,
  withDeadline,
} from "./transfer.js";

type GcsLocation = Extract<RemoteLocation, { scheme: "gs" }>;

/** How many objects one list request asks for (the JSON API's most is 1000). */
const LIST_PAGE_SIZE = 1000;

/**
 * A Cloud Storage bucket through @google-cloud/storage.
 *
 * The endpoint: `options.gcsEndpoint` when given (an emulator such as fake-gcs-server, or a
 * private endpoint); else STORAGE_EMULATOR_HOST as the SDK reads it; else Google's. Credentials:
 * `service-account.json` from the Secret (values or folder, read again when it changes); else,
 * against Google's endpoint, the SDK's Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
 * gcloud's file, workload identity through the metadata server). A custom endpoint without a
 * service account is used unauthenticated: an emulator needs no token, and asking the metadata
 * server for one would wait for a server that is not there.
 */
export function openGcsStore(location: GcsLocation, options: ObjectStoreOptions): ObjectStore {
  return new GcsStore(location, options);
}

class GcsStore implements ObjectStore {
  readonly name: string;
  private readonly timeoutMs: number;
  private readonly clients: ClientForCredentials<{ readonly storage: Storage; readonly secrets: readonly string[] }>;

  constructor(
    private readonly location: GcsLocation,
    options: ObjectStoreOptions,
  ) {
    this.name = formatStorageLocation({ ...location, prefix: "" });
    this.timeoutMs = requestTimeoutMs(options);
    this.clients = new ClientForCredentials(this.name, options, CREDENTIAL_KEYS.gs, async (credentials) => {
      if (options.caFile !== undefined && gcsApiEndpoint(options)?.startsWith("https:") === true)
        await trustCaFile(options.caFile);
      const serviceAccount = credentials["service-account.json"];
      return {
        storage: newGcsClient(gcsStorageOptions(options, serviceAccount, this.name)),
        secrets: serviceAccountSecrets(serviceAccount),
      };
    });
  }

  async *list(prefix: string, signal?: AbortSignal): AsyncIterable<ObjectEntry> {
    const { storage, secrets } = await this.clients.current();
    const bucket = storage.bucket(this.location.bucket);
    const query = { prefix: folderPrefix(prefix), autoPaginate: false, maxResults: LIST_PAGE_SIZE, versions: false };
    const describe = (): string => `${this.name}: listing '${query.prefix}'`;
    let pageToken: string | undefined;
    const checkToken = continuationGuard(describe);
    do {
      const [files, next] = await withDeadline(this.timeoutMs, describe, signal, () =>
        bucket.getFiles(pageToken === undefined ? query : { ...query, pageToken }),
      ).catch((error: unknown) => {
        throw storageErrorOf(error, describe(), "list", secrets);
      });
      for (const file of files) yield entryOf(file);
      pageToken = (next as { pageToken?: string } | null)?.pageToken;
      checkToken(pageToken);
    } while (pageToken !== undefined && pageToken !== "");
  }

  async download(entry: ObjectEntry, file: string, signal?: AbortSignal): Promise<number> {
    const { storage, secrets } = await this.clients.current();
    const describe = (): string => `${this.name}: downloading '${entry.key}'`;
    const object = storage.bucket(this.location.bucket).file(entry.key);
    if (entry.version !== "") {
      // createReadStream takes no preconditions; an interceptor adds the query parameter to
      // its request, so a rewritten object answers 412 instead of its new bytes.
      object.interceptors.push({
        request: (request) => ({
          ...request,
          uri: "uri" in request ? request.uri : request.url,
          qs: { ...(request.qs as object), ifGenerationMatch: entry.version },
        }),
      });
    }
    // crc32c validation (the SDK's default) checks the bytes against the object's stored hash.
    const body = object.createReadStream();
    if (entry.version !== "") {
      // The generation served, checked too: fake-gcs-server ignores ifGenerationMatch on reads.
      body.once("response", (response: { headers?: Record<string, unknown> }) => {
        const served = response.headers?.["x-goog-generation"];
        if (typeof served !== "string" || served === entry.version) return;
        const changed = storageFailure("changed", describe(), `generation ${served}`);
        // After the SDK has piped the response into `body` (it throws on a stream destroyed before).
        process.nextTick(() => body.destroy(changed));
      });
    }
    try {
      // The request starts when the file stream first reads; no byte within the timeout (the
      // SDK's retries included) fails it as unreachable.
      return await streamToFile(body, file, this.timeoutMs, describe, signal);
    } catch (error) {
      body.destroy();
      throw storageErrorOf(error, describe(), "download", secrets);
    }
  }

  async close(): Promise<void> {
    // The SDK holds no connections of its own (it uses Node's shared agents).
  }
}

/** The endpoint requests go to when not Google's: the option, else the SDK's emulator variable. */
export function gcsApiEndpoint(options: ObjectStoreOptions): string | undefined {
  return options.gcsEndpoint ?? process.env["STORAGE_EMULATOR_HOST"];
}

/** The SDK's options for one set of credentials (exported for the unit tests). */
export function gcsStorageOptions(
  options: ObjectStoreOptions,
  serviceAccountJson: string | undefined,
  storeName: string,
): StorageOptions {
  const timeoutMs = requestTimeoutMs(options);
  const storageOptions: StorageOptions = {
    // Per request (an idle timeout while a body streams); the overall bound is withDeadline's.
    timeout: timeoutMs,
    retryOptions: {
      autoRetry: true,
      maxRetries: 2,
      totalTimeout: Math.max(1, Math.ceil(timeoutMs / 1000)),
      maxRetryDelay: 2,
    },
  };
  if (options.gcsEndpoint !== undefined) storageOptions.apiEndpoint = options.gcsEndpoint.replace(/\/+$/, "");
  if (serviceAccountJson !== undefined) {
    storageOptions.credentials = parsedServiceAccount(serviceAccountJson, storeName);
    // A private endpoint still wants Google's tokens; without this the SDK sends none to it.
    storageOptions.useAuthWithCustomEndpoint = true;
  }
  return storageOptions;
}

/** Builds the Storage client (the SDK's STORAGE_EMULATOR_HOST quirk corrected, see below). */
export function newGcsClient(storageOptions: StorageOptions): Storage {
  const storage = new Storage(storageOptions);
  // With STORAGE_EMULATOR_HOST set, the SDK sends JSON API requests there even when apiEndpoint
  // names another endpoint: the explicit option wins here, as options do everywhere else.
  if (storageOptions.apiEndpoint !== undefined) storage.baseUrl = `${storageOptions.apiEndpoint}/storage/v1`;
  return storage;
}

function parsedServiceAccount(json: string, storeName: string): StorageOptions["credentials"] {
  try {
    const parsed = JSON.parse(json) as unknown;
    if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed))
      return parsed as StorageOptions["credentials"];
  } catch {
    // Reported below, without the text (it holds a private key).
  }
  throw new StorageError("access-denied", `${storeName}: service-account.json is not a JSON object`);
}

/** What must never appear in a message: the key and the token's parts of a service account. */
function serviceAccountSecrets(json: string | undefined): readonly string[] {
  if (json === undefined) return [];
  try {
    const { private_key: privateKey, private_key_id: keyId } = JSON.parse(json) as Record<string, unknown>;
    return [json, privateKey, keyId].filter((value): value is string => typeof value === "string");
  } catch {
    return [json];
  }
}

/** The JSON API's generation is the object's version: it changes whenever the bytes do. */
function entryOf(file: File): ObjectEntry {
  return { key: file.name, size: Number(file.metadata.size ?? 0), version: String(file.metadata.generation ?? "") };
}

/** The kind of a failure from @google-cloud/storage (exported for the unit tests). */
export function gcsErrorKind(error: unknown, operation: "list" | "download"): StorageErrorKind {
  if (error instanceof StorageError) return error.kind;
  if (isNetworkFailure(error)) return "unreachable";
  const status = error instanceof ApiError ? error.code : (error as { code?: unknown } | undefined)?.code;
  const message = error instanceof Error ? error.message : "";
  // A download's 404 is the object's unless it says otherwise.
  if (status === 404 && /bucket does not exist/i.test(message)) return "no-such-bucket";
  const byStatus = statusKind(status, operation);
  if (byStatus !== undefined) return byStatus;
  // google-auth-library's failures to find or use credentials (no HTTP status of the store's).
  if (/default credentials|invalid_grant|invalid_client|unauthorized_client|private key/i.test(message))
    return "access-denied";
  return "other";
}

function storageErrorOf(
  error: unknown,
  what: string,
  operation: "list" | "download",
  secrets: readonly string[],
): StorageError {
  if (error instanceof StorageError) return error;
  const status = error instanceof ApiError && error.code !== undefined ? `${error.code} ` : "";
  return storageFailure(gcsErrorKind(error, operation), what, `${status}${safeErrorText(error, secrets)}`);
}

const trustedCaFiles = new Set<string>();

/**
 * The SDK's HTTP layer takes no TLS options or agent, so a CA for a private https endpoint is
 * added to the process's default trust (what NODE_EXTRA_CA_CERTS does at start): the data plane
 * has one --storage-ca-file, meant for its object-storage endpoints.
 */
async function trustCaFile(caFile: string): Promise<void> {
  const pem = await readFile(caFile, "utf8");
  if (trustedCaFiles.has(pem)) return;
  const certificates = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  setDefaultCACertificates([...getCACertificates("default"), ...certificates]);
  trustedCaFiles.add(pem);
}

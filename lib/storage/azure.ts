import type { TokenCredential } from "@azure/identity";
import {
  AnonymousCredential,
  ContainerClient,
  RestError,
  StorageSharedKeyCredential,
  type BlobItem,
  type ContainerClientOptions,
} from "@azure/storage-blob";
import { readFile } from "node:fs/promises";
import type { Readable } from "node:stream";
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

type AzureLocation = Extract<RemoteLocation, { scheme: "as" }>;

/** The most blobs one list request returns (the service's own most is 5000). */
const LIST_PAGE_SIZE = 1000;

export const DEFAULT_AZURE_ENDPOINT = "https://{account}.blob.core.windows.net";

/**
 * An Azure Blob Storage container through @azure/storage-blob.
 *
 * The endpoint: `options.azureEndpoint` with `{account}` replaced (Azurite:
 * `http://127.0.0.1:10000/{account}`), else `https://{account}.blob.core.windows.net`; a
 * connection string's BlobEndpoint wins over both. Credentials, from the Secret (values or folder,
 * read again when they change), the first present: AZURE_STORAGE_CONNECTION_STRING,
 * AZURE_STORAGE_ACCOUNT_KEY (a shared key for the location's account), AZURE_STORAGE_SAS_TOKEN;
 * else @azure/identity's DefaultAzureCredential (environment, workload identity, managed
 * identity), loaded only then.
 */
export function openAzureStore(location: AzureLocation, options: ObjectStoreOptions): ObjectStore {
  return new AzureStore(location, options);
}

interface AzureClient {
  readonly container: ContainerClient;
  /** The credential values, scrubbed from any message. */
  readonly secrets: readonly string[];
}

class AzureStore implements ObjectStore {
  readonly name: string;
  private readonly timeoutMs: number;
  private readonly clients: ClientForCredentials<AzureClient>;

  constructor(
    private readonly location: AzureLocation,
    options: ObjectStoreOptions,
  ) {
    this.name = formatStorageLocation({ ...location, prefix: "" });
    this.timeoutMs = requestTimeoutMs(options);
    this.clients = new ClientForCredentials(this.name, options, CREDENTIAL_KEYS.as, async (credentials) => {
      const access = azureAccess(location, options, credentials);
      const credential = access.credential ?? (await defaultAzureCredential());
      const clientOptions = await azureClientOptions(options);
      return {
        container: new ContainerClient(access.containerUrl, credential, clientOptions),
        secrets: Object.values(credentials).flatMap(secretParts),
      };
    });
  }

  async *list(prefix: string, signal?: AbortSignal): AsyncIterable<ObjectEntry> {
    const { container, secrets } = await this.clients.current();
    const listPrefix = folderPrefix(prefix);
    const describe = (): string => `${this.name}: listing '${listPrefix}'`;
    const pages = container
      .listBlobsFlat({ includeMetadata: true, ...(listPrefix === "" ? {} : { prefix: listPrefix }) })
      .byPage({ maxPageSize: LIST_PAGE_SIZE });
    const checkToken = continuationGuard(describe);
    for (;;) {
      const page = await withDeadline(this.timeoutMs, describe, signal, () => pages.next()).catch((error: unknown) => {
        throw azureStorageError(error, describe(), "list", secrets);
      });
      if (page.done === true) return;
      for (const blob of page.value.segment.blobItems)
        if (!isDirectoryBlob(blob))
          yield { key: blob.name, size: blob.properties.contentLength ?? 0, version: blob.properties.etag ?? "" };
      checkToken(page.value.continuationToken);
    }
  }

  async download(entry: ObjectEntry, file: string, signal?: AbortSignal): Promise<number> {
    const { container, secrets } = await this.clients.current();
    const describe = (): string => `${this.name}: downloading '${entry.key}'`;
    try {
      // The deadline bounds the wait for the response (retries included), not the body: a large
      // blob streams for as long as bytes keep coming (streamToFile's idle timeout).
      const body = await withDeadline(this.timeoutMs, describe, signal, async (deadline) => {
        const response = await container.getBlobClient(entry.key).download(0, undefined, {
          abortSignal: eitherSignal(deadline, signal),
          // Where the connection breaks mid-body, the SDK resumes from the byte it got to, still
          // conditional on the same ETag.
          maxRetryRequests: 2,
          ...(entry.version === "" ? {} : { conditions: { ifMatch: entry.version } }),
        });
        if (response.readableStreamBody === undefined) throw new StorageError("other", `${describe()}: no body`);
        return response.readableStreamBody as Readable;
      });
      return await streamToFile(body, file, this.timeoutMs, describe, signal);
    } catch (error) {
      const failure = azureStorageError(error, describe(), "download", secrets);
      if (failure.kind === "changed" && !(await this.exists(container, entry.key, signal)))
        throw storageFailure("not-found", describe());
      throw failure;
    }
  }

  /**
   * Whether a blob still exists: an If-Match on a deleted blob answers 412 (Azurite; HTTP's
   * rule), which would otherwise read as "changed".
   */
  private async exists(container: ContainerClient, key: string, signal: AbortSignal | undefined): Promise<boolean> {
    const describe = (): string => `${this.name}: checking '${key}'`;
    return withDeadline(this.timeoutMs, describe, signal, (deadline) =>
      container.getBlobClient(key).exists({ abortSignal: deadline }),
    ).catch(() => true);
  }

  async close(): Promise<void> {
    // The SDK's HTTP client is shared across clients and keeps only idle keep-alive sockets.
  }
}

/**
 * A directory of an account with a hierarchical namespace (Data Lake Storage Gen2): listed as an
 * empty blob named like the folder, without the trailing "/" a folder marker has elsewhere, so
 * it would read as a file beside the folder's contents (exported for the unit tests).
 */
export function isDirectoryBlob(blob: Pick<BlobItem, "metadata">): boolean {
  return blob.metadata?.["hdi_isfolder"]?.toLowerCase() === "true";
}

/**
 * One signal for the SDK's request and its body from the deadline's and the caller's. The
 * deadline's can abort only until the response arrives (withDeadline disarms it then), so it
 * never cuts a long body short; the caller's can abort throughout.
 */
function eitherSignal(deadline: AbortSignal, signal: AbortSignal | undefined): AbortSignal {
  return signal === undefined ? deadline : AbortSignal.any([deadline, signal]);
}

/** Where requests go and with which credential; undefined credential: the default chain. */
export interface AzureAccess {
  readonly containerUrl: string;
  readonly credential: StorageSharedKeyCredential | AnonymousCredential | undefined;
}

/** The container's URL and credential for one set of credential values (exported for the unit tests). */
export function azureAccess(
  location: AzureLocation,
  options: ObjectStoreOptions,
  credentials: Readonly<Record<string, string>>,
): AzureAccess {
  const endpoint = (options.azureEndpoint ?? DEFAULT_AZURE_ENDPOINT).replaceAll("{account}", location.account);
  const connectionString = credentials["AZURE_STORAGE_CONNECTION_STRING"];
  if (connectionString !== undefined) return connectionStringAccess(location, endpoint, connectionString);
  const accountKey = credentials["AZURE_STORAGE_ACCOUNT_KEY"];
  if (accountKey !== undefined)
    return {
      containerUrl: containerUrl(endpoint, location.container),
      credential: new StorageSharedKeyCredential(location.account, accountKey),
    };
  const sas = credentials["AZURE_STORAGE_SAS_TOKEN"];
  if (sas !== undefined)
    return { containerUrl: containerUrl(endpoint, location.container, sas), credential: new AnonymousCredential() };
  return { containerUrl: containerUrl(endpoint, location.container), credential: undefined };
}

/**
 * A connection string's parts (`Key=value;...`, as the portal writes it): its BlobEndpoint, else
 * the endpoint the location names; AccountKey (with its AccountName) or SharedAccessSignature.
 */
function connectionStringAccess(location: AzureLocation, endpoint: string, connectionString: string): AzureAccess {
  const parts = new Map<string, string>();
  for (const part of connectionString.split(";")) {
    const equals = part.indexOf("=");
    if (equals > 0) parts.set(part.slice(0, equals).trim().toLowerCase(), part.slice(equals + 1).trim());
  }
  const blobEndpoint = parts.get("blobendpoint") ?? endpoint;
  const accountKey = parts.get("accountkey");
  const sas = parts.get("sharedaccesssignature");
  if (accountKey !== undefined)
    return {
      containerUrl: containerUrl(blobEndpoint, location.container),
      credential: new StorageSharedKeyCredential(parts.get("accountname") ?? location.account, accountKey),
    };
  if (sas !== undefined)
    return { containerUrl: containerUrl(blobEndpoint, location.container, sas), credential: new AnonymousCredential() };
  throw new StorageError(
    "access-denied",
    `${formatStorageLocation({ ...location, prefix: "" })}: AZURE_STORAGE_CONNECTION_STRING has neither AccountKey nor SharedAccessSignature`,
  );
}

function containerUrl(endpoint: string, container: string, sas?: string): string {
  const query = sas === undefined ? "" : `?${sas.replace(/^\?/, "")}`;
  return `${endpoint.replace(/\/+$/, "")}/${encodeURIComponent(container)}${query}`;
}

/** @azure/identity is large: loaded only when no credential was given. */
async function defaultAzureCredential(): Promise<TokenCredential> {
  const { DefaultAzureCredential } = await import("@azure/identity");
  return new DefaultAzureCredential();
}

/**
 * The SDK's retries bounded so that an unreachable endpoint fails within the request timeout
 * (its default is 4 tries, 4 s apart and growing), and a CA file for https endpoints.
 */
async function azureClientOptions(options: ObjectStoreOptions): Promise<ContainerClientOptions> {
  const timeoutMs = requestTimeoutMs(options);
  const clientOptions: ContainerClientOptions & { tlsOptions?: { ca: string } } = {
    retryOptions: {
      maxTries: 3,
      tryTimeoutInMs: timeoutMs,
      retryDelayInMs: Math.min(500, timeoutMs / 10),
      maxRetryDelayInMs: Math.min(2000, timeoutMs / 4),
    },
  };
  // The storage pipeline hands its options to @azure/core-rest-pipeline's createClientPipeline,
  // whose tlsOptions become the agent's (StoragePipelineOptions does not declare them).
  if (options.caFile !== undefined) clientOptions.tlsOptions = { ca: await readFile(options.caFile, "utf8") };
  return clientOptions;
}

/** A credential value and the secret parts inside it (a connection string's key and signature). */
function secretParts(value: string): string[] {
  const inner = [...value.matchAll(/(?:AccountKey|SharedAccessSignature)=([^;]+)/gi)].map((match) => match[1] ?? "");
  const signature = /(?:^|[?&])sig=([^&]+)/.exec(value)?.[1];
  return [value, ...inner, ...(signature === undefined ? [] : [signature, decodeURIComponent(signature)])];
}

/** The kind of a failure from @azure/storage-blob (exported for the unit tests). */
export function azureErrorKind(error: unknown, operation: "list" | "download"): StorageErrorKind {
  if (error instanceof StorageError) return error.kind;
  const { statusCode, code } =
    error instanceof RestError ? error : ((error ?? {}) as { statusCode?: unknown; code?: unknown });
  switch (code) {
    case "ContainerNotFound":
    case "AccountNotFound":
      return "no-such-bucket";
    case "BlobNotFound":
      return "not-found";
    case "ConditionNotMet":
      return "changed";
    case "AuthenticationFailed":
    case "AuthorizationFailure":
    case "AuthorizationPermissionMismatch":
    case "InsufficientAccountPermissions":
    case "NoAuthenticationInformation":
      return "access-denied";
  }
  if (isNetworkFailure(error)) return "unreachable";
  // An answer without an error code (to a HEAD, say): its status.
  const byStatus = statusKind(statusCode, operation);
  if (byStatus !== undefined) return byStatus;
  // @azure/identity: no credential in the chain worked; or a token for a plain-http endpoint
  // (no credential given for an emulator: the default chain's tokens need https).
  if (isIdentityFailure(error)) return "access-denied";
  if (error instanceof Error && /non-TLS/.test(error.message)) return "access-denied";
  return "other";
}

/** @azure/identity's failures: no credential of the default chain could give a token. */
function isIdentityFailure(error: unknown): boolean {
  return (
    error instanceof Error &&
    /^(CredentialUnavailableError|AuthenticationRequiredError|AggregateAuthenticationError|AuthenticationError)$/.test(
      error.name,
    )
  );
}

function azureStorageError(
  error: unknown,
  what: string,
  operation: "list" | "download",
  secrets: readonly string[],
): StorageError {
  if (error instanceof StorageError) return error;
  const kind = azureErrorKind(error, operation);
  const { statusCode, code } = error instanceof RestError ? error : { statusCode: undefined, code: undefined };
  const status = [statusCode, code].filter((part) => part !== undefined).join(" ");
  const said = safeErrorText(error, secrets);
  if (isIdentityFailure(error))
    return storageFailure(
      kind,
      what,
      `no credential in the Secret, and DefaultAzureCredential found none that works: ${said}`,
    );
  return storageFailure(kind, what, status === "" ? said : `${status}: ${said}`);
}

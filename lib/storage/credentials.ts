import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { StorageError, type ObjectStoreOptions } from "./store.js";
import { safeErrorText, storageFailure } from "./transfer.js";

/**
 * The credential keys a store reads (`AWS_ACCESS_KEY_ID`, `service-account.json`,
 * `AZURE_STORAGE_SAS_TOKEN`, ...): from `options.secretValues` when the caller holds them (the
 * operator's check), else from the files of `options.secretDir` (a mounted Secret). Only the keys
 * present are returned, trimmed (a Secret made with `--from-file` often ends with a newline).
 */
export async function readCredentials(
  options: ObjectStoreOptions,
  keys: readonly string[],
): Promise<Readonly<Record<string, string>>> {
  const values: Record<string, string> = {};
  for (const key of keys) {
    const value =
      options.secretValues !== undefined
        ? options.secretValues[key]
        : options.secretDir !== undefined
          ? await readOptionalFile(join(options.secretDir, key))
          : undefined;
    if (value !== undefined && value.trim() !== "") values[key] = value.trim();
  }
  return values;
}

/** A file's text, or undefined when it does not exist (a Secret without that key). */
async function readOptionalFile(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * An SDK client built from the credentials it was given, built again when they change: a rotated
 * Secret reaches the kubelet's copy of its files (and so `secretDir`) without a restart, and the
 * next request after that uses the new keys. Reading a few small files per request costs far less
 * than the request.
 */
export class ClientForCredentials<Client> {
  private built: { readonly fingerprint: string; readonly client: Client } | undefined;
  private pending: Promise<Client> | undefined;

  constructor(
    /** The store's name, for messages. */
    private readonly storeName: string,
    private readonly options: ObjectStoreOptions,
    private readonly keys: readonly string[],
    private readonly build: (credentials: Readonly<Record<string, string>>) => Client | Promise<Client>,
  ) {}

  /**
   * The client for the credentials as they are now; credentials that cannot be read or used
   * (an unreadable file, a malformed key) fail as "access-denied", saying why but not what they hold.
   */
  async current(): Promise<Client> {
    // Concurrent downloads share one read (and at most one rebuild).
    this.pending ??= this.refresh()
      .catch((error: unknown) => {
        if (error instanceof StorageError) throw error;
        throw storageFailure(
          "access-denied",
          `${this.storeName}: the credentials cannot be used`,
          safeErrorText(error, []),
        );
      })
      .finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async refresh(): Promise<Client> {
    const credentials = await readCredentials(this.options, this.keys);
    const fingerprint = JSON.stringify(credentials);
    if (this.built?.fingerprint !== fingerprint) this.built = { fingerprint, client: await this.build(credentials) };
    return this.built.client;
  }
}

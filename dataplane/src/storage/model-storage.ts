import { readdir, realpath } from "node:fs/promises";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import type { ModelFilesLocation } from "../../../lib/contract/layout.js";
import { errorMessage, invalidArgument } from "../../../lib/errors.js";
import {
  formatStorageLocation,
  locationContains,
  parseStorageLocation,
  StorageLocationError,
  type RemoteLocation,
  type StorageLocation,
} from "../../../lib/storage/locations.js";
import { openObjectStore } from "../../../lib/storage/open.js";
import { storageFailure } from "../../../lib/storage/transfer.js";
import { StorageError, type ObjectStore, type ObjectStoreOptions } from "../../../lib/storage/store.js";
import { ModelCache } from "./model-cache.js";
import { RemoteRepository, type UnitListing } from "./remote-repository.js";

export interface ModelStorageOptions {
  /** --model-repository, in order: folders and object-storage locations. */
  readonly repositories: readonly string[];
  /** --model-load-path: where else RepositoryModelLoad's model_path may point. */
  readonly loadPaths: readonly string[];
  /** --model-files: where a model configured by a single file finds its version folders (a folder or a prefix). */
  readonly modelFiles?: readonly ModelFilesLocation[];
  /** --model-cache-dir. */
  readonly cacheDir: string;
  /** --model-cache-max-bytes; 0: no bound. */
  readonly cacheMaxBytes: number;
  /** How the stores are reached (credentials, endpoints, CA bundle). */
  readonly stores: ObjectStoreOptions;
  readonly logger: Logger;
}

/**
 * The data plane's model repositories, local and in object storage, as the registry reads
 * them: each a local folder (a remote one's view in the model cache), synced before the
 * registry scans. Remote repositories that cannot be listed are logged and retried at the
 * next sync; their models keep serving from the cache meanwhile.
 */
export class ModelStorage {
  /** Snapshot folders the registry's engines use (told by the registry once it exists). */
  private inUse: () => Iterable<string> = () => [];
  /** Why each model's last sync failed, by model name; cleared when one succeeds. */
  private readonly failures = new Map<string, string>();
  /** The last listing failure told of each repository, so a poll repeats none. */
  private readonly listingFailures = new Map<string, string>();
  private readonly stores = new Map<string, ObjectStore>();
  private readonly remotes = new Map<string, RemoteRepository>();
  private cache: ModelCache | undefined;
  private cacheOpening: Promise<ModelCache> | undefined;

  private constructor(
    private readonly options: ModelStorageOptions,
    private readonly repositories: readonly StorageLocation[],
    private readonly loadPaths: readonly StorageLocation[],
  ) {}

  /** Each repository's local folder, in order (a remote one's, its view). */
  readonly folders: string[] = [];
  /** Single-file-configured models' own files folders, by model (a remote one's, its entry in a view). */
  readonly modelFiles = new Map<string, string>();
  /** The --model-files locations in object storage: each a unit of its parent prefix's view. */
  private readonly remoteModelFiles: RemoteModelFiles[] = [];

  /** Parses the locations (throws a StorageLocationError naming a bad one) and prepares the remote repositories' views. */
  static async open(options: ModelStorageOptions): Promise<ModelStorage> {
    const repositories = options.repositories.map(parseStorageLocation);
    const loadPaths = options.loadPaths.map(parseStorageLocation);
    const storage = new ModelStorage(options, repositories, loadPaths);
    for (const [index, location] of repositories.entries()) {
      // A folder as given (messages name it so); a remote repository, its view in the cache.
      storage.folders.push(
        location.scheme === "file" ? options.repositories[index]! : (await storage.remote(location)).view,
      );
    }
    for (const { model, location: text } of options.modelFiles ?? []) {
      const location = parseStorageLocation(text);
      if (location.scheme === "file") {
        storage.modelFiles.set(model, location.path);
        continue;
      }
      const { remote, unit } = await storage.unitAt(location, `--model-files ${model}=${text}`);
      storage.remoteModelFiles.push({ model, remote, unit });
      storage.modelFiles.set(model, join(remote.view, unit));
    }
    return storage;
  }

  /** Tells the cache which snapshot folders the registry's engines use (never deleted). */
  setInUse(inUse: () => Iterable<string>): void {
    this.inUse = inUse;
  }

  /** The remote repositories' view folders: the registry resolves their entries to snapshots. */
  get views(): ReadonlySet<string> {
    return new Set([...this.remotes.values()].map((remote) => remote.view));
  }

  get hasRemote(): boolean {
    return this.repositories.some((location) => location.scheme !== "file");
  }

  /**
   * Lists every remote repository and brings each changed model into its view (poll mode's
   * tick, `none` mode's start). Returns why each model that could not be brought failed;
   * a repository that cannot be listed is logged and left as it was.
   */
  async syncAll(): Promise<ReadonlyMap<string, string>> {
    for (const location of this.repositories) {
      if (location.scheme === "file") continue;
      const remote = await this.remote(location);
      const listing = await this.listOrTell(remote);
      if (listing === undefined) continue;
      for (const unit of listing.values()) await this.syncUnit(remote, unit);
      for (const shown of await remote.shownUnits()) {
        if (listing.has(shown)) continue;
        await remote.remove(shown);
        this.failures.delete(RemoteRepository.modelName(shown));
        this.options.logger.info({ repository: remote.name, model: shown }, "model removed from the object store");
      }
    }
    for (const files of this.remoteModelFiles) await this.syncModelFiles(files);
    await this.collect();
    return new Map(this.failures);
  }

  /** Brings a --model-files location's version folders; gone from the store, they leave the view. */
  private async syncModelFiles({ model, remote, unit }: RemoteModelFiles): Promise<StorageError | undefined> {
    let listing: Map<string, UnitListing>;
    try {
      listing = await remote.list(unit);
    } catch (error) {
      const failure = asStorageError(error);
      this.failures.set(model, failure.message);
      return failure;
    }
    const listed = listing.get(unit);
    if (listed !== undefined) return this.syncUnit(remote, listed, model);
    await remote.remove(unit);
    return undefined;
  }

  /**
   * Brings one model's files from the remote repositories that list it (explicit mode's
   * load). Throws a StorageError if a repository that has it cannot bring it, or if no
   * repository has it and a remote one could not be listed (it may be there).
   */
  async syncModel(name: string): Promise<void> {
    let listingError: StorageError | undefined;
    let found = false;
    for (const [index, location] of this.repositories.entries()) {
      // The first repository that has the model serves it: once a folder has it, the buckets
      // after it need not be listed, and one that cannot be must not fail the load.
      if (location.scheme === "file") {
        if (await folderHasModel(this.folders[index]!, name)) break;
        continue;
      }
      const remote = await this.remote(location);
      // The model's folder first; only a model that has none may be a single file (`<name>.pbtxt`),
      // which the whole repository's listing finds.
      let listing: Map<string, UnitListing>;
      let whole = false;
      try {
        listing = await remote.list(name);
        if (!listing.has(name)) [listing, whole] = [await remote.list(), true];
      } catch (error) {
        listingError ??= asStorageError(error);
        continue;
      }
      const units = [...listing.values()].filter((unit) => RemoteRepository.modelName(unit.unit) === name);
      for (const unit of units) {
        found = true;
        const failure = await this.syncUnit(remote, unit);
        if (failure !== undefined) throw failure;
      }
      // Gone from the store: what this listing would have shown (the folder; with the whole listing, any).
      for (const shown of await remote.shownUnits()) {
        if (RemoteRepository.modelName(shown) !== name || listing.has(shown)) continue;
        if (whole || shown === name) await remote.remove(shown);
      }
    }
    for (const files of this.remoteModelFiles.filter(({ model }) => model === name)) {
      const failure = await this.syncModelFiles(files);
      if (failure !== undefined) throw failure;
    }
    await this.collect();
    if (!found && listingError !== undefined) throw listingError;
  }

  /** Why the model's last sync failed, if it did. */
  failureOf(name: string): string | undefined {
    return this.failures.get(name);
  }

  /** The model names the remote repositories list now (a repository that cannot be listed: those its view shows). */
  async listedNames(): Promise<string[]> {
    const names: string[] = [];
    for (const location of this.repositories) {
      if (location.scheme === "file") continue;
      const remote = await this.remote(location);
      const units = await remote.list().then(
        (listing) => [...listing.keys()],
        () => remote.shownUnits(),
      );
      names.push(...units.map((unit) => RemoteRepository.modelName(unit)));
    }
    return names;
  }

  /**
   * The local folder of a load request's `model_path`: a folder, or an object-storage prefix
   * downloaded into the cache. Only under the data plane's repositories or --model-load-path
   * locations: a client never chooses where the server connects or what code it runs.
   */
  async modelPathFolder(path: string): Promise<string> {
    const parameter = `RepositoryModelLoad parameter 'model_path'`;
    let location: StorageLocation;
    try {
      location = parseStorageLocation(path);
    } catch (error) {
      if (error instanceof StorageLocationError) throw invalidArgument(`${parameter}: ${error.message}`);
      throw error;
    }
    const checked = await resolvedLocation(location);
    const repositories = await Promise.all(this.repositories.map(resolvedLocation));
    const loadPaths = await Promise.all(this.loadPaths.map(resolvedLocation));
    // The allowed places are not named: a client learns nothing of the server's buckets, endpoints or folders.
    if (![...repositories, ...loadPaths].some((outer) => locationContains(outer, checked))) {
      throw invalidArgument(
        `${parameter}: '${path}' is not under one of this server's model repositories or --model-load-path locations`,
      );
    }
    // A whole repository is no model's folder (it would be downloaded whole, to fail as one model).
    if (repositories.some((root) => locationContains(checked, root))) {
      throw invalidArgument(`${parameter}: '${path}' names a model repository, not a model's folder in one`);
    }
    if (checked.scheme === "file") return checked.path;
    return this.fetchModelFolder(checked, parameter, path);
  }

  /** Releases the stores' connections. */
  async close(): Promise<void> {
    await Promise.all([...this.stores.values()].map((store) => store.close().catch(() => undefined)));
  }

  /** A remote model folder named by model_path, synced into the view of its parent prefix. */
  private async fetchModelFolder(location: RemoteLocation, parameter: string, path: string): Promise<string> {
    const { remote, unit } = await this.unitAt(location, parameter, invalidArgument);
    const listing = await remote.list(unit);
    const listed = listing.get(unit);
    if (listed === undefined) throw storageFailure("not-found", path, "no objects are listed there");
    await remote.sync(listed);
    await this.collect();
    return realpath(`${remote.view}/${unit}`);
  }

  /**
   * A remote folder as a unit of its parent prefix's repository (its view entry is the
   * folder's copy); a location naming a whole bucket is refused, `what` naming where it came from.
   */
  private async unitAt(
    location: RemoteLocation,
    what: string,
    refuse: (message: string) => Error = (message) => new Error(message),
  ): Promise<{ remote: RemoteRepository; unit: string }> {
    const slash = location.prefix.lastIndexOf("/");
    const unit = location.prefix.slice(slash + 1);
    if (unit === "") throw refuse(`${what}: '${formatStorageLocation(location)}' names a whole bucket, not a folder`);
    const remote = await this.remote({ ...location, prefix: slash < 0 ? "" : location.prefix.slice(0, slash) });
    return { remote, unit };
  }

  /** Lists a repository; a failure is logged (once while it lasts) and undefined returned. */
  private async listOrTell(remote: RemoteRepository): Promise<Map<string, UnitListing> | undefined> {
    try {
      const listing = await remote.list();
      if (this.listingFailures.delete(remote.name))
        this.options.logger.info({ repository: remote.name }, "model repository can be listed again");
      return listing;
    } catch (error) {
      const message = errorMessage(error);
      if (this.listingFailures.get(remote.name) !== message) {
        this.listingFailures.set(remote.name, message);
        this.options.logger.error(
          { repository: remote.name, err: message },
          "model repository cannot be listed; its models are left as they were, and the next poll tries again",
        );
      }
      return undefined;
    }
  }

  /** Syncs one unit; a failure is remembered for the model (and logged once while it lasts) and returned. */
  private async syncUnit(
    remote: RemoteRepository,
    unit: UnitListing,
    model = RemoteRepository.modelName(unit.unit),
  ): Promise<StorageError | undefined> {
    const started = performance.now();
    try {
      const outcome = await remote.sync(unit);
      if (outcome !== "unchanged") {
        this.options.logger.info(
          {
            repository: remote.name,
            model,
            objects: unit.objects,
            bytes: unit.bytes,
            ms: Math.round(performance.now() - started),
            outcome,
          },
          "model files synced from the object store",
        );
      }
      this.failures.delete(model);
      return undefined;
    } catch (error) {
      const failure = asStorageError(error);
      if (this.failures.get(model) !== failure.message) {
        this.options.logger.error(
          { repository: remote.name, model, err: failure.message },
          "model files could not be synced",
        );
      }
      this.failures.set(model, failure.message);
      return failure;
    }
  }

  /** Deletes snapshots nothing uses; a failure here costs disk, not service. */
  private async collect(): Promise<void> {
    await this.cache
      ?.collect()
      .catch((error: unknown) => this.options.logger.warn({ err: errorMessage(error) }, "model cache clean-up failed"));
  }

  /** The remote repository at `location`, its store and the cache opened on first use. */
  private async remote(location: RemoteLocation): Promise<RemoteRepository> {
    const key = formatStorageLocation(location);
    const known = this.remotes.get(key);
    if (known !== undefined) return known;
    const storeKey = formatStorageLocation({ ...location, prefix: "" });
    let store = this.stores.get(storeKey);
    if (store === undefined) {
      store = await openObjectStore(location, this.options.stores);
      this.stores.set(storeKey, store);
    }
    const remote = await RemoteRepository.open(location, store, await this.openCache());
    this.remotes.set(key, remote);
    return remote;
  }

  private openCache(): Promise<ModelCache> {
    this.cacheOpening ??= (async () => {
      const cache = new ModelCache(this.options.cacheDir, this.options.cacheMaxBytes, () => this.inUse());
      await cache.open();
      this.cache = cache;
      return cache;
    })();
    return this.cacheOpening;
  }
}

/** A --model-files location in object storage: the model, and its folder as a unit of its parent's view. */
interface RemoteModelFiles {
  readonly model: string;
  readonly remote: RemoteRepository;
  readonly unit: string;
}

function asStorageError(error: unknown): StorageError {
  return error instanceof StorageError ? error : new StorageError("other", errorMessage(error));
}

/** Whether a local repository holds a model: its folder, or a single-file config named after it. */
async function folderHasModel(folder: string, name: string): Promise<boolean> {
  const entries = await readdir(folder).catch(() => [] as string[]);
  return entries.some(
    (entry) => !entry.startsWith(".") && (entry === name || RemoteRepository.modelName(entry) === name),
  );
}

/** A local location by its real path (symlinks followed, as a load would follow them); a remote one as it is. */
async function resolvedLocation(location: StorageLocation): Promise<StorageLocation> {
  return location.scheme === "file" ? { ...location, path: await realpathOr(location.path) } : location;
}

async function realpathOr(path: string): Promise<string> {
  return realpath(path).catch(() => path);
}

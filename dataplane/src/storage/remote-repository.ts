import { createHash } from "node:crypto";
import { mkdir, readdir, readlink, rm } from "node:fs/promises";
import { basename, dirname, extname, join, resolve } from "node:path";
import { configFormatOf } from "../../../lib/model-repository/config.js";
import { formatStorageLocation, type RemoteLocation } from "../../../lib/storage/locations.js";
import type { ObjectEntry, ObjectStore } from "../../../lib/storage/store.js";
import { storageFailure } from "../../../lib/storage/transfer.js";
import { fileAndFolderClash, ListingDigest, unsafeKeyProblem } from "./keys.js";
import type { ModelCache, RepositoryFolders } from "./model-cache.js";

/** Objects downloaded at once for one model. */
const DOWNLOAD_CONCURRENCY = 4;

/**
 * One unit of a repository: a model folder (`<prefix>/<model>/...`) or a single-file config
 * (`<prefix>/<model>.pbtxt`), named as its entry in the view is.
 */
export interface UnitListing {
  readonly unit: string;
  readonly digest: string;
  readonly objects: number;
  readonly bytes: number;
  /** A key of the unit that cannot be written under the cache, and why. */
  readonly unsafe?: string;
  /** A single-file config's one object, as listed (its download needs no second listing). */
  readonly single?: ObjectEntry;
}

/** What a sync did to one unit. */
export type UnitOutcome = "unchanged" | "downloaded" | "reused";

/**
 * A model repository in object storage, mirrored into a local view folder the registry
 * scans as it scans any repository. Listing groups the keys by model as the pages come
 * (memory grows with the models, not the keys); a model whose listing changed is listed
 * again, downloaded into a new snapshot and swapped into the view; models that vanished from
 * the listing leave the view. A model that fails (an unsafe key, an object deleted or
 * rewritten mid-download, a full cache) keeps its last good snapshot in the view.
 */
export class RemoteRepository {
  /** The location as its URI, for messages. */
  readonly name: string;

  private constructor(
    readonly location: RemoteLocation,
    private readonly store: ObjectStore,
    private readonly cache: ModelCache,
    private readonly folders: RepositoryFolders,
  ) {
    this.name = formatStorageLocation(location);
  }

  static async open(location: RemoteLocation, store: ObjectStore, cache: ModelCache): Promise<RemoteRepository> {
    const id = createHash("sha256").update(formatStorageLocation(location)).digest("hex").slice(0, 16);
    return new RemoteRepository(location, store, cache, await cache.repositoryFolders(id));
  }

  /** The local folder in Triton's layout that holds the last good snapshot of each model. */
  get view(): string {
    return this.folders.view;
  }

  /** The key prefix of the repository, "" or ending with "/". */
  private get prefix(): string {
    return this.location.prefix === "" ? "" : `${this.location.prefix}/`;
  }

  /**
   * Lists the repository (or only the model folder `folder`), each unit with its digest.
   * Throws a StorageError if the store cannot be listed.
   */
  async list(folder?: string, signal?: AbortSignal): Promise<Map<string, UnitListing>> {
    const digests = new Map<string, { digest: ListingDigest; unsafe?: string; single?: ObjectEntry }>();
    // Stores list folder prefixes only ("" or ending with "/"), as the ObjectStore contract says.
    for await (const entry of this.store.list(this.prefix + (folder === undefined ? "" : `${folder}/`), signal)) {
      const placed = this.placeOf(entry.key);
      if (placed === undefined) continue;
      let unit = digests.get(placed.unit);
      if (unit === undefined) digests.set(placed.unit, (unit = { digest: new ListingDigest() }));
      unit.digest.add(placed.path, entry.version, entry.size);
      if (!this.isFolderUnit(placed.unit)) unit.single = entry;
      const problem = unsafeKeyProblem(placed.path);
      if (problem !== undefined && unit.unsafe === undefined) unit.unsafe = `'${entry.key}' ${problem}`;
    }
    const units = new Map<string, UnitListing>();
    for (const [unit, { digest, unsafe, single }] of digests) {
      units.set(unit, {
        unit,
        digest: digest.digest(),
        objects: digest.objects,
        bytes: digest.totalBytes,
        ...(unsafe !== undefined ? { unsafe } : {}),
        ...(single !== undefined ? { single } : {}),
      });
    }
    return units;
  }

  /** The model names of the units listed (a single-file config's, its file name without extension). */
  static modelName(unit: string): string {
    return configFormatOf(unit) !== undefined ? basename(unit, extname(unit)) : unit;
  }

  /**
   * Brings one unit's view entry in line with the store: nothing if the snapshot the view
   * shows has the listed digest; otherwise a new snapshot, downloaded (or one already in the
   * cache), swapped in. Throws a StorageError, the view unchanged, if it cannot.
   */
  async sync(listed: UnitListing, signal?: AbortSignal): Promise<UnitOutcome> {
    if (listed.unsafe !== undefined) {
      throw storageFailure(
        "unsafe-key",
        `${this.name}/${listed.unit}`,
        `${listed.unsafe}; the model is not downloaded`,
      );
    }
    if ((await this.shownDigest(listed.unit)) === listed.digest) return "unchanged";
    const entries = await this.unitEntries(listed, signal);
    const digest = new ListingDigest();
    for (const { path, entry } of entries) digest.add(path, entry.version, entry.size);
    const snapshot = join(this.folders.snapshots, `${snapshotStem(listed.unit)}@${digest.digest()}`);
    // Another model's sync may clean the cache meanwhile: this snapshot stays until the view shows it.
    const unpin = this.cache.pin(snapshot);
    try {
      let outcome: UnitOutcome = "reused";
      if (!this.cache.isSnapshot(snapshot)) {
        await this.download(listed.unit, entries, digest.totalBytes, snapshot, signal);
        outcome = "downloaded";
      }
      const isFile = !this.isFolderUnit(listed.unit);
      await this.cache.swapLink(join(this.view, listed.unit), isFile ? join(snapshot, listed.unit) : snapshot);
      return outcome;
    } finally {
      unpin();
    }
  }

  /** Takes a unit the store no longer lists out of the view (its snapshot goes at the next collection). */
  async remove(unit: string): Promise<void> {
    await rm(join(this.view, unit), { force: true });
  }

  /** The units the view shows now. */
  async shownUnits(): Promise<string[]> {
    return (await readdir(this.view)).filter((entry) => !entry.startsWith("."));
  }

  /** The digest of the snapshot a unit's view entry points to, if any. */
  private async shownDigest(unit: string): Promise<string | undefined> {
    const target = await readlink(join(this.view, unit)).catch(() => undefined);
    if (target === undefined) return undefined;
    const snapshot = this.isFolderUnit(unit) ? target : dirname(target);
    const at = snapshot.lastIndexOf("@");
    return at < 0 ? undefined : snapshot.slice(at + 1);
  }

  private isFolderUnit(unit: string): boolean {
    return configFormatOf(unit) === undefined;
  }

  /** Where a key belongs: its unit and its path below the unit's folder; undefined for keys that are no unit's. */
  private placeOf(key: string): { unit: string; path: string } | undefined {
    if (!key.startsWith(this.prefix) || key.endsWith("/")) return undefined; // folder markers
    const relative = key.slice(this.prefix.length);
    const slash = relative.indexOf("/");
    if (slash < 0) {
      // A single-file config at the top (`<model>.pbtxt`); other top-level files are no model's.
      return configFormatOf(relative) !== undefined && unitNameProblem(relative) === undefined
        ? { unit: relative, path: relative }
        : undefined;
    }
    const unit = relative.slice(0, slash);
    // As the scan of a local folder: names starting with "." are no models; nor is what cannot be a folder name.
    if (unitNameProblem(unit) !== undefined) return undefined;
    return { unit, path: relative.slice(slash + 1) };
  }

  /**
   * The unit's objects with their paths checked: a folder's listed again (in full: the
   * download needs each, and the repository's listing kept only digests), a single file's as listed.
   */
  private async unitEntries(
    listed: UnitListing,
    signal?: AbortSignal,
  ): Promise<{ path: string; entry: ObjectEntry }[]> {
    const { unit } = listed;
    if (listed.single !== undefined) return [{ path: unit, entry: listed.single }];
    const entries: { path: string; entry: ObjectEntry }[] = [];
    for await (const entry of this.store.list(`${this.prefix}${unit}/`, signal)) {
      const placed = this.placeOf(entry.key);
      if (placed?.unit !== unit) continue;
      const problem = unsafeKeyProblem(placed.path);
      if (problem !== undefined) {
        throw storageFailure(
          "unsafe-key",
          `${this.name}/${unit}`,
          `'${entry.key}' ${problem}; the model is not downloaded`,
        );
      }
      entries.push({ path: placed.path, entry });
    }
    const clash = fileAndFolderClash(entries.map(({ path }) => path));
    if (clash !== undefined) {
      throw storageFailure(
        "unsafe-key",
        `${this.name}/${unit}`,
        `'${clash}' is both an object and a folder of other objects; the model is not downloaded`,
      );
    }
    if (entries.length === 0)
      throw storageFailure("not-found", `${this.name}/${unit}`, "no objects are listed there any more");
    return entries;
  }

  /** Downloads the entries into a temporary folder, a few at once, and commits it as `snapshot`. */
  private async download(
    unit: string,
    entries: readonly { path: string; entry: ObjectEntry }[],
    bytes: number,
    snapshot: string,
    signal?: AbortSignal,
  ): Promise<void> {
    const release = await this.cache.reserve(bytes, `${this.name}/${unit}`);
    const folder = await this.cache.temporaryFolder(this.folders);
    try {
      // The first failure stops the other downloads; theirs (aborted) are not the news.
      const stop = new AbortController();
      const signals = signal === undefined ? stop.signal : AbortSignal.any([signal, stop.signal]);
      let failure: { error: unknown } | undefined;
      let next = 0;
      // What is on the disk counts against the bound, not what was listed: a store may send more
      // (GCS serves a gzip-encoded object decompressed).
      let written = 0;
      const worker = async (): Promise<void> => {
        while (next < entries.length && failure === undefined) {
          const { path, entry } = entries[next++]!;
          const file = resolve(folder, path);
          await mkdir(dirname(file), { recursive: true });
          await this.store.download(entry, file, signals).then(
            (bytes) => (written += bytes),
            (error: unknown) => {
              failure ??= { error };
              stop.abort();
            },
          );
        }
      };
      await Promise.all(Array.from({ length: Math.min(DOWNLOAD_CONCURRENCY, entries.length) }, worker));
      if (failure !== undefined) throw failure.error;
      await this.cache.commit(folder, snapshot, written);
    } catch (error) {
      await rm(folder, { recursive: true, force: true });
      throw error;
    } finally {
      release();
    }
  }
}

/** Why a unit's name cannot be an entry of the view folder. */
export function unitNameProblem(unit: string): string | undefined {
  if (unit === "" || unit.startsWith(".")) return "is empty or starts with '.'";
  if (unit.includes("\\") || [...unit].some((character) => character < " " || character === "\u007f"))
    return "has a backslash or a control character";
  return undefined;
}

/**
 * A unit's name, short enough for a folder name beside its digest: at most 100 bytes of
 * UTF-8, cut between characters (a file name holds 255 bytes, not characters, and a name cut
 * inside a character would not read back as written).
 */
function snapshotStem(unit: string): string {
  let stem = "";
  for (const character of unit) {
    if (Buffer.byteLength(stem + character) > 100) break;
    stem += character;
  }
  return stem;
}

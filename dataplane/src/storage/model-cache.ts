import { randomBytes } from "node:crypto";
import { lstat, mkdir, readdir, readlink, realpath, rename, rm, symlink } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { Holds } from "../../../lib/holds.js";
import { storageFailure } from "../../../lib/storage/transfer.js";

/**
 * The local cache of models from object storage (--model-cache-dir, an emptyDir in pods):
 *
 *     <root>/<repository-id>/snapshots/<unit>@<digest>/   a model's files, never changed once there
 *     <root>/<repository-id>/view/<unit> -> ../snapshots/<unit>@<digest>
 *     <root>/<repository-id>/tmp/                          downloads under way
 *
 * A download fills a temporary folder and is renamed into `snapshots/` only once complete;
 * the view's symlink is then swapped by a rename (atomic), so the registry's scan of the view
 * folder sees the last complete snapshot of each model, never a half-written one. Snapshots
 * count against --model-cache-max-bytes; those no view points to and no engine uses (the
 * registry says which) are deleted, to make room and after each sync.
 */
export class ModelCache {
  /** Bytes of each snapshot folder on disk, by its path. */
  private readonly sizes = new Map<string, number>();
  /** Bytes promised to downloads under way. */
  private reserved = 0;
  /** Snapshots about to be shown (committed or found, not yet swapped into a view): never deleted. */
  private readonly pinned = new Holds<string>();

  /**
   * The cache folder's real path (set by open()): snapshots are named, linked and compared by
   * it, as the registry names the folders its engines read (the real paths of the view's entries).
   * A relative --model-cache-dir would otherwise give relative symlink targets that point
   * nowhere, and one reached through a symlink would let clean-up delete a snapshot in use.
   */
  private root: string;

  constructor(
    given: string,
    /** 0: no bound but the disk. */
    private readonly maxBytes: number,
    /** Snapshot folders engines use now (live, retiring or loading): never deleted. */
    private readonly inUse: () => Iterable<string>,
  ) {
    this.root = resolve(given);
  }

  /** Makes the root, drops unfinished downloads, and counts the snapshots a previous run left. */
  async open(): Promise<void> {
    await mkdir(this.root, { recursive: true });
    this.root = await realpath(this.root);
    for (const repository of await readdir(this.root)) {
      const folder = join(this.root, repository);
      if (!(await lstat(folder)).isDirectory()) continue;
      await rm(join(folder, "tmp"), { recursive: true, force: true });
      await dropStagedLinks(join(folder, "view"));
      for (const name of await readdir(join(folder, "snapshots")).catch(() => [] as string[])) {
        const snapshot = join(folder, "snapshots", name);
        this.sizes.set(snapshot, await folderBytes(snapshot));
      }
    }
  }

  /** The folders of one repository (`id` names it), made if absent. */
  async repositoryFolders(id: string): Promise<RepositoryFolders> {
    const folder = join(this.root, id);
    const folders = { snapshots: join(folder, "snapshots"), view: join(folder, "view"), tmp: join(folder, "tmp") };
    for (const made of Object.values(folders)) await mkdir(made, { recursive: true });
    return folders;
  }

  /** Bytes held by snapshots now. */
  get usedBytes(): number {
    let sum = 0;
    for (const size of this.sizes.values()) sum += size;
    return sum;
  }

  isSnapshot(path: string): boolean {
    return this.sizes.has(path);
  }

  /**
   * Promises `bytes` to a download (`what` names it in the error): with a bound, snapshots
   * nothing uses are deleted first if needed, and a download that still does not fit fails
   * with "cache-full". Release the reservation when the download ends, kept or not.
   */
  async reserve(bytes: number, what: string): Promise<() => void> {
    if (this.maxBytes > 0 && this.usedBytes + this.reserved + bytes > this.maxBytes) await this.collect();
    if (this.maxBytes > 0 && this.usedBytes + this.reserved + bytes > this.maxBytes) {
      const held = this.usedBytes + this.reserved;
      throw storageFailure(
        "cache-full",
        what,
        `it needs ${bytes} bytes; models in use hold ${held} of the ${this.maxBytes} of --model-cache-max-bytes`,
      );
    }
    this.reserved += bytes;
    let released = false;
    return () => {
      if (!released) this.reserved -= bytes;
      released = true;
    };
  }

  /** Keeps `snapshot` from clean-up until the returned function is called (between its commit and its view swap). */
  pin(snapshot: string): () => void {
    return this.pinned.hold(snapshot);
  }

  /** A new empty folder for one download. */
  async temporaryFolder(folders: RepositoryFolders): Promise<string> {
    const folder = join(folders.tmp, randomBytes(8).toString("hex"));
    await mkdir(folder, { recursive: true });
    return folder;
  }

  /** Moves a complete download into place as `snapshot` (one already there, from an equal listing, wins). */
  async commit(download: string, snapshot: string, bytes: number): Promise<void> {
    try {
      await rename(download, snapshot);
      this.sizes.set(snapshot, bytes);
    } catch (error) {
      await rm(download, { recursive: true, force: true });
      if (!(await exists(snapshot))) throw error;
      this.sizes.set(snapshot, this.sizes.get(snapshot) ?? (await folderBytes(snapshot)));
    }
  }

  /** Points `link` at `target` by renaming a new symlink over it: readers see the old or the new, never none. */
  async swapLink(link: string, target: string): Promise<void> {
    // Named apart from the unit: a unit's name may take all of a file name's 255 bytes.
    const staged = join(dirname(link), `${STAGED_LINK}${randomBytes(6).toString("hex")}`);
    await symlink(target, staged);
    try {
      await rename(staged, link);
    } catch (error) {
      await rm(staged, { force: true });
      throw error;
    }
  }

  /**
   * Deletes the snapshots no view points to and no engine uses. Returns the bytes freed.
   * Called after each sync and when a download needs room.
   */
  async collect(): Promise<number> {
    const kept = new Set<string>([...this.inUse(), ...this.pinned.held()].map((path) => resolve(path)));
    for (const target of await this.viewTargets()) kept.add(target);
    let freed = 0;
    for (const [snapshot, size] of [...this.sizes]) {
      if (kept.has(snapshot)) continue;
      this.sizes.delete(snapshot);
      await rm(snapshot, { recursive: true, force: true });
      freed += size;
    }
    return freed;
  }

  /** Every snapshot a view points to now (the file of a single-file config's, its folder). */
  private async viewTargets(): Promise<string[]> {
    const targets: string[] = [];
    for (const repository of await readdir(this.root).catch(() => [] as string[])) {
      const view = join(this.root, repository, "view");
      for (const entry of await readdir(view).catch(() => [] as string[])) {
        const target = await readlink(join(view, entry)).catch(() => undefined);
        if (target === undefined) continue;
        const path = resolve(view, target);
        targets.push(path, dirname(path));
      }
    }
    return targets;
  }
}

/** The name of a view link staged for a swap starts so (a "." keeps it out of the view's units). */
const STAGED_LINK = ".swap-";

/** Links a stopped run staged and never swapped in: left, each would keep its snapshot for good. */
async function dropStagedLinks(view: string): Promise<void> {
  for (const entry of await readdir(view).catch(() => [] as string[])) {
    if (entry.startsWith(".")) await rm(join(view, entry), { force: true });
  }
}

export interface RepositoryFolders {
  readonly snapshots: string;
  readonly view: string;
  readonly tmp: string;
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/** The bytes of the files under a folder. */
async function folderBytes(folder: string): Promise<number> {
  let sum = 0;
  for (const entry of await readdir(folder, { withFileTypes: true, recursive: true }).catch(() => [])) {
    if (entry.isFile()) sum += (await lstat(join(entry.parentPath, entry.name))).size;
  }
  return sum;
}

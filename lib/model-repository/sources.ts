import { createHash } from "node:crypto";
import { lstat, readdir, readFile, realpath, stat } from "node:fs/promises";
import type { Stats } from "node:fs";
import { basename, dirname, extname, join } from "node:path";
import { errorMessage, failedPrecondition } from "../errors.js";
import { modelFilesFolder } from "../contract/layout.js";
import { configFormatOf, type ConfigFormat } from "./config.js";

/**
 * Finding models on disk. A repository is a folder in Triton's layout
 * (`<repo>/<model>/config.pbtxt` with numeric version folders) that may also hold
 * single configuration files (`<repo>/<model>.pbtxt`), which is what a ConfigMap with
 * one key per model looks like when mounted. Entries starting with "." are skipped, so
 * the `..data` folders of a ConfigMap volume are never read as models; reading through
 * the symlinks picks up Kubernetes' atomic swap of `..data`.
 */

/** Names a model folder may use for its configuration, in order of preference. */
const FOLDER_CONFIG_NAMES = ["config.pbtxt", "config.pb", "config.binpb"];

/** Where a model in Triton's layout keeps its files: `<folder>/<version>/<model file>`. */
export interface ModelFiles {
  readonly folder: string;
  /** The numeric version folders, ascending. */
  readonly versions: readonly number[];
  /** The versions the model's version policy serves (set when a model is loaded). */
  readonly served?: readonly string[];
}

export interface ModelSource {
  /** The name the location gives: the folder name, or the file name without extension. */
  readonly nameHint: string;
  /** True for folders: the config's `name` must then equal the folder name (as in Triton). */
  readonly nameFixed: boolean;
  /** Path of the configuration file (or of the folder when it has none). */
  readonly path: string;
  readonly format: ConfigFormat | undefined;
  readonly content: Uint8Array | undefined;
  /** Numeric version folders found (empty for single files and folders without any). */
  readonly versions: readonly number[];
  /** The model's folder in Triton's layout (where version folders hold model files); absent for single files. */
  readonly folder?: string;
  /** Changes whenever the configuration, the version folders or the files in them change. */
  readonly fingerprint: string;
  /**
   * Why the source could not be read (a config that is a directory, a dangling symlink, a
   * symlink loop): that one model fails to load, or keeps its last good configuration.
   */
  readonly unreadable?: string;
}

/** Where the files of models configured by a single file are, and which repositories are views of snapshots. */
export interface ScanOptions {
  /** `<root>/<model>/<version>/...`: a ConfigMap carries the configs, a volume the model files. */
  readonly modelFilesRoot?: string;
  /** A model's own files folder (`<folder>/<version>/...`), instead of the root's (--model-files). */
  readonly modelFiles?: ReadonlyMap<string, string>;
  /**
   * Repositories (and --model-files folders' parents) that object storage's models are
   * mirrored into: each entry is a symlink to an immutable snapshot, and the source's folder
   * is the snapshot itself, so an engine keeps reading the files it was loaded from when a
   * later snapshot takes the view's place.
   */
  readonly snapshotViews?: ReadonlySet<string>;
}

/** Every model source in the repositories plus the single configuration files given. */
export async function scanModelSources(
  repositories: readonly string[],
  configFiles: readonly string[],
  options: ScanOptions = {},
): Promise<ModelSource[]> {
  const sources: ModelSource[] = [];
  for (const repository of repositories) sources.push(...(await scanRepository(repository, options)));
  for (const file of configFiles) sources.push(await readConfigFile(file, options));
  return sources;
}

async function scanRepository(repository: string, options: ScanOptions): Promise<ModelSource[]> {
  const resolveFolders = options.snapshotViews?.has(repository) === true;
  const entries = await readdir(repository).catch((error: unknown) => {
    throw failedPrecondition(`model repository '${repository}' cannot be read: ${errorMessage(error)}`);
  });
  const sources: ModelSource[] = [];
  for (const entry of entries.sort()) {
    if (entry.startsWith(".")) continue;
    const path = join(repository, entry);
    let info: Stats;
    try {
      info = await stat(path);
    } catch (error) {
      // An entry that cannot be followed (a dangling symlink, a loop) is a model that
      // cannot be read; a plain file that vanished meanwhile is nothing.
      const link = await lstat(path).catch(() => undefined);
      if (link?.isSymbolicLink()) sources.push(unreadableSource(path, entry, error));
      continue;
    }
    if (info.isDirectory()) {
      const folder = resolveFolders ? await realpath(path).catch(() => path) : path;
      sources.push(await readModelFolder(folder, entry).catch((error) => unreadableSource(path, entry, error)));
    } else if (info.isFile() && configFormatOf(entry) !== undefined) {
      sources.push(await readConfigFile(path, options));
    }
  }
  return sources;
}

/** A model source that could not be read, named by its place in the repository. */
function unreadableSource(path: string, entry: string, error: unknown): ModelSource {
  const reason = errorMessage(error);
  const nameHint = configFormatOf(entry) === undefined ? entry : basename(entry, extname(entry));
  return {
    nameHint,
    nameFixed: true,
    path,
    format: undefined,
    content: undefined,
    versions: [],
    fingerprint: fingerprintOf({ content: undefined, unreadable: reason }, []),
    unreadable: reason,
  };
}

/** A model folder in Triton's layout, named `nameHint` (its own name unless given). */
export async function readModelFolder(folder: string, nameHint = basename(folder)): Promise<ModelSource> {
  const entries = await readdir(folder, { withFileTypes: true });
  const { versions, files } = await readVersionFolders(folder);
  const configName = FOLDER_CONFIG_NAMES.find((name) => entries.some((entry) => entry.name === name));
  const path = configName === undefined ? folder : join(folder, configName);
  const read = configName === undefined ? { content: undefined } : await readSource(path);
  return {
    nameHint,
    nameFixed: true,
    path,
    format: configName === undefined ? undefined : configFormatOf(configName),
    ...read,
    versions,
    folder,
    fingerprint: fingerprintOf(read, versions, files),
  };
}

/** A config file's bytes, or why they cannot be read. */
interface SourceRead {
  readonly content: Uint8Array | undefined;
  /** ENOENT through a dangling symlink, EISDIR, ELOOP, ... */
  readonly unreadable?: string;
}

async function readSource(path: string): Promise<SourceRead> {
  try {
    return { content: await readFile(path) };
  } catch (error) {
    return { content: undefined, unreadable: errorMessage(error) };
  }
}

/** The numeric version folders of a model folder, sorted, and a description of their files. */
async function readVersionFolders(folder: string): Promise<{ versions: number[]; files: string[] }> {
  const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
  const versions: number[] = [];
  const files: string[] = [];
  for (const entry of entries) {
    // As Triton: a version is a positive number; "0" and names starting with 0 are not versions.
    if (!/^[1-9]\d*$/.test(entry.name)) continue;
    const info = await stat(join(folder, entry.name)).catch(() => undefined);
    if (!info?.isDirectory()) continue;
    versions.push(Number(entry.name));
    files.push(...(await describeFiles(join(folder, entry.name))));
  }
  return { versions: versions.sort((a, b) => a - b), files: files.sort() };
}

/**
 * Name, size and modification time of each file in a version folder: replacing a model
 * file changes the fingerprint, so poll mode reloads the model (as Triton does).
 */
async function describeFiles(versionFolder: string): Promise<string[]> {
  const names = await readdir(versionFolder).catch(() => [] as string[]);
  const described: string[] = [];
  for (const name of names) {
    const path = join(versionFolder, name);
    const info = await stat(path).catch(() => undefined);
    if (info?.isFile()) described.push(`${path}:${info.size}:${info.mtimeMs}`);
  }
  return described;
}

async function readConfigFile(file: string, options: ScanOptions): Promise<ModelSource> {
  const read = await readSource(file);
  const stem = basename(file, extname(file));
  const nameHint = stem === "config" ? basename(dirname(file)) : stem;
  // With a files root, the model's folder there is where its files are looked for (and
  // named in errors) even before it exists.
  const folder = await filesFolderOf(nameHint, options);
  const { versions, files } = folder === undefined ? { versions: [], files: [] } : await readVersionFolders(folder);
  return {
    nameHint,
    nameFixed: false,
    path: file,
    format: configFormatOf(file),
    ...read,
    versions,
    ...(folder !== undefined ? { folder } : {}),
    fingerprint: fingerprintOf(read, versions, files),
  };
}

/** Where a single-file-configured model's version folders are: its own (a snapshot, if mirrored), else under the root. */
async function filesFolderOf(model: string, options: ScanOptions): Promise<string | undefined> {
  const own = options.modelFiles?.get(model);
  if (own !== undefined) {
    return options.snapshotViews?.has(dirname(own)) === true ? await realpath(own).catch(() => own) : own;
  }
  return options.modelFilesRoot === undefined ? undefined : modelFilesFolder(options.modelFilesRoot, model);
}

function fingerprintOf(read: SourceRead, versions: readonly number[], files: readonly string[] = []): string {
  const hash = createHash("sha256");
  // An unreadable source's reason counts: when it changes (ENOENT, then EISDIR), so does the model's reason.
  hash.update(read.content ?? `<missing${read.unreadable === undefined ? "" : `: ${read.unreadable}`}>`);
  hash.update(versions.join(","));
  hash.update(files.join("\n"));
  return hash.digest("hex");
}

import type { RemoteLocation } from "./locations.js";
import type { ObjectEntry, ObjectStore } from "./store.js";

/** An object under a location, its key relative to the location's prefix. */
export interface ListedObject {
  readonly path: string;
  readonly entry: ObjectEntry;
}

/**
 * The objects under `location` (folder markers left out), each with its path relative to
 * the location, `limit` at most: what a listing of a repository or a model folder reads.
 */
export async function listUnder(
  store: ObjectStore,
  location: RemoteLocation,
  { signal, limit = Infinity }: { signal?: AbortSignal; limit?: number } = {},
): Promise<ListedObject[]> {
  const prefix = location.prefix === "" ? "" : `${location.prefix}/`;
  const listed: ListedObject[] = [];
  for await (const entry of store.list(prefix, signal)) {
    if (entry.key.startsWith(prefix) && !entry.key.endsWith("/"))
      listed.push({ path: entry.key.slice(prefix.length), entry });
    if (listed.length >= limit) break;
  }
  return listed;
}

import type { RemoteLocation, RemoteScheme } from "./locations.js";
import type { ObjectStore, ObjectStoreOptions } from "./store.js";

/** Opens the store a remote location names (its scheme's SDK loaded on first use). */
export async function openObjectStore(location: RemoteLocation, options: ObjectStoreOptions): Promise<ObjectStore> {
  const opener = OPENERS[location.scheme];
  return (await opener())(location as never, options);
}

type Opener<L extends RemoteLocation> = (location: L, options: ObjectStoreOptions) => ObjectStore;

/** Each scheme's implementation, imported when first used. */
const OPENERS: { readonly [S in RemoteScheme]: () => Promise<Opener<Extract<RemoteLocation, { scheme: S }>>> } = {
  s3: async () => (await import("./s3.js")).openS3Store,
  gs: async () => (await import("./gcs.js")).openGcsStore,
  as: async () => (await import("./azure.js")).openAzureStore,
};

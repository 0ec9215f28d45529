import type { RemoteLocation } from "./locations.js";
import { StorageError, type ObjectStore, type ObjectStoreOptions } from "./store.js";

/** Being written for issue 36 (replaced before it lands). */
export function openAzureStore(
  location: Extract<RemoteLocation, { scheme: "as" }>,
  options: ObjectStoreOptions,
): ObjectStore {
  void options;
  throw new StorageError("other", `${location.scheme}:// is not supported yet`);
}

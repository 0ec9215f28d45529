import { mkdir, mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative, isAbsolute } from "node:path";
import type { RemoteLocation } from "../../../lib/storage/locations.js";
import { listUnder } from "../../../lib/storage/listing.js";
import { openObjectStore } from "../../../lib/storage/open.js";
import type { ObjectStoreOptions } from "../../../lib/storage/store.js";

/**
 * A Triton repository in object storage, brought down as far as planning needs it: each
 * model's config.pbtxt, its version folders (empty), a vLLM model's model.json, and the
 * model.onnx of a model that has no config (whose config is completed from it). The rest
 * (weights, model.py, ...) stays in the bucket, where the CRs point.
 */

/** Whether planning reads this key (relative to the repository): see the module's comment. */
function plannedKey(key: string, configless: ReadonlySet<string>): boolean {
  const [model, second, third, ...deeper] = key.split("/");
  if (model === undefined || second === undefined || deeper.length > 0) return false;
  if (third === undefined) return second === "config.pbtxt";
  return third === "model.json" || (third === "model.onnx" && configless.has(model));
}

/** Downloads what planning reads into a new temporary folder and returns it (remove it after use). */
export async function fetchRepositoryOutline(
  location: RemoteLocation,
  options: ObjectStoreOptions = {},
): Promise<string> {
  const into = await mkdtemp(join(tmpdir(), "dynamo-kserve-migrate-"));
  const store = await openObjectStore(location, options);
  try {
    const entries = await listUnder(store, location);
    const withConfig = new Set(
      entries.filter(({ path }) => /^[^/]+\/config\.pbtxt$/.test(path)).map(({ path }) => path.split("/")[0]!),
    );
    const configless = new Set(
      entries.map(({ path }) => path.split("/")[0]!).filter((model) => !withConfig.has(model)),
    );
    for (const { path, entry } of entries) {
      const file = join(into, path);
      const inside = relative(into, file);
      // A key that would land outside the folder ('..', absolute) is not part of a repository.
      if (inside.startsWith("..") || isAbsolute(inside)) continue;
      const [model, version] = path.split("/");
      if (model !== undefined && version !== undefined && /^[1-9]\d*$/.test(version))
        await mkdir(join(into, model, version), { recursive: true });
      if (!plannedKey(path, configless)) continue;
      await mkdir(dirname(file), { recursive: true });
      await store.download(entry, file);
    }
    return into;
  } finally {
    await store.close();
  }
}

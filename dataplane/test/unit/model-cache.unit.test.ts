import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { StorageError, type ObjectEntry, type ObjectStore } from "../../../lib/storage/store.js";
import { fileAndFolderClash, ListingDigest, unsafeKeyProblem } from "../../src/storage/keys.js";
import { ModelCache } from "../../src/storage/model-cache.js";
import { RemoteRepository } from "../../src/storage/remote-repository.js";

/**
 * A bucket in memory, for the sync logic (the real stores are the integration tests'):
 * lists in key order in pages, downloads on the version listed, counts what it did, and
 * lets a test act between a listing and a download.
 */
class MemoryStore implements ObjectStore {
  readonly name = "mem://bucket";
  readonly objects = new Map<string, Buffer>();
  downloads = 0;
  running = 0;
  mostRunning = 0;
  beforeDownload: (key: string) => void = () => undefined;
  /** Sends each body this many times over (a store serving more than it lists, e.g. a decompressed object). */
  inflation = 1;

  put(key: string, body: string | Buffer): void {
    this.objects.set(key, Buffer.from(body));
  }

  putAll(objects: Readonly<Record<string, string>>): void {
    for (const [key, body] of Object.entries(objects)) this.put(key, body);
  }

  async *list(prefix: string): AsyncIterable<ObjectEntry> {
    // The contract: the whole bucket, or a folder (GCS and Azure list a bare prefix as a folder).
    assert.ok(prefix === "" || prefix.endsWith("/"), `listed '${prefix}', not a folder prefix`);
    const keys = [...this.objects.keys()].filter((key) => key.startsWith(prefix)).sort();
    for (let page = 0; page < keys.length; page += 1000) {
      await Promise.resolve();
      for (const key of keys.slice(page, page + 1000)) yield this.entry(key);
    }
  }

  async download(entry: ObjectEntry, file: string): Promise<number> {
    this.running++;
    this.mostRunning = Math.max(this.mostRunning, this.running);
    try {
      this.beforeDownload(entry.key);
      await new Promise((resolve) => setImmediate(resolve));
      const body = this.objects.get(entry.key);
      if (body === undefined) throw new StorageError("not-found", `no such object: ${this.name}/${entry.key}`);
      if (this.entry(entry.key).version !== entry.version)
        throw new StorageError("changed", `changed while it was downloaded: ${this.name}/${entry.key}`);
      const sent = Buffer.concat(Array.from({ length: this.inflation }, () => body));
      await writeFile(file, sent);
      this.downloads++;
      return sent.length;
    } finally {
      this.running--;
    }
  }

  async close(): Promise<void> {}

  private entry(key: string): ObjectEntry {
    const body = this.objects.get(key)!;
    return { key, size: body.length, version: createHash("md5").update(body).digest("hex") };
  }
}

describe("model cache: object keys", () => {
  it("refuses keys that could name something outside the model's folder", () => {
    for (const key of [
      "../x",
      "1/../../x",
      "/etc/passwd",
      "1\\model.onnx",
      "1/a\u0000b",
      "1//x",
      "./x",
      "a\u007f",
      "",
    ]) {
      assert.notEqual(unsafeKeyProblem(key), undefined, JSON.stringify(key));
    }
    for (const key of ["config.pbtxt", "1/model.onnx", "1/sub/dir/file..bin", "ünïcode/ok", "a b/c"]) {
      assert.equal(unsafeKeyProblem(key), undefined, key);
    }
  });

  it("finds a key that is both a file and a folder", () => {
    assert.equal(fileAndFolderClash(["1/model.onnx", "1"]), "1");
    assert.equal(fileAndFolderClash(["1/a/b", "1/a"]), "1/a");
    assert.equal(fileAndFolderClash(["1/model.onnx", "10/model.onnx", "config.pbtxt"]), undefined);
  });

  it("digests a listing whatever its order, and changes with any key, version or size", () => {
    const digest = (entries: [string, string, number][]): string => {
      const listing = new ListingDigest();
      for (const [key, version, size] of entries) listing.add(key, version, size);
      return listing.digest();
    };
    const base: [string, string, number][] = [
      ["config.pbtxt", "a", 10],
      ["1/model.onnx", "b", 20],
    ];
    assert.equal(digest(base), digest([...base].reverse()));
    assert.notEqual(digest(base), digest([base[0]!, ["1/model.onnx", "c", 20]]));
    assert.notEqual(digest(base), digest([base[0]!, ["1/model.onnx", "b", 21]]));
    assert.notEqual(digest(base), digest([base[0]!, ["2/model.onnx", "b", 20]]));
    assert.notEqual(digest(base), digest([base[0]!]));
  });
});

describe("model cache: a remote repository mirrored into snapshots", () => {
  let root: string;
  let store: MemoryStore;
  let inUse: Set<string>;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "model-cache-"));
    store = new MemoryStore();
    inUse = new Set();
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  async function open(maxBytes = 0): Promise<{ cache: ModelCache; repository: RemoteRepository }> {
    const cache = new ModelCache(root, maxBytes, () => inUse);
    await cache.open();
    const repository = await RemoteRepository.open({ scheme: "s3", bucket: "bucket", prefix: "repo" }, store, cache);
    return { cache, repository };
  }

  /** Syncs every listed unit; returns each unit's outcome or error kind. */
  async function syncAll(repository: RemoteRepository): Promise<Record<string, string>> {
    const outcomes: Record<string, string> = {};
    for (const unit of (await repository.list()).values()) {
      outcomes[unit.unit] = await repository.sync(unit).catch((error: StorageError) => error.kind);
    }
    return outcomes;
  }

  const viewed = (repository: RemoteRepository, ...path: string[]): string =>
    readFileSync(join(repository.view, ...path), "utf8");

  it("downloads each model into a snapshot the view points to, and an unchanged bucket not again", async () => {
    store.putAll({
      "repo/add/config.pbtxt": "name: 'add'",
      "repo/add/1/model.onnx": "onnx-1",
      "repo/single.pbtxt": "name: 'single'",
      "repo/notes.txt": "not a model",
      "repo/add/": "",
      "elsewhere/x/config.pbtxt": "not in the repository",
    });
    const { repository } = await open();
    assert.deepEqual(await syncAll(repository), { add: "downloaded", "single.pbtxt": "downloaded" });
    assert.equal(viewed(repository, "add", "1", "model.onnx"), "onnx-1");
    assert.equal(viewed(repository, "single.pbtxt"), "name: 'single'");
    assert.match(realpathSync(join(repository.view, "add")), /snapshots\/add@[0-9a-f]{20}$/);
    assert.equal(store.downloads, 3);
    assert.deepEqual(await syncAll(repository), { add: "unchanged", "single.pbtxt": "unchanged" });
    assert.equal(store.downloads, 3, "an unchanged bucket downloads nothing");
  });

  it("swaps a changed model's view to a new snapshot, leaving the old one for the engine that reads it", async () => {
    store.put("repo/add/config.pbtxt", "v1");
    const { cache, repository } = await open();
    await syncAll(repository);
    const first = realpathSync(join(repository.view, "add"));
    inUse.add(first);
    store.put("repo/add/config.pbtxt", "v2");
    store.put("repo/add/2/model.onnx", "onnx-2");
    assert.deepEqual(await syncAll(repository), { add: "downloaded" });
    const second = realpathSync(join(repository.view, "add"));
    assert.notEqual(second, first);
    assert.equal(viewed(repository, "add", "config.pbtxt"), "v2");
    await cache.collect();
    assert.equal(readFileSync(join(first, "config.pbtxt"), "utf8"), "v1", "in use: kept");
    inUse.clear();
    await cache.collect();
    assert.deepEqual(readdirSync(join(second, "..")), [second.split("/").pop()], "no longer used: deleted");
    // Back to the first content: downloaded again (its snapshot was deleted), then shown.
    store.put("repo/add/config.pbtxt", "v1");
    store.objects.delete("repo/add/2/model.onnx");
    assert.deepEqual(await syncAll(repository), { add: "downloaded" });
    assert.equal(viewed(repository, "add", "config.pbtxt"), "v1");
  });

  it("refuses a model with an unsafe key or a key that is also a folder, and syncs the others", async () => {
    store.putAll({
      "repo/good/config.pbtxt": "ok",
      "repo/evil/../../escape": "x",
      "repo/evil/config.pbtxt": "evil",
      "repo/clash/1": "file",
      "repo/clash/1/model.onnx": "and folder",
      "repo/back\\slash/config.pbtxt": "x",
    });
    const { repository } = await open();
    assert.deepEqual(await syncAll(repository), { good: "downloaded", evil: "unsafe-key", clash: "unsafe-key" });
    assert.deepEqual(readdirSync(repository.view).sort(), ["good"]);
    const evil = (await repository.list()).get("evil")!;
    await assert.rejects(
      repository.sync(evil),
      /s3:\/\/bucket\/repo\/evil: unsafe key \('repo\/evil\/\.\.\/\.\.\/escape' has a '\.\.' segment; the model is not downloaded\)$/,
    );
    assert.deepEqual(readdirSync(root).length, 1, "nothing written outside the repository's folder");
  });

  it("keeps the last good snapshot when an object is deleted or rewritten mid-download", async () => {
    store.put("repo/add/config.pbtxt", "v1");
    store.put("repo/add/1/model.onnx", "onnx-1");
    const { repository } = await open();
    await syncAll(repository);
    const good = realpathSync(join(repository.view, "add"));
    store.put("repo/add/config.pbtxt", "v2");
    store.beforeDownload = (key) => {
      if (key.endsWith("model.onnx")) store.objects.delete(key);
    };
    assert.deepEqual(await syncAll(repository), { add: "not-found" });
    assert.equal(realpathSync(join(repository.view, "add")), good);
    store.put("repo/add/1/model.onnx", "onnx-2");
    store.beforeDownload = (key) => {
      if (key.endsWith("model.onnx")) store.put(key, "onnx-3");
    };
    assert.deepEqual(await syncAll(repository), { add: "changed" });
    assert.equal(realpathSync(join(repository.view, "add")), good);
    assert.deepEqual(readdirSync(join(root, readdirSync(root)[0]!, "tmp")), [], "no partial download left");
  });

  it("bounds the cache: deletes snapshots nothing uses, then refuses a model that does not fit", async () => {
    store.put("repo/a/1/model.onnx", "1".repeat(300));
    store.put("repo/b/1/model.onnx", "b".repeat(300));
    const { cache, repository } = await open(1000);
    assert.deepEqual(await syncAll(repository), { a: "downloaded", b: "downloaded" });
    inUse.add(realpathSync(join(repository.view, "a")));
    store.put("repo/a/1/model.onnx", "2".repeat(300));
    assert.deepEqual(await syncAll(repository), { a: "downloaded", b: "unchanged" }, "900 of 1000");
    store.put("repo/a/1/model.onnx", "3".repeat(300));
    // The first a is in use, the second shown (the last good one, until the third is complete), b shown.
    assert.deepEqual(await syncAll(repository), { a: "cache-full", b: "unchanged" });
    await assert.rejects(
      repository.sync((await repository.list()).get("a")!),
      /s3:\/\/bucket\/repo\/a: cache full \(it needs 300 bytes; models in use hold 900 of the 1000 of --model-cache-max-bytes\)$/,
    );
    assert.equal(viewed(repository, "a", "1", "model.onnx"), "2".repeat(300), "the last good one stays");
    inUse.clear();
    assert.deepEqual(await syncAll(repository), { a: "downloaded", b: "unchanged" }, "the first a deleted for room");
    await cache.collect();
    assert.equal(cache.usedBytes, 600);
    assert.equal(viewed(repository, "a", "1", "model.onnx"), "3".repeat(300));
  });

  it("serves and keeps snapshots when --model-cache-dir is a relative path or reached through a symlink", async () => {
    // The registry holds the real path of each snapshot its engines read (sources.ts realpaths the view's entries).
    const real = join(root, "real");
    mkdirSync(real);
    symlinkSync(real, join(root, "linked"));
    for (const given of [relative(process.cwd(), join(root, "relative")), join(root, "linked")]) {
      const cache = new ModelCache(given, 0, () => inUse);
      await cache.open();
      const repository = await RemoteRepository.open({ scheme: "s3", bucket: "bucket", prefix: "repo" }, store, cache);
      store.put("repo/add/config.pbtxt", "v1");
      await syncAll(repository);
      await cache.collect();
      assert.equal(viewed(repository, "add", "config.pbtxt"), "v1", `${given}: the view's snapshot stays`);
      const first = realpathSync(join(repository.view, "add"));
      inUse.add(first);
      store.put("repo/add/config.pbtxt", "v2");
      await syncAll(repository);
      await cache.collect();
      assert.equal(readFileSync(join(first, "config.pbtxt"), "utf8"), "v1", `${given}: in use, kept`);
      inUse.clear();
    }
  });

  it("syncs a model whose name is as long as a file name may be (255 bytes), in a multi-byte script too", async () => {
    const long = "模".repeat(85); // 255 bytes in UTF-8
    const ascii = "m".repeat(255);
    store.put(`repo/${long}/config.pbtxt`, "cjk");
    store.put(`repo/${ascii}/config.pbtxt`, "ascii");
    const { repository } = await open();
    assert.deepEqual(await syncAll(repository), { [long]: "downloaded", [ascii]: "downloaded" });
    assert.equal(viewed(repository, long, "config.pbtxt"), "cjk");
    assert.equal(viewed(repository, ascii, "config.pbtxt"), "ascii");
  });

  it("forgets a view link a stopped run had staged but not swapped in, so its snapshot can be cleaned", async () => {
    store.put("repo/a/config.pbtxt", "a");
    const first = await open();
    await syncAll(first.repository);
    const snapshot = realpathSync(join(first.repository.view, "a"));
    // Stopped between the new link's creation and its rename over the old one.
    symlinkSync(snapshot, join(first.repository.view, ".a.0123456789ab"));
    rmSync(join(first.repository.view, "a"));
    const again = await open();
    await again.cache.collect();
    assert.equal(again.cache.usedBytes, 0, "the staged link keeps nothing");
  });

  it("counts the bytes a download wrote, not the listed sizes, against the bound", async () => {
    store.put("repo/a/1/model.onnx", "a".repeat(300));
    store.inflation = 3;
    const { cache, repository } = await open(1000);
    assert.deepEqual(await syncAll(repository), { a: "downloaded" });
    assert.equal(cache.usedBytes, 900, "what is on the disk");
    store.put("repo/b/1/model.onnx", "b".repeat(300));
    store.inflation = 1;
    assert.deepEqual(await syncAll(repository), { a: "unchanged", b: "cache-full" });
  });

  it("takes a removed model out of the view", async () => {
    store.put("repo/a/config.pbtxt", "a");
    store.put("repo/b.pbtxt", "b");
    const { repository } = await open();
    await syncAll(repository);
    assert.deepEqual((await repository.shownUnits()).sort(), ["a", "b.pbtxt"]);
    await repository.remove("b.pbtxt");
    assert.deepEqual(await repository.shownUnits(), ["a"]);
  });

  it("counts the snapshots a previous run left, and reuses them instead of downloading", async () => {
    store.put("repo/a/config.pbtxt", "a");
    const first = await open();
    await syncAll(first.repository);
    rmSync(join(first.repository.view, "a"));
    const again = await open();
    assert.equal(again.cache.usedBytes, 1);
    assert.deepEqual(await syncAll(again.repository), { a: "reused" });
    assert.equal(store.downloads, 1);
  });

  it("downloads a model of 10,000 tiny objects, at most 4 at once", async function () {
    this.timeout(60_000);
    for (let index = 0; index < 10_000; index++) store.put(`repo/many/1/part-${index}.bin`, String(index));
    const { repository } = await open();
    const started = Date.now();
    assert.deepEqual(await syncAll(repository), { many: "downloaded" });
    console.log(`      10,000 objects synced in ${Date.now() - started} ms`);
    assert.equal(readdirSync(join(repository.view, "many", "1")).length, 10_000);
    assert.equal(store.mostRunning, 4);
  });

  it("lists 100,000 keys grouped by model while paging, holding a digest per model, not the keys", async function () {
    this.timeout(60_000);
    for (let model = 0; model < 100; model++) {
      for (let index = 0; index < 1000; index++) store.put(`repo/m${model}/1/${index}`, "");
    }
    const { repository } = await open();
    const listing = await repository.list();
    assert.equal(listing.size, 100);
    assert.equal(listing.get("m7")!.objects, 1000);
  });
});

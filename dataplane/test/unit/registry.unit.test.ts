import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import type { Engine } from "../../src/engines/engine.js";
import { ModelRegistry } from "../../src/models/registry.js";
import { unavailable } from "../../../lib/errors.js";

/** An engine that only records whether it was closed. */
class RecordingEngine implements Engine {
  closed = false;
  // eslint-disable-next-line require-yield
  async *infer(): AsyncIterable<never> {
    throw new Error("not called");
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

const config = (revision: number): string => `
# revision ${revision}
name: "m"
backend: "identity"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
`;

const tick = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 20));

describe("model registry: a replaced or unloaded engine is closed once its requests are done", () => {
  let repository: string;
  let engines: RecordingEngine[];
  let registry: ModelRegistry;
  const start = async (controlMode: "poll" | "explicit", retireGraceMs = 60_000): Promise<void> => {
    registry = new ModelRegistry({
      repositories: [repository],
      configFiles: [],
      controlMode,
      startupModels: ["*"],
      createEngine: () => {
        const engine = new RecordingEngine();
        engines.push(engine);
        return engine;
      },
      retireGraceMs,
      logger: pino({ level: "silent" }),
    });
    await registry.start();
  };
  /** A request holding model m's engine, as the pipeline holds it. */
  const acquire = () => registry.hold(registry.resolve("m", ""));
  beforeEach(() => {
    repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-registry-"));
    mkdirSync(join(repository, "m"));
    writeFileSync(join(repository, "m", "config.pbtxt"), config(0));
    engines = [];
  });
  afterEach(async () => {
    await registry.close();
    rmSync(repository, { recursive: true, force: true });
  });

  it("reload: new requests get the new engine; the old one closes when its last request releases it", async () => {
    await start("poll");
    const running = [acquire(), acquire()];
    writeFileSync(join(repository, "m", "config.pbtxt"), config(1));
    await registry.sync();
    assert.equal(engines.length, 2);
    assert.equal(acquire().model.engine, engines[1], "new requests reach the new engine");
    running[0]!.release();
    await tick();
    assert.equal(engines[0]!.closed, false, "one request still runs on it");
    running[1]!.release();
    await tick();
    assert.equal(engines[0]!.closed, true);
    assert.equal(engines[1]!.closed, false);
  });

  it("unload: refused at once for new requests; closed when the running one is done, or at the grace", async () => {
    await start("explicit", 100);
    const running = acquire();
    await registry.unload("m");
    assert.throws(() => acquire(), /Request for unknown model: 'm' has no available versions \(not ready/);
    await tick();
    assert.equal(engines[0]!.closed, false);
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.equal(engines[0]!.closed, true, "closed anyway once the grace has passed");
    running.release();
  });

  it("close: engines still finishing requests are closed without waiting", async () => {
    await start("poll");
    acquire();
    await registry.close();
    assert.equal(engines[0]!.closed, true);
  });
});

/** An engine whose start (a Python model's initialize) never finishes; closing it fails the start, as killing the processes does. */
class HangingEngine extends RecordingEngine {
  private stop: (error: Error) => void = () => undefined;
  start(): Promise<void> {
    return new Promise((_, reject) => (this.stop = reject));
  }
  override async close(): Promise<void> {
    this.stop(new Error("the process was killed"));
    await super.close();
  }
}

/** An engine whose start fails as a Python model's does when its process exits before it is ready. */
class FailingEngine extends RecordingEngine {
  start(): Promise<void> {
    return Promise.reject(
      unavailable("python model 'broken': the Python process exited with code 1 before it was ready"),
    );
  }
}

describe("model registry: a model whose load never finishes", () => {
  let repository: string;
  let engines: Map<string, RecordingEngine[]>;
  let registry: ModelRegistry;
  const write = (name: string, revision = 0): void => {
    mkdirSync(join(repository, name), { recursive: true });
    writeFileSync(join(repository, name, "config.pbtxt"), config(revision).replace('name: "m"', `name: "${name}"`));
  };
  const start = async (controlMode: "poll" | "explicit", startupModels: string[], loadTimeoutMs?: number) => {
    registry = new ModelRegistry({
      repositories: [repository],
      configFiles: [],
      controlMode,
      startupModels,
      createEngine: (spec) => {
        const engine =
          spec.name === "hung"
            ? new HangingEngine()
            : spec.name === "broken"
              ? new FailingEngine()
              : new RecordingEngine();
        engines.set(spec.name, [...(engines.get(spec.name) ?? []), engine]);
        return engine;
      },
      retireGraceMs: 60_000,
      ...(loadTimeoutMs !== undefined ? { loadTimeoutMs } : {}),
      logger: pino({ level: "silent" }),
    });
    await registry.start();
  };
  beforeEach(() => {
    repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-registry-"));
    write("m");
    write("hung");
    engines = new Map();
  });
  afterEach(async () => {
    await registry.close();
    rmSync(repository, { recursive: true, force: true });
  });

  it("keeps the registry not ready (serving) while it loads at start, though another model is ready; ready once the timeout ends it, and while a model is", async () => {
    const starting = start("poll", ["*"], 300);
    for (let waited = 0; !registry.isReady("m", ""); waited += 10) {
      assert.ok(waited < 5_000, "model m never loaded");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.equal(registry.serving(), false, "model hung is still loading");
    await starting;
    assert.equal(registry.serving(), true);
    rmSync(join(repository, "m"), { recursive: true });
    await registry.sync();
    assert.equal(registry.serving(), false, "no model is ready");
  });

  it("at start, is stopped at the load timeout: its engine closed, the model UNAVAILABLE with the reason, the others loaded", async () => {
    await start("poll", ["*"], 100);
    assert.equal(engines.get("hung")![0]!.closed, true);
    const index = await registry.index(false);
    const hung = index.find((entry) => entry.name === "hung");
    assert.equal(hung?.state, "UNAVAILABLE");
    assert.match(hung?.reason ?? "", /model 'hung' did not load within 0.1 s \(--model-load-timeout-secs\)/);
    assert.equal(registry.resolve("m", "").model.engine, engines.get("m")![0]);
  });

  it("answers a model that fails its own start INVALID_ARGUMENT (its config or code), even when the engine says UNAVAILABLE", async () => {
    write("broken");
    await start("explicit", []);
    const failure = await registry.load("broken").then(
      () => "loaded",
      (error: Error) => `${error.name}: ${error.message}`,
    );
    assert.match(failure, /^DataPlaneError\(InvalidArgument\): load failed for model 'broken': python model 'broken'/);
  });

  it("holds up no other model's load or unload, and close() stops it", async () => {
    await start("explicit", []);
    const hung = registry.load("hung").then(
      () => "loaded",
      (error: Error) => `${error.name}: ${error.message}`,
    );
    await registry.load("m");
    await registry.unload("m");
    assert.equal(engines.get("m")!.length, 1);
    await registry.close();
    // UNAVAILABLE, not INVALID_ARGUMENT: the request was fine, the server is going (retry elsewhere).
    assert.match(
      await hung,
      /^DataPlaneError\(Unavailable\): load failed for model 'hung': model 'hung' stopped loading: the server is shutting down/,
    );
    assert.equal(engines.get("hung")![0]!.closed, true);
  });

  it("is left by a poll for a later one, while the poll applies other models' changes", async () => {
    rmSync(join(repository, "hung"), { recursive: true });
    await start("poll", ["*"]);
    write("hung");
    await registry.poll(); // hung's load is queued, and runs on
    write("m", 1);
    await Promise.all(await registry.poll());
    assert.equal(engines.get("m")!.length, 2, "m was reloaded");
    assert.equal(registry.resolve("m", "").model.engine, engines.get("m")![1]);
    assert.equal(engines.get("hung")!.length, 1, "hung's load, still running, was not started again");
  });
});

describe("model registry: loads at once share one scan of the repository", () => {
  it("completes each model's config once for five loads started together (each may run a Python process)", async () => {
    const repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-registry-"));
    const names = ["a", "b", "c"];
    for (const name of names) {
      mkdirSync(join(repository, name));
      writeFileSync(join(repository, name, "config.pbtxt"), config(0).replace('name: "m"', `name: "${name}"`));
    }
    let completions = 0;
    const registry = new ModelRegistry({
      repositories: [repository],
      configFiles: [],
      controlMode: "explicit",
      startupModels: [],
      createEngine: () => new RecordingEngine(),
      completeConfig: async (completed) => {
        completions++;
        await tick();
        return completed;
      },
      retireGraceMs: 60_000,
      logger: pino({ level: "silent" }),
    });
    try {
      await Promise.all([...names, "a", "b"].map((name) => registry.load(name)));
      assert.equal(completions, names.length);
    } finally {
      await registry.close();
      rmSync(repository, { recursive: true, force: true });
    }
  });
});

describe("model registry: models from object storage (a view of snapshots)", () => {
  let root: string;
  let view: string;
  let registry: ModelRegistry;
  /** What the storage's next sync reports failed, by model. */
  let failures: Map<string, string>;
  const folders: string[] = [];

  /** A snapshot of model m (config revision `revision`), shown in the view. */
  const snapshot = (revision: number): string => {
    const folder = join(root, "snapshots", `m@${revision}`);
    mkdirSync(join(folder, "1"), { recursive: true });
    writeFileSync(join(folder, "config.pbtxt"), config(revision));
    rmSync(join(view, "m"), { force: true });
    symlinkSync(folder, join(view, "m"));
    return realpathSync(folder);
  };

  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), "dynamo-kserve-views-"));
    view = join(root, "view");
    mkdirSync(view);
    failures = new Map();
    folders.length = 0;
    registry = new ModelRegistry({
      repositories: [view],
      configFiles: [],
      storage: {
        views: new Set([view]),
        modelFiles: new Map(),
        syncAll: async () => failures,
        syncModel: async () => undefined,
        listedNames: async () => ["m"],
        modelPathFolder: async () => view,
      },
      controlMode: "poll",
      startupModels: [],
      createEngine: (_spec, _source, files) => {
        folders.push(files!.folder);
        return new RecordingEngine();
      },
      retireGraceMs: 60_000,
      logger: pino({ level: "silent" }),
    });
  });
  afterEach(async () => {
    await registry.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("gives engines the snapshot itself, and counts a retired engine's snapshot in use until it closes", async () => {
    const first = snapshot(0);
    await registry.start();
    assert.deepEqual(folders, [first]);
    const running = registry.hold(registry.resolve("m", ""));
    const second = snapshot(1);
    await registry.sync();
    assert.deepEqual(folders, [first, second]);
    assert.deepEqual([...registry.foldersInUse()].sort(), [first, second].sort());
    running.release();
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual([...registry.foldersInUse()], [second]);
  });

  it("says why a download failed, serving the last good model meanwhile, and forgets it once one succeeds", async () => {
    snapshot(0);
    await registry.start();
    failures.set("m", "s3://b/repo/m/config.pbtxt: access denied (AccessDenied, HTTP 403)");
    failures.set("gone", "s3://b/repo/gone/1/model.onnx: the object is gone (NoSuchKey, HTTP 404)");
    await registry.sync();
    const index = await registry.index(false);
    assert.deepEqual(index, [
      {
        name: "gone",
        version: "",
        state: "UNAVAILABLE",
        reason: "download failed: s3://b/repo/gone/1/model.onnx: the object is gone (NoSuchKey, HTTP 404)",
      },
      {
        name: "m",
        version: "1",
        state: "READY",
        reason:
          "download failed: s3://b/repo/m/config.pbtxt: access denied (AccessDenied, HTTP 403); still serving the last good files",
      },
    ]);
    failures.clear();
    await registry.sync();
    assert.deepEqual(await registry.index(false), [{ name: "m", version: "1", state: "READY", reason: "" }]);
  });
});

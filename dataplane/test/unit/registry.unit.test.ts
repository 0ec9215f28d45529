import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import type { Engine } from "../../src/engines/engine.js";
import { ModelRegistry } from "../../src/models/registry.js";

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

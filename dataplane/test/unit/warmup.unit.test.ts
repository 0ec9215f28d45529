import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { DataPlaneError, invalidArgument } from "../../../lib/errors.js";
import { parseText } from "../../../lib/model-repository/config.js";
import { toModelSpec, type ModelSpec } from "../../../lib/model-repository/spec.js";
import type { Engine, EngineRequest, EngineResponse, InferOptions } from "../../src/engines/engine.js";
import { ModelRegistry } from "../../src/models/registry.js";
import { VersionStatistics } from "../../src/models/statistics.js";
import { warmUp } from "../../src/scheduling/warmup.js";
import { joinBytesElements } from "../../src/tensors/bytes.js";

/** One infer call as the engine saw it. */
interface Call {
  readonly request: EngineRequest;
  readonly instance: number | undefined;
  readonly batch: readonly EngineRequest[] | undefined;
}

/** An engine that records its calls; `fail` makes a call throw, `hang` never answer, `slowMs` answer late. */
class RecordingEngine implements Engine {
  readonly calls: Call[] = [];
  closed = false;
  readonly start?: () => Promise<void>;
  constructor(
    private readonly behaviour: {
      fail?: (call: Call) => boolean;
      hang?: boolean;
      slowMs?: number;
      startMs?: number;
    } = {},
  ) {
    const { startMs } = behaviour;
    if (startMs !== undefined) this.start = () => new Promise((resolve) => setTimeout(resolve, startMs));
  }
  async *infer(request: EngineRequest, options: InferOptions): AsyncIterable<EngineResponse> {
    const call = { request, instance: options.execution?.instance, batch: options.execution?.requests };
    this.calls.push(call);
    await new Promise((resolve) => setImmediate(resolve));
    if (this.behaviour.hang) {
      await new Promise((_, reject) =>
        options.signal.addEventListener("abort", () => reject(new Error("stopped")), { once: true }),
      );
    }
    if (this.behaviour.slowMs !== undefined) await new Promise((resolve) => setTimeout(resolve, this.behaviour.slowMs));
    if (this.behaviour.fail?.(call)) throw invalidArgument(`cold on instance ${call.instance}`);
    yield { outputs: [] };
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

const specOf = (text: string): ModelSpec => toModelSpec(parseText(text, "config.pbtxt"), "config.pbtxt", "m", text);

/** A batching identity model with two instances and `warmup` (model_warmup entries). */
const config = (warmup: string, { backend = "identity", count = 2 } = {}): string => `
name: "m"
backend: "${backend}"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] optional: true } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
instance_group [ { kind: KIND_CPU count: ${count} } ]
model_warmup [ ${warmup} ]
`;

/** A warmup sample; batch_size 1 unless `extra` sets it (Triton skips one of batch_size 0). */
const sample = (name: string, inputs: string, extra = "batch_size: 1"): string =>
  `{ name: "${name}" ${extra} inputs ${inputs} }`;
const fp32 = (data: string): string => `{ key: "IN" value: { data_type: TYPE_FP32 dims: [ 2 ] ${data} } }`;
const text = (data: string): string => `{ key: "TEXT" value: { data_type: TYPE_STRING dims: [ 1 ] ${data} } }`;

const never = new AbortController().signal;

describe("model warmup (model_warmup): every sample, count times, on every instance of every version", () => {
  let folder: string;
  beforeEach(() => {
    folder = mkdtempSync(join(tmpdir(), "dynamo-kserve-warmup-"));
    mkdirSync(join(folder, "warmup"));
  });
  afterEach(() => rmSync(folder, { recursive: true, force: true }));

  it("runs each sample count times per instance and version, a batch of batch_size requests of batch 1", async () => {
    const spec = specOf(
      config(
        [
          sample("zeros", fp32("zero_data: true"), "batch_size: 3 count: 2"),
          sample("one", fp32("zero_data: true"), "batch_size: 1"),
          sample("skipped, as Triton skips it", fp32("zero_data: true"), "batch_size: 0 count: 5"),
        ].join(", "),
      ),
    );
    const engine = new RecordingEngine();
    await warmUp({ spec, engine, versions: ["1", "2"], scheduled: true }, never);
    // Per version and instance: 2 runs of 3 requests, then 1 run of 1 request.
    assert.equal(engine.calls.length, 2 * 2 * (2 * 3 + 1));
    for (const version of ["1", "2"]) {
      for (const instance of [0, 1]) {
        const mine = engine.calls.filter((call) => call.request.version === version && call.instance === instance);
        assert.deepEqual(
          mine.map((call) => call.batch?.length),
          [3, 3, 3, 3, 3, 3, 1],
          `version ${version} instance ${instance}`,
        );
        // The requests of a run are the execution's, each given once.
        assert.ok(mine.slice(0, 3).every((call) => call.batch!.includes(call.request)));
      }
    }
    const input = engine.calls[0]!.request.inputs[0]!;
    assert.deepEqual([input.name, input.datatype, input.shape], ["IN", "FP32", [1, 2]]);
    assert.deepEqual([...input.data], new Array<number>(8).fill(0));
  });

  it("counts the runs in the statistics as Triton does, once the whole warmup has succeeded", async () => {
    const spec = specOf(config(sample("zeros", fp32("zero_data: true"), "batch_size: 3 count: 2")));
    const statistics = new Map<string, VersionStatistics>();
    const of = (version: string): VersionStatistics => {
      if (!statistics.has(version)) statistics.set(version, new VersionStatistics());
      return statistics.get(version)!;
    };
    await warmUp({ spec, engine: new RecordingEngine(), versions: ["1"], scheduled: true, statistics: of }, never);
    const counted = of("1").toProto("m", "1");
    // 2 instances x 2 runs of 3 requests: 12 inferences in 4 executions of batch size 3.
    assert.deepEqual([counted.inferenceCount, counted.executionCount], [12n, 4n]);
    assert.deepEqual(
      counted.batchStats.map((batch) => [batch.batchSize, batch.computeInfer?.count]),
      [[3n, 4n]],
    );
    assert.equal(counted.inferenceStats?.queue?.ns, 0n, "a warmup request does not queue");
    // A warmup that fails on its last run counts nothing (an update refused leaves the served model's alone).
    let calls = 0;
    const failing = new RecordingEngine({ fail: () => ++calls === 12 });
    await assert.rejects(warmUp({ spec, engine: failing, versions: ["2"], scheduled: true, statistics: of }, never));
    assert.equal(of("2").toProto("m", "2").inferenceCount, 0n);
  });

  it("without batching, a request has the sample's dims as its shape", async () => {
    const spec = specOf(
      config(sample("s", fp32("zero_data: true"), "batch_size: 1")).replace("max_batch_size: 8", "max_batch_size: 0"),
    );
    const engine = new RecordingEngine();
    await warmUp({ spec, engine, versions: ["1"], scheduled: true }, never);
    assert.deepEqual(engine.calls[0]!.request.inputs[0]!.shape, [2]);
  });

  it("random data: random bytes, except BYTES elements, which are empty (as Triton)", async () => {
    const spec = specOf(config(sample("r", `[ ${fp32("random_data: true")}, ${text("random_data: true")} ]`)));
    const engine = new RecordingEngine();
    await warmUp({ spec, engine, versions: ["1"], scheduled: true }, never);
    const [numbers, strings] = engine.calls[0]!.request.inputs;
    assert.equal(numbers!.data.byteLength, 8);
    const again = new RecordingEngine();
    await warmUp({ spec, engine: again, versions: ["1"], scheduled: true }, never);
    assert.notDeepEqual([...numbers!.data], [...again.calls[0]!.request.inputs[0]!.data], "drawn afresh");
    assert.deepEqual([...strings!.data], [0, 0, 0, 0]);
  });

  it("file data: the file in warmup/ is the tensor, BYTES as length-prefixed elements", async () => {
    writeFileSync(join(folder, "warmup", "in.bin"), new Uint8Array(new Float32Array([1.5, -2]).buffer));
    writeFileSync(join(folder, "warmup", "text.bin"), joinBytesElements([new TextEncoder().encode("hello")]));
    const spec = specOf(
      config(sample("f", `[ ${fp32('input_data_file: "in.bin"')}, ${text('input_data_file: "text.bin"')} ]`)),
    );
    const engine = new RecordingEngine();
    await warmUp({ spec, engine, versions: ["1"], scheduled: true, folder }, never);
    const [numbers, strings] = engine.calls[0]!.request.inputs;
    assert.deepEqual([...new Float32Array(numbers!.data.slice().buffer)], [1.5, -2]);
    assert.equal(new TextDecoder().decode(strings!.data.subarray(4)), "hello");
  });

  const refused = async (spec: ModelSpec, pattern: RegExp, at = folder): Promise<void> => {
    const engine = new RecordingEngine();
    await assert.rejects(
      warmUp({ spec, engine, versions: ["1"], scheduled: true, folder: at }, never),
      (error: unknown) => {
        assert.ok(error instanceof DataPlaneError);
        assert.equal(error.kind, "InvalidArgument");
        assert.match(error.message, pattern);
        return true;
      },
    );
    assert.equal(engine.calls.length, 0, "nothing runs with data that cannot be made");
  };

  it("a data file of the wrong size, or bad BYTES framing, is refused naming the sample, input and sizes", async () => {
    writeFileSync(join(folder, "warmup", "short.bin"), new Uint8Array(4));
    writeFileSync(join(folder, "warmup", "long.bin"), new Uint8Array(12));
    writeFileSync(join(folder, "warmup", "two.bin"), joinBytesElements([new Uint8Array(1), new Uint8Array(2)]));
    writeFileSync(join(folder, "warmup", "broken.bin"), new Uint8Array([9, 0, 0, 0, 1]));
    await refused(
      specOf(config(sample("w", fp32('input_data_file: "short.bin"')))),
      /^model_warmup 'w': input 'IN': input_data_file 'short.bin': .*raw data is 4 bytes, but shape \[1,2\] of FP32 needs 8/,
    );
    await refused(specOf(config(sample("w", fp32('input_data_file: "long.bin"')))), /12 bytes.*needs 8/);
    await refused(
      specOf(config(sample("w", text('input_data_file: "two.bin"')))),
      /needs 1 BYTES elements, raw data holds 2/,
    );
    await refused(specOf(config(sample("w", text('input_data_file: "broken.bin"')))), /malformed BYTES data/);
  });

  it("a sample is held to the model's inputs: data types, dims, and every required input given", async () => {
    const int32 = `{ key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } }`;
    const wide = `{ key: "IN" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } }`;
    await refused(
      specOf(config(sample("w", int32))),
      /^model_warmup 'w': input 'IN': data_type TYPE_INT32, where the model's input is TYPE_FP32$/,
    );
    await refused(
      specOf(config(sample("w", wide))),
      /^model_warmup 'w': input 'IN': dims \[3\] do not fit the model's input \[2\] \(without the batch dimension\)$/,
    );
    const textRequired = config(sample("w", fp32("zero_data: true"))).replace("optional: true", "");
    await refused(
      specOf(textRequired),
      /^model_warmup 'w': no data for the model's input 'TEXT' \(only optional inputs may be left out\)$/,
    );
  });

  it("a data file can never be read from outside the model's warmup/ folder, symlinks included", async () => {
    const outside = mkdtempSync(join(tmpdir(), "dynamo-kserve-outside-"));
    try {
      writeFileSync(join(outside, "secret"), new Uint8Array(8));
      symlinkSync(join(outside, "secret"), join(folder, "warmup", "link.bin"));
      await refused(
        specOf(config(sample("w", fp32('input_data_file: "link.bin"')))),
        /input_data_file 'link.bin': resolves outside the model's warmup\/ folder/,
      );
      // A warmup/ folder that is itself a link elsewhere is outside too.
      const linked = mkdtempSync(join(tmpdir(), "dynamo-kserve-linked-"));
      symlinkSync(outside, join(linked, "warmup"));
      await refused(specOf(config(sample("w", fp32('input_data_file: "secret"')))), /resolves outside/, linked);
      rmSync(linked, { recursive: true });
      mkdirSync(join(folder, "warmup", "dir.bin"));
      await refused(specOf(config(sample("w", fp32('input_data_file: "dir.bin"')))), /not a regular file/);
      await refused(specOf(config(sample("w", fp32('input_data_file: "none.bin"')))), /no such file/);
      // The config check refuses a path before anything is read (lib/model-repository/scheduling.ts).
      assert.throws(() => specOf(config(sample("w", fp32('input_data_file: "../x"')))), /input_data_file/);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it("a failing run fails the warmup naming the sample, instance and version, and stops the other instances", async () => {
    const spec = specOf(config(sample("cold", fp32("zero_data: true"), "batch_size: 2 count: 50")));
    const engine = new RecordingEngine({ fail: (call) => call.instance === 1 });
    await assert.rejects(
      warmUp({ spec, engine, versions: ["1"], scheduled: true }, never),
      (error: Error) => error.message === "model_warmup 'cold': failed on instance 1 of version 1: cold on instance 1",
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    const others = engine.calls.filter((call) => call.instance === 0).length;
    assert.ok(others < 2 * 50, `instance 0 stopped (${others} calls)`);
  });

  it("leaves models of engines that do not run here alone (their server warms them)", async () => {
    const spec = specOf(config(sample("s", fp32("zero_data: true"))));
    const engine = new RecordingEngine();
    await warmUp({ spec, engine, versions: ["1"], scheduled: false }, never);
    assert.equal(engine.calls.length, 0);
  });
});

describe("model warmup in the registry: before READY, bounded by the load timeout", () => {
  let repository: string;
  let registry: ModelRegistry | undefined;
  beforeEach(() => {
    repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-warmup-registry-"));
    mkdirSync(join(repository, "m"));
  });
  afterEach(async () => {
    await registry?.close();
    rmSync(repository, { recursive: true, force: true });
  });

  const start = async (engines: RecordingEngine[], loadTimeoutMs?: number): Promise<ModelRegistry> => {
    let made = 0;
    registry = new ModelRegistry({
      repositories: [repository],
      configFiles: [],
      controlMode: "explicit",
      startupModels: [],
      createEngine: () => engines[made++]!,
      schedules: () => true,
      retireGraceMs: 1000,
      ...(loadTimeoutMs !== undefined ? { loadTimeoutMs } : {}),
      logger: pino({ level: "silent" }),
    });
    await registry.start();
    return registry;
  };
  const write = (warmup: string): void =>
    writeFileSync(join(repository, "m", "config.pbtxt"), config(warmup, { count: 1 }));
  const stateOf = (served: ModelRegistry): { state: string } => ({
    state: served.isReady("m", "") ? "READY" : "UNAVAILABLE",
  });
  /** Why a request to m is refused ("" when it is served). */
  const reasonOf = (served: ModelRegistry): string => {
    try {
      served.resolve("m", "");
      return "";
    } catch (error) {
      return (error as Error).message;
    }
  };

  it("a model is READY only after its warmup ran; a failing one stays UNAVAILABLE with the reason", async () => {
    write(sample("s", fp32("zero_data: true"), "batch_size: 1 count: 3"));
    const good = new RecordingEngine();
    const bad = new RecordingEngine({ fail: () => true });
    const served = await start([good, bad]);
    await served.load("m");
    assert.equal(good.calls.length, 3);
    assert.equal(stateOf(served).state, "READY");
    // A new config whose warmup fails: refused, the last good one serves on.
    write(sample("t", fp32("zero_data: true")));
    await assert.rejects(served.load("m"), /load failed for model 'm': model_warmup 't': failed on instance 0/);
    assert.equal(bad.closed, true, "the engine that failed its warmup is closed");
    assert.equal(stateOf(served).state, "READY");
    assert.equal(served.resolve("m", "").model.engine, good);
  });

  it("a first load whose warmup fails leaves the model UNAVAILABLE, the reason saying why", async () => {
    write(sample("s", fp32("zero_data: true")));
    const served = await start([new RecordingEngine({ fail: () => true })]);
    await assert.rejects(served.load("m"), /model_warmup 's'/);
    assert.equal(stateOf(served).state, "UNAVAILABLE");
    assert.match(reasonOf(served), /model_warmup 's': failed on instance 0 of version 1: cold on instance 0/);
  });

  it("a warmup that does not finish within the load timeout fails the load and stops its runs", async () => {
    write(sample("s", fp32("zero_data: true")));
    const hanging = new RecordingEngine({ hang: true });
    const served = await start([hanging], 200);
    await assert.rejects(
      served.load("m"),
      /did not load \(model_warmup still running\) within 0.2 s \(--model-load-timeout-secs\)/,
    );
    assert.equal(hanging.closed, true);
    assert.equal(stateOf(served).state, "UNAVAILABLE");
  });

  it("the engine's start and the warmup share the load timeout", async () => {
    write(sample("s", fp32("zero_data: true")));
    // Each fits the timeout alone; together they do not.
    const engine = new RecordingEngine({ startMs: 600, slowMs: 600 });
    const served = await start([engine], 1000);
    await assert.rejects(served.load("m"), /did not load \(model_warmup still running\) within 1 s/);
    assert.equal(engine.calls.length, 1, "the warmup had started");
  });
});

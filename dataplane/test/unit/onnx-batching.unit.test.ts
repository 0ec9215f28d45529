import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Tensor as OrtTensor } from "onnxruntime-node";
import { onnxEngine, type BatchInputSpec } from "../../../lib/engines/onnx.js";
import { parseText } from "../../../lib/model-repository/config.js";
import { toModelSpec } from "../../../lib/model-repository/spec.js";
import { DataPlaneError } from "../../../lib/errors.js";
import { usableCores } from "../../src/cpu-budget.js";
import type { EngineRequest, EngineResponse, Execution } from "../../src/engines/engine.js";
import { batchInputValues } from "../../src/engines/onnx/batch.js";
import { OnnxEngine } from "../../src/engines/onnx/onnx.js";
import { SessionHost } from "../../src/engines/onnx/session-host.js";
import type { Tensor } from "../../src/tensors/tensor.js";
import { ONNX_TEST_MODELS, oneInOneOut, raggedSumConfig } from "../fixtures/onnx-models.js";
import { EXAMPLES } from "../fixtures/paths.js";

/**
 * The onnx engine under the scheduler's contract: called with Execution objects as the
 * scheduler (dataplane/src/scheduling/) calls it, once per request of an execution.
 */

const MLP = oneInOneOut("mlp", 64, 16);

const ADD_SUB = `
name: "add_sub"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
`;

const RAGGED = raggedSumConfig("ragged");

const WRONG_BATCH = oneInOneOut("wrong", 4, 4);

const folders: string[] = [];
after(() => folders.forEach((folder) => rmSync(folder, { recursive: true, force: true })));

/** An engine for the config, its version 1 the model file given, started. */
async function engineFor(config: string, modelFile: string): Promise<OnnxEngine> {
  const engine = engineOf(config, modelFile);
  await engine.start();
  return engine;
}

function engineOf(config: string, modelFile: string): OnnxEngine {
  const folder = mkdtempSync(join(tmpdir(), "onnx-batching-"));
  folders.push(folder);
  mkdirSync(join(folder, "1"));
  copyFileSync(modelFile, join(folder, "1", "model.onnx"));
  const source = join(folder, "config.pbtxt");
  const spec = toModelSpec(parseText(config, source), source);
  return new OnnxEngine(onnxEngine.settings(spec, source), { folder, versions: [1], served: ["1"] });
}

const settingsError = (config: string): Error => {
  const source = "/models/m/config.pbtxt";
  try {
    onnxEngine.settings(toModelSpec(parseText(config, source), source), source);
  } catch (error) {
    return error as Error;
  }
  assert.fail("the config was accepted");
};

const fp32 = (name: string, shape: number[], values: number[]): Tensor => ({
  name,
  datatype: "FP32",
  shape,
  data: new Uint8Array(Float32Array.from(values).buffer),
});

const request = (inputs: Tensor[], outputs: string[] = []): EngineRequest => ({
  id: "",
  version: "1",
  parameters: {},
  inputs,
  requestedOutputs: new Set(outputs),
});

const valuesOf = (tensor: Tensor | undefined): number[] => {
  assert.ok(tensor, "an output is missing");
  const copy = tensor.data.slice();
  return [...new Float32Array(copy.buffer, 0, copy.byteLength / 4)];
};

const signal = new AbortController().signal;

async function only(responses: AsyncIterable<EngineResponse>): Promise<EngineResponse> {
  const all: EngineResponse[] = [];
  for await (const response of responses) all.push(response);
  assert.equal(all.length, 1);
  return all[0]!;
}

/** Every request of an execution on `instance`, called as the scheduler calls them (all at once). */
function runExecution(engine: OnnxEngine, requests: EngineRequest[], instance = 0): Promise<EngineResponse>[] {
  const execution: Execution = { instance, requests, release: () => {} };
  return requests.map((each) => only(engine.infer(each, { signal, deadline: Infinity, traceHeaders: {}, execution })));
}

const alone = (engine: OnnxEngine, each: EngineRequest): Promise<EngineResponse> =>
  only(engine.infer(each, { signal, deadline: Infinity, traceHeaders: {} }));

/** Counts onnxruntime's runs while `body` runs (a batch is one run). */
async function countingRuns<T>(body: () => Promise<T>): Promise<{ result: T; runs: number }> {
  const original = SessionHost.prototype.run;
  let runs = 0;
  SessionHost.prototype.run = function (this: SessionHost, ...args: Parameters<typeof original>) {
    runs++;
    return original.apply(this, args);
  };
  try {
    return { result: await body(), runs };
  } finally {
    SessionHost.prototype.run = original;
  }
}

const seeded = (count: number, seed: number): number[] =>
  Array.from({ length: count }, (_, index) => Math.sin(seed * 1000 + index) * 3);

describe("onnx engine: an execution's requests as one run", function () {
  this.timeout(20_000);

  it("joins requests of different batch sizes into one run, each getting exactly its own rows", async () => {
    const engine = await engineFor(MLP, join(EXAMPLES, "mlp_onnx", "1", "model.onnx"));
    try {
      const sizes = [1, 3, 2, 5];
      const requests = sizes.map((size, index) => request([fp32("INPUT", [size, 64], seeded(size * 64, index))]));
      const single = await Promise.all(requests.map((each) => alone(engine, each)));
      const { result: batched, runs } = await countingRuns(() => Promise.all(runExecution(engine, requests)));
      assert.equal(runs, 1, "the execution is one session.run");
      batched.forEach((response, index) => {
        assert.deepEqual(response.outputs[0]?.shape, [sizes[index], 16]);
        const expected = valuesOf(single[index]!.outputs[0]);
        valuesOf(response.outputs[0]).forEach((value, at) => assert.ok(Math.abs(value - expected[at]!) < 1e-4));
      });
    } finally {
      await engine.close();
    }
  });

  it("runs the union of the requested outputs, and answers each request with what it asked for", async () => {
    const engine = await engineFor(ADD_SUB, join(EXAMPLES, "add_sub_onnx", "1", "model.onnx"));
    try {
      const inputs = (value: number) => [
        fp32("INPUT0", [1, 4], [value, value, value, value]),
        fp32("INPUT1", [1, 4], [1, 1, 1, 1]),
      ];
      const [first, second, third] = await Promise.all(
        runExecution(engine, [request(inputs(1), ["OUTPUT0"]), request(inputs(2), ["OUTPUT1"]), request(inputs(3))]),
      );
      assert.deepEqual(
        first!.outputs.map(({ name }) => name),
        ["OUTPUT0"],
      );
      assert.deepEqual(valuesOf(first!.outputs[0]), [2, 2, 2, 2]);
      assert.deepEqual(
        second!.outputs.map(({ name }) => name),
        ["OUTPUT1"],
      );
      assert.deepEqual(valuesOf(second!.outputs[0]), [1, 1, 1, 1]);
      assert.deepEqual(
        third!.outputs.map(({ name }) => [name, valuesOf(third!.outputs.find((output) => output.name === name))]),
        [
          ["OUTPUT0", [4, 4, 4, 4]],
          ["OUTPUT1", [2, 2, 2, 2]],
        ],
      );
    } finally {
      await engine.close();
    }
  });

  it("flattens a ragged input and makes the config's batch inputs from the requests", async () => {
    const engine = await engineFor(RAGGED, join(ONNX_TEST_MODELS, "ragged_sum.onnx"));
    try {
      const requests = [3, 4, 5].map((length) =>
        request([
          fp32(
            "INPUT",
            [1, length],
            Array.from({ length }, (_, index) => index + 1),
          ),
        ]),
      );
      const { result: replies, runs } = await countingRuns(() => Promise.all(runExecution(engine, requests)));
      assert.equal(runs, 1);
      assert.deepEqual(
        replies.map((reply) => reply.outputs.map((output) => [output.name, output.shape, valuesOf(output)])),
        [
          [
            ["SUM", [1, 1], [6]],
            ["COUNT", [1, 1], [3]],
          ],
          [
            ["SUM", [1, 1], [10]],
            ["COUNT", [1, 1], [4]],
          ],
          [
            ["SUM", [1, 1], [15]],
            ["COUNT", [1, 1], [5]],
          ],
        ],
      );
      const reply = await alone(engine, request([fp32("INPUT", [1, 2], [5, 6])], ["SUM"]));
      assert.deepEqual(valuesOf(reply.outputs[0]), [11], "a request alone is a batch of one");
    } finally {
      await engine.close();
    }
  });

  it("fails every request of an execution whose output is not one row per batch item, naming the output", async () => {
    const engine = await engineFor(WRONG_BATCH, join(ONNX_TEST_MODELS, "wrong_batch.onnx"));
    try {
      const input = () => fp32("INPUT", [1, 4], [1, 2, 3, 4]);
      const outcomes = await Promise.allSettled(runExecution(engine, [request([input()]), request([input()])]));
      for (const outcome of outcomes) {
        assert.equal(outcome.status, "rejected");
        const error = outcome.reason as DataPlaneError;
        assert.equal(error.kind, "Internal");
        assert.match(error.message, /output 'OUTPUT' has shape \[1, 4\]: its first dimension is not the batch size 2/);
      }
      const reply = await alone(engine, request([input()]));
      assert.deepEqual(valuesOf(reply.outputs[0]), [1, 2, 3, 4], "one row for a batch of one is right");
    } finally {
      await engine.close();
    }
  });

  it("refuses to join requests whose inputs differ past the batch dimension (never a wrong join)", async () => {
    const engine = await engineFor(oneInOneOut("mlp", -1, 16), join(EXAMPLES, "mlp_onnx", "1", "model.onnx"));
    try {
      const outcomes = await Promise.allSettled(
        runExecution(engine, [
          request([fp32("INPUT", [1, 64], seeded(64, 1))]),
          request([fp32("INPUT", [1, 32], seeded(32, 2))]),
        ]),
      );
      for (const outcome of outcomes) {
        assert.equal(outcome.status, "rejected");
        assert.match(
          (outcome.reason as Error).message,
          /input 'INPUT': requests of shapes \[1, 64\] and \[1, 32\] cannot be joined/,
        );
      }
    } finally {
      await engine.close();
    }
  });
});

describe("onnx engine: instances", function () {
  this.timeout(20_000);

  it("makes one session per instance, with its share of the cores, and runs an execution on its instance", async () => {
    const original = SessionHost.create.bind(SessionHost);
    const threads: (number | undefined)[] = [];
    SessionHost.create = (path, options) => {
      threads.push(options.intraOpNumThreads);
      return original(path, options);
    };
    let engine: OnnxEngine;
    try {
      engine = await engineFor(
        `${MLP}\ninstance_group [ { count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_MODEL } ]`,
        join(EXAMPLES, "mlp_onnx", "1", "model.onnx"),
      );
    } finally {
      SessionHost.create = original;
    }
    try {
      assert.deepEqual(threads, new Array(3).fill(Math.max(1, Math.floor(usableCores() / 3))));
      const input = () => request([fp32("INPUT", [1, 64], seeded(64, 3))]);
      const expected = valuesOf((await alone(engine, input())).outputs[0]);
      for (const instance of [0, 1, 2]) {
        const [reply] = await Promise.all(runExecution(engine, [input()], instance));
        assert.deepEqual(valuesOf(reply!.outputs[0]), expected);
      }
      await assert.rejects(Promise.all(runExecution(engine, [input()], 3)), /instance 3 is not one of the model's 3/);
    } finally {
      await engine.close();
    }
  });

  it("refuses KIND_GPU where onnxruntime has no GPU, naming instance_group[i].kind and what to set", async () => {
    const engine = engineOf(
      `${MLP}\ninstance_group [ { count: 1 kind: KIND_CPU }, { count: 1 kind: KIND_GPU gpus: [ 0 ] } ]`,
      join(EXAMPLES, "mlp_onnx", "1", "model.onnx"),
    );
    try {
      await assert.rejects(engine.start(), (error: DataPlaneError) => {
        assert.equal(error.kind, "Unavailable");
        assert.match(
          error.message,
          /^instance_group\[1\]\.kind: KIND_GPU needs onnxruntime's CUDA execution provider on GPU 0, which this data plane cannot use \(.+\); set kind: KIND_CPU \(or KIND_AUTO\)/,
        );
        return true;
      });
    } finally {
      await engine.close();
    }
  });
});

describe("onnx engine: a session's thread", function () {
  this.timeout(20_000);

  it("fails a run in progress when its session is released, and refuses runs after", async () => {
    const host = await SessionHost.create(join(EXAMPLES, "mlp_onnx", "1", "model.onnx"), { intraOpNumThreads: 1 });
    const rows = 4096;
    const input = fp32("INPUT", [rows, 64], seeded(rows * 64, 5));
    const feeds = { INPUT: new OrtTensor("float32", new Float32Array(input.data.buffer), [rows, 64]) };
    const running = host.run(feeds, ["OUTPUT"], new Set());
    await host.release();
    await assert.rejects(running, /the onnxruntime session's thread stopped/);
    await assert.rejects(host.run(feeds, ["OUTPUT"], new Set()), /the onnxruntime session was released/);
  });

  it("keeps the process alive until a released session's thread has exited (a shutdown ended with its stop unfinished)", () => {
    // The idle thread is unref'd: a process whose other handles were closed (a data plane at
    // the end of its drain) exited, code 0, while release() still waited for the thread.
    const script = [
      `import { SessionHost } from ${JSON.stringify(new URL("../../src/engines/onnx/session-host.js", import.meta.url).href)};`,
      `const host = await SessionHost.create(${JSON.stringify(join(EXAMPLES, "mlp_onnx", "1", "model.onnx"))}, { intraOpNumThreads: 1 });`,
      `host.release().then(() => console.log("released"));`,
    ].join("\n");
    const folder = mkdtempSync(join(tmpdir(), "session-release-"));
    try {
      writeFileSync(join(folder, "release.mjs"), script);
      const output = execFileSync(process.execPath, [join(folder, "release.mjs")], { encoding: "utf8" });
      assert.match(output, /released/);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("lets a run onnxruntime has begun end before its thread does, when released mid-run (the process lives on)", async () => {
    // Ending the thread inside onnxruntime's run aborted the whole process (a reload or
    // shutdown with a run in flight took every other model down).
    const host = await SessionHost.create(join(EXAMPLES, "mlp_onnx", "1", "model.onnx"), { intraOpNumThreads: 1 });
    const rows = 16384;
    const input = fp32("INPUT", [rows, 64], seeded(rows * 64, 7));
    const feeds = { INPUT: new OrtTensor("float32", new Float32Array(input.data.buffer), [rows, 64]) };
    const failed = [host.run(feeds, ["OUTPUT"], new Set()), host.run(feeds, ["OUTPUT"], new Set())].map((run) =>
      assert.rejects(run, /the onnxruntime session's thread stopped/),
    );
    await new Promise((resolve) => setTimeout(resolve, 50)); // the first run is inside onnxruntime
    await host.release();
    await Promise.all(failed);
    const again = await SessionHost.create(join(EXAMPLES, "mlp_onnx", "1", "model.onnx"), { intraOpNumThreads: 1 });
    try {
      const one = new OrtTensor("float32", new Float32Array(seeded(64, 8)), [1, 64]);
      assert.equal((await again.run({ INPUT: one }, ["OUTPUT"], new Set()))["OUTPUT"]?.dims[1], 16);
    } finally {
      await again.release();
    }
  });

  it("drops a request cancelled while its run waits for the session's thread, without running it", async () => {
    // Each run was posted to the thread at once and run there even when its caller had
    // gone: clients sending with short deadlines (or an ensemble's cancelled fan-out) piled
    // up runs nobody waited for, and every other client of the process waited behind them.
    const engine = await engineFor(MLP, join(EXAMPLES, "mlp_onnx", "1", "model.onnx"));
    try {
      const rows = 16384;
      const settled: string[] = [];
      const long = alone(engine, request([fp32("INPUT", [rows, 64], seeded(rows * 64, 9))])).then(() =>
        settled.push("long"),
      );
      const cancel = new AbortController();
      const options = { signal: cancel.signal, deadline: Infinity, traceHeaders: {} };
      const waiting = Array.from({ length: 20 }, (_, index) =>
        only(engine.infer(request([fp32("INPUT", [64, 64], seeded(64 * 64, index))]), options)).then(
          () => settled.push("ran"),
          (error: unknown) => settled.push(error instanceof DataPlaneError ? error.kind : "other"),
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 20));
      cancel.abort();
      await Promise.all([long, ...waiting]);
      assert.deepEqual(settled, [...new Array<string>(20).fill("Cancelled"), "long"]);
    } finally {
      await engine.close();
    }
  });

  it("moves a buffer it owns to the thread, and copies one it does not", async () => {
    const host = await SessionHost.create(join(EXAMPLES, "mlp_onnx", "1", "model.onnx"), { intraOpNumThreads: 1 });
    try {
      const tensor = () => new OrtTensor("float32", new Float32Array(seeded(64, 6)), [1, 64]);
      const kept = tensor();
      const given = tensor();
      const [fromKept, fromGiven] = [
        await host.run({ INPUT: kept }, ["OUTPUT"], new Set()),
        await host.run({ INPUT: given }, ["OUTPUT"], new Set(["INPUT"])),
      ];
      assert.equal((kept.data as Float32Array).length, 64, "still the caller's");
      assert.equal((given.data as Float32Array).length, 0, "moved (detached)");
      assert.deepEqual(fromKept["OUTPUT"]?.data, fromGiven["OUTPUT"]?.data);
    } finally {
      await host.release();
    }
  });
});

describe("onnx engine: what a config asks that it refuses", () => {
  it("names the field of a batch_output, a batch_input it cannot make, and a KIND_CPU group with GPUs", () => {
    const refusals: [string, RegExp][] = [
      [
        `batch_output [ { target_name: "SUM" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]`,
        /batch_output\[0\]\.kind: BATCH_SCATTER_WITH_INPUT_SHAPE is not supported by the onnxruntime engine/,
      ],
      [
        `batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP16 source_input: "INPUT" } ]`,
        /batch_input\[0\]\.data_type: a batch input is TYPE_INT32 or TYPE_FP32/,
      ],
      [
        `batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_INT32 source_input: "NOPE" } ]`,
        /batch_input\[0\]\.source_input: the model has no input 'NOPE'/,
      ],
      [
        `batch_input [ { kind: BATCH_ITEM_SHAPE target_name: "N" data_type: TYPE_INT32 source_input: [ "INPUT", "INPUT" ] } ]`,
        /batch_input\[0\]\.source_input: BATCH_ITEM_SHAPE derives from 1 source input, got 2/,
      ],
      [
        `batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "INPUT" data_type: TYPE_INT32 source_input: "INPUT" } ]`,
        /batch_input\[0\]\.target_name: 'INPUT' is a request input/,
      ],
      [
        `instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]`,
        /instance_group\[0\]\.gpus: a KIND_CPU group lists no GPUs/,
      ],
    ];
    for (const [field, message] of refusals) {
      const error = settingsError(`${MLP}\n${field}`);
      assert.equal(error.name, "DataPlaneError(InvalidArgument)");
      assert.match(error.message, message);
    }
  });
});

describe("onnx engine: batch input values (Triton's definitions)", () => {
  const spec = (kind: BatchInputSpec["kind"]): BatchInputSpec => ({
    kind,
    targetNames: ["T"],
    datatype: "INT32",
    sourceInput: "X",
  });
  const requestOf = (shape: number[]): EngineRequest =>
    request([fp32("X", shape, new Array<number>(shape.reduce((product, dim) => product * dim, 1)).fill(0))]);

  it("counts elements per request, accumulated, with a leading zero, or as the largest as a shape", () => {
    const requests = [requestOf([1, 2]), requestOf([1, 2])];
    assert.deepEqual(batchInputValues(spec("BATCH_ELEMENT_COUNT"), requests), { shape: [2], values: [2, 2] });
    assert.deepEqual(batchInputValues(spec("BATCH_ACCUMULATED_ELEMENT_COUNT"), requests), {
      shape: [2],
      values: [2, 4],
    });
    assert.deepEqual(batchInputValues(spec("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"), requests), {
      shape: [3],
      values: [0, 2, 4],
    });
    assert.deepEqual(
      batchInputValues(spec("BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"), [requestOf([1, 3]), requestOf([1, 7])]).shape,
      [7],
    );
  });

  it("gives each batch item's shape, as rows or flattened (model_config.proto's example)", () => {
    // A batch-2 input of shape [3, 1] and a batch-1 input of shape [2, 2].
    const requests = [requestOf([2, 3, 1]), requestOf([1, 2, 2])];
    assert.deepEqual(batchInputValues(spec("BATCH_ITEM_SHAPE"), requests), {
      shape: [3, 2],
      values: [3, 1, 3, 1, 2, 2],
    });
    assert.deepEqual(batchInputValues(spec("BATCH_ITEM_SHAPE_FLATTEN"), requests), {
      shape: [6],
      values: [3, 1, 3, 1, 2, 2],
    });
  });
});

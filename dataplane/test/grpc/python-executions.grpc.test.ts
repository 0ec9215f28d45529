import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServiceError } from "@grpc/grpc-js";
import type { ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { pino } from "pino";
import { DEFAULT_PYTHON_SHM_BYTE_SIZE } from "../../../lib/contract/dataplane.js";
import { DataPlaneError } from "../../../lib/errors.js";
import { pythonEngine } from "../../../lib/engines/python.js";
import { parseText } from "../../../lib/model-repository/config.js";
import { toModelSpec } from "../../../lib/model-repository/spec.js";
import type { ModelInference } from "../../src/engines/engine.js";
import type { EngineRequest, EngineResponse, Execution } from "../../src/engines/engine.js";
import { PythonEngine } from "../../src/engines/python/python.js";
import type { Tensor } from "../../src/tensors/tensor.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { MODELS_PYTHON, requireTritonPeers } from "../fixtures/peers.js";
import { PYTHON_BATCHING_MODELS, PYTHON_MODELS } from "../fixtures/python-models.js";
import { call, infer, inferRequest, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * The python engine given the scheduler's executions directly (as dataplane/src/scheduling/
 * gives them), then through a data plane's scheduler: an execution's requests reach one
 * execute call of its instance's process, in their order, whatever their batch sizes; a
 * decoupled model's instance is released when its execute returns; an instance that dies
 * fails only its execution's requests; a batched model's BLS calls are answered.
 */

const int32 = (name: string, values: readonly number[]): Tensor => ({
  name,
  datatype: "INT32",
  shape: [values.length, 1],
  data: new Uint8Array(new Int32Array(values).buffer),
});

const fp32 = (name: string, rows: readonly (readonly number[])[]): Tensor => ({
  name,
  datatype: "FP32",
  shape: [rows.length, 4],
  data: new Uint8Array(new Float32Array(rows.flat()).buffer),
});

let nextId = 0;
const requestOf = (...inputs: Tensor[]): EngineRequest => ({
  id: `r${++nextId}`,
  version: "1",
  parameters: {},
  inputs,
  requestedOutputs: new Set(),
});

/** An execution as the scheduler makes one, counting its releases. */
function executionOf(instance: number, requests: readonly EngineRequest[], onRelease = (): void => {}) {
  const execution = {
    instance,
    requests,
    released: 0,
    release() {
      execution.released++;
      onRelease();
    },
  };
  return execution;
}

function engineFor(model: string, inference?: ModelInference): PythonEngine {
  const source = join(PYTHON_BATCHING_MODELS, model, "config.pbtxt");
  const spec = toModelSpec(parseText(readFileSync(source, "utf8"), source), source);
  return new PythonEngine(pythonEngine.settings(spec, source), undefined, {
    pythonEngine: { python: MODELS_PYTHON, pythonStubTimeoutSecs: 30, pythonShmByteSize: DEFAULT_PYTHON_SHM_BYTE_SIZE },
    logger: pino({ level: "silent" }),
    inference: () => inference,
  });
}

/** The engine of `model`, started before the tests of the block that calls this and closed after them. */
function startedEngine(model: string, inference?: ModelInference): () => PythonEngine {
  let engine: PythonEngine | undefined;
  before(async () => {
    engine = engineFor(model, inference);
    await engine.start();
  });
  after(() => engine?.close());
  return () => engine!;
}

/** Every response of a request, run as the scheduler runs it (its execution, or none). */
async function run(engine: PythonEngine, request: EngineRequest, execution?: Execution): Promise<EngineResponse[]> {
  const responses: EngineResponse[] = [];
  const options = { signal: new AbortController().signal, deadline: Infinity, traceHeaders: {}, execution };
  for await (const response of engine.infer(request, options)) responses.push(response);
  return responses;
}

/** A tensor's bytes as numbers (the test models' outputs: INT32, INT64 or FP32). */
function numbersOf(datatype: string, data: Uint8Array): number[] {
  const copy = new Uint8Array(data).buffer;
  if (datatype === "INT64") return [...new BigInt64Array(copy)].map(Number);
  return datatype === "FP32" ? [...new Float32Array(copy)] : [...new Int32Array(copy)];
}

/** An output as numbers (one per batch item: the probes' outputs are [rows, 1]). */
function column(response: EngineResponse | undefined, name: string): number[] {
  const output = response?.outputs.find((tensor) => tensor.name === name);
  assert.ok(output, `output ${name}`);
  return numbersOf(output.datatype, output.data);
}

/** What the probe says of one request: [index in its execute call, requests of the call, items of the call, process]. */
const probed = (responses: readonly EngineResponse[]): number[] =>
  ["INDEX", "REQUESTS", "ITEMS", "PID"].map((name) => column(responses[0], name)[0]!);

describe("the python engine runs the scheduler's executions", function () {
  this.timeout(60_000);
  before(function () {
    requireTritonPeers(this);
  });

  describe("of a batched model with two instances", () => {
    const engine = startedEngine("execution_probe");

    it("runs an execution's requests in one execute call, in the execution's order, whichever request's call comes first", async () => {
      const requests = [1, 2, 3, 4, 5].map((value) => requestOf(int32("INPUT0", [value])));
      const execution = executionOf(1, requests);
      // The scheduler's calls may come in any order: the execution's order is what execute sees.
      const answers = await Promise.all([...requests].reverse().map((request) => run(engine(), request, execution)));
      const seen = answers.reverse().map(probed);
      assert.deepEqual(
        seen.map(([index, count, items]) => [index, count, items]),
        [0, 1, 2, 3, 4].map((index) => [index, 5, 5]),
      );
      assert.equal(new Set(seen.map(([, , , pid]) => pid)).size, 1, "one process ran them");
    });

    it("runs each execution on its instance's process", async () => {
      const pids = await Promise.all(
        [0, 1, 0, 1].map(async (instance) => {
          const request = requestOf(int32("INPUT0", [instance]));
          return probed(await run(engine(), request, executionOf(instance, [request])))[3];
        }),
      );
      assert.equal(pids[0], pids[2]);
      assert.equal(pids[1], pids[3]);
      assert.notEqual(pids[0], pids[1]);
    });

    it("honours a group of mixed batch sizes: one call of all their items, each request its own rows", async () => {
      const sizes = [3, 1, 4];
      const requests = sizes.map((size) =>
        requestOf(
          int32(
            "INPUT0",
            Array.from({ length: size }, () => size),
          ),
        ),
      );
      const execution = executionOf(0, requests);
      const answers = await Promise.all(requests.map((request) => run(engine(), request, execution)));
      answers.forEach((responses, index) => {
        const rows = sizes[index]!;
        assert.equal(responses.length, 1);
        assert.deepEqual(column(responses[0], "INDEX"), Array(rows).fill(index));
        assert.deepEqual(column(responses[0], "REQUESTS"), Array(rows).fill(3));
        assert.deepEqual(column(responses[0], "ITEMS"), Array(rows).fill(8));
      });
    });

    it("runs a request given outside any execution alone (one request per execute call)", async () => {
      const requests = [1, 2, 3].map((value) => requestOf(int32("INPUT0", [value])));
      const answers = await Promise.all(requests.map((request) => run(engine(), request)));
      assert.deepEqual(
        answers.map((responses) => probed(responses).slice(0, 3)),
        [
          [0, 1, 1],
          [0, 1, 1],
          [0, 1, 1],
        ],
      );
    });

    it("fails only the execution's requests when its instance dies mid-call, and restarts that instance", async () => {
      const pidOn = async (instance: number): Promise<number> => {
        const request = requestOf(int32("INPUT0", [7]));
        return probed(await run(engine(), request, executionOf(instance, [request])))[3]!;
      };
      const [dying, other] = [await pidOn(0), await pidOn(1)];
      const doomed = [1, -1, 2].map((value) => requestOf(int32("INPUT0", [value])));
      const doomedExecution = executionOf(0, doomed);
      const spared = [3, 4].map((value) => requestOf(int32("INPUT0", [value])));
      const sparedExecution = executionOf(1, spared);
      const [failures, answers] = await Promise.all([
        Promise.allSettled(doomed.map((request) => run(engine(), request, doomedExecution))),
        Promise.all(spared.map((request) => run(engine(), request, sparedExecution))),
      ]);
      for (const failure of failures) {
        assert.equal(failure.status, "rejected");
        const reason = (failure as PromiseRejectedResult).reason as unknown;
        assert.ok(reason instanceof DataPlaneError && reason.kind === "Unavailable", String(reason));
        assert.match(reason.message, /exited with code 3/);
      }
      assert.deepEqual(
        answers.map((responses) => probed(responses)),
        [
          [0, 2, 2, other],
          [1, 2, 2, other],
        ],
      );
      // Meanwhile an execution for instance 0 runs on a ready one; then on instance 0's new process.
      await eventually(async () => {
        const pid = await pidOn(0);
        assert.ok(pid !== dying && pid !== other, `instance 0 restarted (pid ${pid})`);
      }, 30_000);
    });
  });

  describe("of a decoupled batched model", () => {
    const engine = startedEngine("decoupled_batch");

    it("releases the instance when execute returns, while the execution's responses still stream, so the next execution runs meanwhile", async () => {
      const events: string[] = [];
      const stream = async (name: string, request: EngineRequest, execution: Execution) => {
        const responses = await run(engine(), request, execution);
        events.push(`${name} done`);
        return responses;
      };
      const slowRequests = [1000, 1000, 1000].map((delay) => requestOf(int32("DELAY_MS", [delay])));
      const quickRequests = [0, 0].map((delay) => requestOf(int32("DELAY_MS", [delay])));
      const quick = executionOf(0, quickRequests);
      let quickDone: Promise<EngineResponse[][]> | undefined;
      // As the scheduler: the instance's next execution starts once the first releases it.
      const slow = executionOf(0, slowRequests, () => {
        events.push("slow released");
        quickDone ??= Promise.all(quickRequests.map((request) => stream("quick", request, quick)));
      });
      const slowDone = await Promise.all(slowRequests.map((request) => stream("slow", request, slow)));
      const quickAnswers = await quickDone;
      assert.equal(slow.released, 1);
      assert.equal(quick.released, 1);
      assert.deepEqual(events, ["slow released", "quick done", "quick done", "slow done", "slow done", "slow done"]);
      slowDone.forEach((responses, index) => {
        assert.equal(responses.length, 2);
        for (const response of responses) {
          assert.deepEqual([column(response, "INDEX"), column(response, "REQUESTS")], [[index], [3]]);
        }
      });
      assert.deepEqual(
        quickAnswers!.map((responses) => responses.map((response) => column(response, "INDEX")[0])),
        [
          [0, 0],
          [1, 1],
        ],
      );
    });
  });

  describe("of a batched model calling another (BLS)", () => {
    const calls: string[] = [];
    /** add_sub, as another model of the data plane would answer it. */
    const addSub: ModelInference = async function* (request) {
      calls.push(request.modelName);
      const [first, second] = request.rawInputContents.map((raw) => new Float32Array(new Uint8Array(raw).buffer));
      const sum = first!.map((value, index) => value + second![index]!);
      const difference = first!.map((value, index) => value - second![index]!);
      yield {
        modelName: request.modelName,
        modelVersion: "1",
        id: request.id,
        parameters: {},
        outputs: ["OUTPUT0", "OUTPUT1"].map((name) => ({
          name,
          datatype: "FP32",
          shape: [4n],
          parameters: {},
          contents: undefined,
        })),
        rawOutputContents: [new Uint8Array(sum.buffer), new Uint8Array(difference.buffer)],
      };
    };
    const engine = startedEngine("bls_batched", addSub);

    it("answers each request of a batch with what its calls to another model returned", async () => {
      const requests = [
        requestOf(
          fp32("INPUT0", [
            [1, 2, 3, 4],
            [5, 6, 7, 8],
          ]),
          fp32("INPUT1", [
            [1, 1, 1, 1],
            [2, 2, 2, 2],
          ]),
        ),
        requestOf(fp32("INPUT0", [[10, 20, 30, 40]]), fp32("INPUT1", [[1, 2, 3, 4]])),
      ];
      const execution = executionOf(0, requests);
      const [first, second] = await Promise.all(requests.map((request) => run(engine(), request, execution)));
      assert.deepEqual(column(first![0], "OUTPUT0"), [2, 3, 4, 5, 7, 8, 9, 10]);
      assert.deepEqual(column(first![0], "OUTPUT1"), [0, 1, 2, 3, 3, 4, 5, 6]);
      assert.deepEqual(column(second![0], "OUTPUT0"), [11, 22, 33, 44]);
      assert.deepEqual(column(second![0], "OUTPUT1"), [9, 18, 27, 36]);
      assert.deepEqual(calls, ["add_sub", "add_sub", "add_sub"]);
    });
  });
});

/** A request of `rows` batch items of one INT32 input, each `value`. */
const rowsRequest = (model: string, input: string, rows: readonly number[], id = ""): ModelInferRequest =>
  inferRequest({
    modelName: model,
    id,
    inputs: [{ name: input, datatype: "INT32", shape: [BigInt(rows.length), 1n], parameters: {}, contents: undefined }],
    rawInputContents: [new Uint8Array(new Int32Array(rows).buffer)],
  });

/** An output of a gRPC reply as numbers. */
function replyColumn(reply: ModelInferResponse, name: string): number[] {
  const index = reply.outputs.findIndex((output) => output.name === name);
  assert.ok(index >= 0, `output ${name}`);
  return numbersOf(reply.outputs[index]!.datatype, reply.rawOutputContents[index]!);
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the python engine behind the data plane's scheduler (dynamic_batching)", function () {
  this.timeout(120_000);
  let server: ServerProcess;
  let repository: string;
  before(async function () {
    requireTritonPeers(this);
    // The batching models and add_sub (bls_batched's callee), in one repository.
    repository = mkdtempSync(join(tmpdir(), "python-batching-"));
    cpSync(PYTHON_BATCHING_MODELS, repository, { recursive: true });
    cpSync(join(PYTHON_MODELS, "add_sub"), join(repository, "add_sub"), { recursive: true });
    server = await startServer(["--model-repository", repository, "--python", MODELS_PYTHON]);
  });
  after(async () => {
    await server?.stop();
    if (repository !== undefined) rmSync(repository, { recursive: true, force: true });
  });

  it("gives one execute call the requests of a batch in the order they queued, each its own rows", async () => {
    const rows = [1, 2, 1, 3, 1];
    const answers: Promise<ModelInferResponse>[] = [];
    // Apart enough to queue in this order, within the model's 0.5 s queue delay: one batch of 8 items.
    for (const [position, count] of rows.entries()) {
      answers.push(infer(server.client, rowsRequest("execution_probe", "INPUT0", Array(count).fill(position + 1))));
      await pause(20);
    }
    const replies = await Promise.all(answers);
    replies.forEach((reply, position) => {
      const count = rows[position]!;
      assert.deepEqual(replyColumn(reply, "INDEX"), Array(count).fill(position), `request ${position}`);
      assert.deepEqual(replyColumn(reply, "REQUESTS"), Array(count).fill(rows.length));
      assert.deepEqual(replyColumn(reply, "ITEMS"), Array(count).fill(8));
    });
    assert.equal(new Set(replies.map((reply) => replyColumn(reply, "PID")[0])).size, 1);
  });

  it("fails the requests of a batch whose process dies mid-call UNAVAILABLE, and serves the next ones", async () => {
    const results = await Promise.allSettled(
      [[1], [-1], [2]].map(async (values, index) => {
        await pause(index * 20);
        return infer(server.client, rowsRequest("execution_probe", "INPUT0", values));
      }),
    );
    for (const result of results) {
      assert.equal(result.status, "rejected");
      const error = (result as PromiseRejectedResult).reason as ServiceError;
      assert.equal(error.code, 14, error.message); // UNAVAILABLE
    }
    const after = await infer(server.client, rowsRequest("execution_probe", "INPUT0", [5]));
    assert.deepEqual(replyColumn(after, "REQUESTS"), [1]);
  });

  it("lets a decoupled model's instance take the next batch once execute has returned, while the first batch still streams", async () => {
    // Each request is answered twice (decoupled_batch): its second response is its last.
    const finals: string[] = [];
    const answered = new Map<string, number>();
    const finalOf = (name: string, stream: ReturnType<typeof server.client.modelStreamInfer>) =>
      new Promise<void>((resolve, reject) => {
        stream.on("data", (reply: { inferResponse?: ModelInferResponse; errorMessage: string }) => {
          if (reply.errorMessage) reject(new Error(reply.errorMessage));
          const id = reply.inferResponse?.id ?? "";
          answered.set(id, (answered.get(id) ?? 0) + 1);
          if (answered.get(id) === 2) finals.push(`${name} ${id}`);
        });
        stream.on("end", resolve);
        stream.on("error", reject);
      });
    const slow = server.client.modelStreamInfer();
    const quick = server.client.modelStreamInfer();
    let quickStarted = false;
    const firstResponse = new Promise<void>((resolve) => slow.once("data", () => resolve()));
    const slowDone = finalOf("slow", slow);
    for (const id of ["a", "b", "c"]) slow.write(rowsRequest("decoupled_batch", "DELAY_MS", [3000], id));
    slow.end();
    // The slow batch's first responses come from its threads after execute returned.
    await firstResponse;
    quickStarted = true;
    const quickDone = finalOf("quick", quick);
    for (const id of ["d", "e"]) quick.write(rowsRequest("decoupled_batch", "DELAY_MS", [0], id));
    quick.end();
    await Promise.all([slowDone, quickDone]);
    assert.ok(quickStarted);
    assert.deepEqual(finals.slice(0, 2).sort(), ["quick d", "quick e"], finals.join(", "));
    assert.deepEqual(finals.slice(2).sort(), ["slow a", "slow b", "slow c"]);
  });

  it("answers a batched model's BLS calls, its requests joined into executions", async () => {
    const request = (offset: number): ModelInferRequest =>
      inferRequest({
        modelName: "bls_batched",
        inputs: ["INPUT0", "INPUT1"].map((name) => ({
          name,
          datatype: "FP32",
          shape: [2n, 4n],
          parameters: {},
          contents: undefined,
        })),
        rawInputContents: [
          new Uint8Array(new Float32Array([0, 1, 2, 3, 4, 5, 6, 7].map((value) => value + offset)).buffer),
          new Uint8Array(new Float32Array(8).fill(1).buffer),
        ],
      });
    const replies = await Promise.all([0, 10, 20, 30].map((offset) => infer(server.client, request(offset))));
    replies.forEach((reply, index) => {
      const base = index * 10;
      assert.deepEqual(
        replyColumn(reply, "OUTPUT0"),
        [1, 2, 3, 4, 5, 6, 7, 8].map((value) => value + base),
      );
      assert.deepEqual(
        replyColumn(reply, "OUTPUT1"),
        [-1, 0, 1, 2, 3, 4, 5, 6].map((value) => value + base),
      );
    });
    const statistics = await call(server.client, "modelStatistics", { name: "bls_batched", version: "" });
    const [stats] = statistics.modelStats;
    assert.equal(stats?.inferenceCount, 8n);
    assert.ok(stats!.executionCount < 4n, `${stats?.executionCount} executions of 4 requests`);
  });
});

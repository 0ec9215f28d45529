import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { requireProgram, TOOLS_PYTHON } from "../../../e2e/support/prerequisites.js";
import type { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { PRINTED_BYTES_PER_SECOND, PRINTED_LINE_COST } from "../../src/engines/python/printed.js";
import { clientChecks } from "../fixtures/client-checks.js";
import { REPO_ROOT } from "../fixtures/paths.js";
import {
  bytesRequest,
  isZombie,
  misbehave,
  oneInput,
  pidOf,
  PYTHON_MODELS,
  rssOf,
  stubsOf,
} from "../fixtures/python-models.js";
import { addSubRequest } from "../fixtures/requests.js";
import {
  MODELS_PYTHON,
  requireTritonPeers,
  requireTritonServer,
  startTritonServer,
  type Peer,
} from "../fixtures/peers.js";
import { call, eventually, infer, startServer, type ServerProcess } from "../fixtures/server.js";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";

/**
 * Triton Python-backend models (dataplane/test/python-models: add_sub, a decoupled model, BLS,
 * errors, a slow model, one that crashes, auto_complete_config, the dynamic batcher) run by our
 * python engine, and the same model.py files run by a real Triton's Python backend:
 * tritonclient must see the same.
 */

/** The bench's Python identity models (identity_fp32: any [n, m] FP32), served beside them. */
const IDENTITY_MODELS = join(REPO_ROOT, "bench", "peers", "triton");
const checks = (grpc: string, http: string): Promise<unknown> => clientChecks("python_backend_checks.py", grpc, http);

/** add_sub (the Python model) of [4] elements. */
const ADD_SUB = addSubRequest("add_sub", [4n]);

/** Linux's SCHED_BATCH scheduling policy (sched(7)). */
const SCHED_BATCH = 3;

/** Resolves as `promise` does, or fails once `ms` have passed without it settling. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not done within ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A model's load signals: [dynamo_kserve_requests_running, dynamo_kserve_requests_waiting]. */
async function requestsOf(server: ServerProcess, model: string): Promise<(number | undefined)[]> {
  const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
  return [
    valueOf(samples, "dynamo_kserve_requests_running", { model }),
    valueOf(samples, "dynamo_kserve_requests_waiting", { model }),
  ];
}

async function inferError(
  server: ServerProcess,
  message: ModelInferRequest,
  deadlineMs?: number,
): Promise<ServiceError> {
  return new Promise((resolve, reject) => {
    const options = deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs };
    server.client.modelInfer(message, new Metadata(), options, (error) =>
      error ? resolve(error) : reject(new Error("the request succeeded")),
    );
  });
}

describe("the python engine: Triton Python-backend models (model.py) run natively", function () {
  this.timeout(180_000);

  before(function () {
    requireProgram(this, TOOLS_PYTHON, "the tritonclient venv", "run scripts/setup-python.sh");
    requireTritonPeers(this);
    requireTritonServer(this);
  });

  describe("beside a real Triton running the same model.py files", () => {
    let ours: ServerProcess;
    let triton: (Peer & { readonly httpAddress: string }) | undefined;
    before(async () => {
      [ours, triton] = await Promise.all([
        startServer([
          "--model-repository",
          PYTHON_MODELS,
          "--model-repository",
          IDENTITY_MODELS,
          "--python",
          MODELS_PYTHON,
        ]),
        startTritonServer([PYTHON_MODELS, IDENTITY_MODELS]),
      ]);
    });
    after(async () => {
      await ours?.stop();
      await triton?.kill();
    });

    it("gives tritonclient (gRPC and HTTP) the same outputs, errors and streamed responses as Triton", async () => {
      const [mine, theirs] = await Promise.all([
        checks(`127.0.0.1:${ours.grpcPort}`, `127.0.0.1:${ours.httpPort}`),
        checks(triton!.address, triton!.httpAddress),
      ]);
      assert.deepEqual(mine, theirs);
      // And they are the answers the models define (not two servers failing alike).
      const results = mine as Record<string, { outputs?: Record<string, number[]> }>;
      assert.deepEqual(results["grpc add_sub"]?.outputs, { OUTPUT0: [2, 3, 4, 3], OUTPUT1: [1, 1, 2, 5] });
      assert.deepEqual(results["http bls_add_sub -> add_sub"]?.outputs, {
        OUTPUT0: [2, 3, 4, 3],
        OUTPUT1: [1, 1, 2, 5],
      });
      for (const elements of [16, 16 * 1024, 300_000, 1_000_000]) {
        assert.deepEqual(results[`grpc identity_fp32 ${elements}`], { "same values": true }, `${elements} elements`);
      }
      const completed = {
        max_batch_size: 8,
        dynamic_batching: true,
        tensors: [
          ["input", "INPUT0", "TYPE_FP32", [4]],
          ["input", "INPUT1", "TYPE_FP32", [4]],
          ["output", "OUTPUT0", "TYPE_FP32", [4]],
        ],
      };
      assert.deepEqual(results["grpc auto_complete config"], completed);
      assert.deepEqual(results["http auto_complete config"], completed);
      assert.deepEqual(results["grpc auto_complete [2, 4]"]?.outputs, [
        [0, 1, 4, 9],
        [16, 25, 36, 49],
      ]);
      assert.deepEqual((mine as Record<string, string[]>)["grpc batch_counter 6 requests, 8 items"], [
        ...["[6, 6]", "[6, 6]"],
        ...["[6]", "[6]", "[6]", "[6]"],
      ]);
      const stream = (mine as Record<string, { OUT: number[] | null; final: boolean }[]>)["grpc stream repeat_int32"];
      assert.deepEqual(
        stream?.map((response) => response.OUT),
        [[4], [5], [6], [7], null],
      );
    });

    it("sends an answer held back while requests were queued within milliseconds, not after a slow execute behind it (no health-check ping in between)", async () => {
      // Our own (Triton sends each answer at once). One instance: A runs 0.3 s while B (instant) and C (3 s) queue behind it. A's and B's
      // answers are held while C is queued, and must leave ~1 ms later, not when C is done.
      const slow = (seconds: number, id: string) =>
        oneInput("slow_cancellable", "SECONDS", "FP32", new Uint8Array(new Float32Array([seconds]).buffer), id);
      const sent = Date.now();
      const answered = (message: ModelInferRequest) => infer(ours.client, message).then(() => Date.now() - sent);
      const a = answered(slow(0.3, "held-a"));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const b = answered(slow(0, "held-b"));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const c = answered(slow(3, "held-c"));
      const [afterA, afterB, afterC] = await Promise.all([a, b, c]);
      assert.ok(afterC >= 3000, `C ran after A and B (${afterC} ms)`);
      assert.ok(afterA < 1500 && afterB < 1500, `A at ${afterA} ms, B at ${afterB} ms, C at ${afterC} ms`);
    });

    it("publishes the load signals: one request executing in the process, the one given to it behind that waiting", async () => {
      const slow = (seconds: number, id: string) =>
        oneInput("slow_cancellable", "SECONDS", "FP32", new Uint8Array(new Float32Array([seconds]).buffer), id);
      const load = () => requestsOf(ours, "slow_cancellable");
      const done = Promise.all([infer(ours.client, slow(2, "load-a")), infer(ours.client, slow(0, "load-b"))]);
      await eventually(async () => assert.deepEqual(await load(), [1, 1]));
      await done;
      assert.deepEqual(await load(), [0, 0]);
    });

    it("hands initialize Triton's args and logs pb_utils.Logger lines and the model's prints in the JSON log", async () => {
      const lines = ours.logs.filter((line) => line["model"] === "add_sub" && line["version"] === "1");
      assert.ok(
        lines.some(
          (line) => line["msg"] === "add_sub initialized as add_sub_0_0" && line["stream"] === "pb_utils.Logger",
        ),
        JSON.stringify(lines),
      );
      assert.ok(lines.some((line) => line["msg"] === "add_sub initialized as add_sub_0_1"));
      // What the model printed (finalize prints) arrives when it is unloaded; stdout lines carry the instance.
      assert.ok(lines.some((line) => line["instance"] === "add_sub_0_0"));
      const config = await call(ours.client, "modelConfig", { name: "add_sub", version: "" });
      assert.equal(config.config?.backend, "python");
    });
  });

  describe("alone, with faults (stub timeout 1 s)", () => {
    let ours: ServerProcess;
    let broken: string;
    before(async () => {
      // A model whose auto_complete_config raises: it is not loaded, the others are.
      broken = await mkdtemp(join(tmpdir(), "python-models-"));
      await mkdir(join(broken, "completes_badly", "1"), { recursive: true });
      await writeFile(join(broken, "completes_badly", "config.pbtxt"), 'backend: "python"\n');
      await writeFile(
        join(broken, "completes_badly", "1", "model.py"),
        [
          "class TritonPythonModel:",
          "    @staticmethod",
          "    def auto_complete_config(auto_complete_model_config):",
          "        raise ValueError('no inputs to declare')",
          "",
        ].join("\n"),
      );
      // A decoupled model whose first response has an output its config does not declare, and
      // that streams good ones after it until the request is cancelled (or a minute has passed).
      await mkdir(join(broken, "streams_badly", "1"), { recursive: true });
      await writeFile(
        join(broken, "streams_badly", "config.pbtxt"),
        [
          'backend: "python"',
          "model_transaction_policy { decoupled: true }",
          'parameters { key: "model_infer_gathers_responses" value { string_value: "true" } }',
          'input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]',
          'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]',
          "",
        ].join("\n"),
      );
      await writeFile(
        join(broken, "streams_badly", "1", "model.py"),
        [
          "import threading, time",
          "import numpy as np",
          "import triton_python_backend_utils as pb_utils",
          "",
          "def stream(request):",
          "    sender = request.get_response_sender()",
          "    bad = pb_utils.Tensor('NOT_DECLARED', np.array([0], np.int32))",
          "    sender.send(pb_utils.InferenceResponse(output_tensors=[bad]))",
          "    deadline = time.monotonic() + 60",
          "    while not request.is_cancelled() and time.monotonic() < deadline:",
          "        sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor('OUT', np.array([1], np.int32))]))",
          "        time.sleep(0.01)",
          "    pb_utils.Logger.log_info(f'streams_badly: cancelled={request.is_cancelled()}')",
          "    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)",
          "",
          "class TritonPythonModel:",
          "    def execute(self, requests):",
          "        for request in requests:",
          "            threading.Thread(target=stream, args=(request,), daemon=True).start()",
          "",
        ].join("\n"),
      );
      ours = await startServer([
        "--model-repository",
        PYTHON_MODELS,
        "--model-repository",
        broken,
        "--python",
        MODELS_PYTHON,
        "--python-stub-timeout-secs",
        "1",
      ]);
    });
    after(async () => {
      await ours?.stop();
      await rm(broken, { recursive: true, force: true });
    });

    it("does not load a model whose auto_complete_config raises, and says why in the repository index", async () => {
      assert.equal((await call(ours.client, "modelReady", { name: "completes_badly", version: "" })).ready, false);
      const index = await call(ours.client, "repositoryIndex", { repositoryName: "", ready: false });
      const entry = index.models.find((model) => model.name === "completes_badly");
      assert.equal(entry?.state, "UNAVAILABLE");
      assert.match(
        entry?.reason ?? "",
        /completes_badly\/1\/model\.py: auto_complete_config failed: ValueError: no inputs to declare\n\nAt:\n {2}\S+model\.py\(4\): auto_complete_config/,
      );
      assert.equal((await call(ours.client, "modelReady", { name: "auto_complete", version: "" })).ready, true);
    });

    it("passes a client's cancellation (its deadline) to request.is_cancelled() and answers DEADLINE_EXCEEDED at once", async () => {
      const seconds = new Uint8Array(new Float32Array([20]).buffer);
      const started = Date.now();
      const error = await inferError(ours, oneInput("slow_cancellable", "SECONDS", "FP32", seconds, "slow-1"), 500);
      assert.equal(error.code, status.DEADLINE_EXCEEDED);
      assert.ok(Date.now() - started < 5000);
      await eventually(() => {
        const seen = ours.logs.some((line) => line["msg"] === "slow_cancellable: request 'slow-1' cancelled=True");
        assert.ok(seen, "the model saw the cancellation");
      }, 10_000);
    });

    it("runs the model's process as batch work (SCHED_BATCH), so it does not preempt the data plane on a shared core", async () => {
      const pid = pidOf(await infer(ours.client, bytesRequest("crashes", "HOW", "pid")));
      const threads = await readdir(`/proc/${pid}/task`);
      assert.ok(threads.length >= 2, "the main thread and the frame reader");
      for (const thread of threads) {
        const stat = await readFile(`/proc/${pid}/task/${thread}/stat`, "utf8");
        // Fields after the command's closing parenthesis; policy is field 41 of stat(5).
        const policy = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[41 - 3]);
        assert.equal(policy, SCHED_BATCH, `thread ${thread}`);
      }
    });

    it("answers every request a crashed Python process held UNAVAILABLE, is not ready meanwhile, and restarts it", async () => {
      const before = pidOf(await infer(ours.client, bytesRequest("crashes", "HOW", "pid")));
      // The request that takes the process down, and three right behind it (held by that
      // process, or arriving while it is gone): every one is answered UNAVAILABLE.
      const crashing = inferError(ours, bytesRequest("crashes", "HOW", "exit"));
      const behind = [1, 2, 3].map(() =>
        inferError(ours, bytesRequest("crashes", "HOW", "pid")).catch((error: Error) => error),
      );
      const crashed = await crashing;
      assert.equal(crashed.code, status.UNAVAILABLE);
      assert.match(crashed.details, /python model 'crashes'.*exited with code 3/);
      for (const error of await Promise.all(behind)) {
        assert.equal((error as ServiceError).code, status.UNAVAILABLE, error.message);
      }
      const ready = await call(ours.client, "modelReady", { name: "crashes", version: "" });
      assert.equal(ready.ready, false);
      await eventually(async () => {
        const after = pidOf(await infer(ours.client, bytesRequest("crashes", "HOW", "pid")));
        assert.notEqual(after, before);
      }, 15_000);
      assert.equal((await call(ours.client, "modelReady", { name: "crashes", version: "" })).ready, true);
    });

    it("answers a response or BLS parameter JSON cannot carry (NaN, -inf) with an error naming it, and keeps the instance and the server", async () => {
      const before = pidOf(await infer(ours.client, misbehave("pid")));
      for (const [how, parameter] of [
        ["nan", "score"],
        ["inf", "score"],
        ["nan_late", "score"],
        ["bls_nan", "threshold"],
      ] as const) {
        const error = await inferError(ours, misbehave(how));
        assert.equal(error.code, status.INTERNAL, `${how}: ${error.details}`);
        assert.match(error.details, new RegExp(`parameter '${parameter}'`), how);
      }
      assert.equal(pidOf(await infer(ours.client, misbehave("pid"))), before, "the same process still serves");
      await infer(ours.client, ADD_SUB);
    });

    it("answers a response it cannot serialize (a numpy integer parameter) with an error for that request only", async () => {
      const before = pidOf(await infer(ours.client, misbehave("pid")));
      const failing = inferError(ours, misbehave("np_int"));
      const behind = [1, 2, 3, 4].map(() => infer(ours.client, misbehave("pid")));
      const error = await failing;
      assert.equal(error.code, status.INTERNAL, error.details);
      assert.match(error.details, /parameter 'count'.*numpy\.int64|numpy\.int64.*parameter 'count'/);
      for (const answered of await Promise.all(behind)) assert.equal(pidOf(answered), before);
    });

    it("frees the shared memory a response's outputs took when the response cannot be sent (a NaN parameter, an output that cannot be given as bytes)", async () => {
      for (const [how, pattern] of [
        ["nan_large", /parameter 'score'/],
        ["large_then_bad", /Unprintable has no text/],
      ] as const) {
        const error = await inferError(ours, misbehave(how));
        assert.equal(error.code, status.INTERNAL, `${how}: ${error.details}`);
        assert.match(error.details, pattern, how);
        // Unfreed, the region blocked the ring for good: later large outputs went through the pipe.
        assert.equal(pidOf(await infer(ours.client, misbehave("held_outputs"))), 0n, `${how}: regions still taken`);
      }
    });

    it("answers INTERNAL, naming the output, when a model returns an output its config does not declare as returned", async () => {
      for (const [how, pattern] of [
        ["wrong_name", /output 'NOT_DECLARED'.*not declared/],
        ["wrong_datatype", /output 'PID'.*FP32.*INT64/],
        ["wrong_shape", /output 'PID'.*\[3\].*\[1\]/],
      ] as const) {
        const error = await inferError(ours, misbehave(how));
        assert.equal(error.code, status.INTERNAL, `${how}: ${error.details}`);
        assert.match(error.details, pattern, how);
      }
    });

    it("cancels a decoupled model's request in its process once the request has failed (a bad first response), and no longer counts it", async () => {
      const error = await inferError(
        ours,
        oneInput("streams_badly", "N", "INT32", new Uint8Array(Int32Array.of(1).buffer)),
      );
      assert.equal(error.code, status.INTERNAL, error.details);
      assert.match(error.details, /output 'NOT_DECLARED'/);
      // Unfixed, the model streamed on for its minute, counted as running all along.
      await eventually(async () => assert.deepEqual(await requestsOf(ours, "streams_badly"), [0, 0]), 10_000);
      await eventually(() => {
        const seen = ours.logs.some((line) => line["msg"] === "streams_badly: cancelled=True");
        assert.ok(seen, "the model saw the cancellation");
      }, 10_000);
    });

    it("treats a frame it cannot read from a Python process as that instance's fault: its request UNAVAILABLE, the instance restarted, the server up", async () => {
      const before = pidOf(await infer(ours.client, misbehave("pid")));
      const error = await inferError(ours, misbehave("garbage"));
      assert.equal(error.code, status.UNAVAILABLE, error.details);
      assert.match(error.details, /python model 'misbehaves'.*frame/);
      await infer(ours.client, ADD_SUB);
      await eventually(async () => {
        assert.notEqual(pidOf(await infer(ours.client, misbehave("pid"))), before);
      }, 15_000);
      assert.ok(ours.logs.some((line) => /frame/.test(String(line["msg"])) && line["model"] === "misbehaves"));
    });

    it("keeps the log within its budget while a model prints in a tight loop, drops the rest and says how many, and other models keep answering", async () => {
      /** add_sub requests answered per second, one after another, until `until` settles. */
      const addSubRate = async (until: Promise<unknown>): Promise<number> => {
        let done = false;
        void until.finally(() => (done = true));
        const started = Date.now();
        let answered = 0;
        while (!done) {
          await infer(ours.client, ADD_SUB);
          answered++;
        }
        return (answered * 1000) / Math.max(1, Date.now() - started);
      };
      const alone = await addSubRate(new Promise((resolve) => setTimeout(resolve, 2000)));
      const rssBefore = await rssOf(ours.process.pid!);
      const started = Date.now();
      const whilePrinting = await addSubRate(infer(ours.client, misbehave("print 4")));
      const seconds = (Date.now() - started) / 1000;
      const rssAfter = await rssOf(ours.process.pid!);
      const notice = await eventually(() => {
        const found = ours.logs.find((line) => typeof line["dropped"] === "number" && line["model"] === "misbehaves");
        assert.ok(found, "a notice says how many lines were dropped");
        return found;
      }, 5000);
      assert.ok((notice["dropped"] as number) > 0);
      const printed = ours.logs.filter((line) => /^misbehaves: line \d+ /.test(String(line["msg"])));
      const logged = printed.reduce((bytes, line) => bytes + String(line["msg"]).length + PRINTED_LINE_COST, 0);
      const budget = PRINTED_BYTES_PER_SECOND * (1 + seconds);
      assert.ok(
        logged <= budget,
        `${printed.length} lines (${logged} bytes) logged in ${seconds} s, at most ${budget}`,
      );
      // Generous: with every line logged, add_sub's p50 went from 0.8 ms to ~100 ms (issue 34).
      assert.ok(whilePrinting >= alone / 10, `add_sub: ${alone} requests/s alone, ${whilePrinting} while printing`);
      // Loose (V8's young generation alone may grow by tens of MB): unbounded, it grew by gigabytes.
      assert.ok(rssAfter - rssBefore < 200 * 1024 * 1024, `RSS ${rssBefore} -> ${rssAfter}`);
    });

    it("kills and restarts a Python process that stops answering (hung), failing its request UNAVAILABLE", async () => {
      const started = Date.now();
      const hung = await inferError(ours, bytesRequest("crashes", "HOW", "hang"));
      assert.equal(hung.code, status.UNAVAILABLE);
      assert.match(hung.details, /killed \(SIGKILL\)/);
      assert.ok(Date.now() - started < 10_000, "found within a few stub timeouts");
      await eventually(async () => {
        await infer(ours.client, bytesRequest("crashes", "HOW", "pid"));
      }, 15_000);
    });

    describe("whose initialize never returns, or whose data plane is killed", () => {
      /** A repository with one model whose initialize never returns. */
      let hanging: string;
      before(async () => {
        hanging = await mkdtemp(join(tmpdir(), "python-models-"));
        await mkdir(join(hanging, "initializes_forever", "1"), { recursive: true });
        await writeFile(
          join(hanging, "initializes_forever", "config.pbtxt"),
          'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n',
        );
        await writeFile(
          join(hanging, "initializes_forever", "1", "model.py"),
          [
            "import time",
            "",
            "class TritonPythonModel:",
            "    def initialize(self, args):",
            "        time.sleep(3600)",
            "",
          ].join("\n"),
        );
      });
      after(() => rm(hanging, { recursive: true, force: true }));

      /** A data plane in explicit mode over both repositories, loading `models` at start. */
      const explicitServer = (models: readonly string[], more: readonly string[] = []): Promise<ServerProcess> =>
        startServer([
          ...["--model-repository", PYTHON_MODELS, "--model-repository", hanging, "--python", MODELS_PYTHON],
          ...["--model-control-mode", "explicit", ...models.flatMap((model) => ["--load-model", model]), ...more],
        ]);

      it("opens its ports at start-up once a hung initialize has run out its --model-load-timeout-secs, and reports that model UNAVAILABLE with the reason", async () => {
        const server = await within(
          60_000,
          explicitServer(["initializes_forever", "add_sub"], ["--model-load-timeout-secs", "2"]),
          "the ports opened",
        );
        try {
          await infer(server.client, ADD_SUB);
          const index = await call(server.client, "repositoryIndex", { repositoryName: "", ready: false });
          const entry = index.models.find((model) => model.name === "initializes_forever");
          assert.equal(entry?.state, "UNAVAILABLE");
          assert.match(entry?.reason ?? "", /initializes_forever.*did not load within 2 s/);
        } finally {
          await server.stop("SIGKILL");
        }
      });

      it("loads other models and stops within its grace while a model's initialize hangs", async () => {
        const server = await explicitServer(["add_sub"], ["--shutdown-grace-secs", "1"]);
        try {
          const hung = call(server.client, "repositoryModelLoad", {
            repositoryName: "",
            modelName: "initializes_forever",
            parameters: {},
          }).catch((error: ServiceError) => error);
          await eventually(() => assert.ok(stubsOf(server.process.pid!).length >= 3, "initializes_forever started"));
          await within(
            30_000,
            call(server.client, "repositoryModelLoad", { repositoryName: "", modelName: "misbehaves", parameters: {} }),
            "misbehaves loaded",
          );
          pidOf(await infer(server.client, misbehave("pid")));
          const code = await within(15_000, server.stop("SIGTERM"), "the data plane stopped");
          assert.equal(code, 0);
          const error = await hung;
          assert.ok(error instanceof Error, "the hung load did not succeed");
        } finally {
          await server.stop("SIGKILL");
        }
      });

      it("leaves no Python process behind when the data plane is killed (SIGKILL) and its --python is a wrapper script that does not exec", async () => {
        // The stub's parent is then the wrapper, which outlives the data plane.
        const wrapper = join(hanging, "python-wrapper.sh");
        await writeFile(wrapper, `#!/bin/sh\n"${MODELS_PYTHON}" "$@"\n`, { mode: 0o755 });
        const server = await startServer([
          ...["--model-repository", PYTHON_MODELS, "--python", wrapper],
          ...["--model-control-mode", "explicit", "--load-model", "misbehaves"],
        ]);
        const dataPlane = server.process.pid!;
        // A thread that never ends keeps the process from exiting when its pipe closes.
        await infer(server.client, misbehave("thread"));
        const stubs = stubsOf(dataPlane);
        assert.equal(stubs.length, 2, "the wrapper and the stub");
        await server.stop("SIGKILL");
        await eventually(() => {
          const alive = stubs.filter((pid) => !isZombie(pid));
          assert.deepEqual(alive, [], "Python processes (or their wrappers) still running");
        }, 10_000);
      });

      it("leaves no Python process and no shared-memory file behind when the data plane is killed (SIGKILL), even one still starting", async () => {
        const server = await explicitServer(["slow_cancellable", "misbehaves", "add_sub"]);
        const dataPlane = server.process.pid!;
        void inferError(
          server,
          oneInput("slow_cancellable", "SECONDS", "FP32", new Uint8Array(new Float32Array([60]).buffer)),
        );
        // slow_cancellable's request is in its process (it runs for a minute).
        await eventually(async () => assert.equal((await requestsOf(server, "slow_cancellable"))[0], 1));
        pidOf(await infer(server.client, misbehave("thread")));
        void call(server.client, "repositoryModelLoad", {
          repositoryName: "",
          modelName: "initializes_forever",
          parameters: {},
        }).catch(() => undefined);
        // add_sub's 2, misbehaves, slow_cancellable, initializes_forever: killed as soon as the
        // last exists, before its Python has started (let alone mapped its shared memory).
        await eventually(() => assert.equal(stubsOf(dataPlane).length, 5), 30_000, 5);
        const stubs = stubsOf(dataPlane);
        await server.stop("SIGKILL");
        await eventually(() => {
          const alive = stubs.filter((pid) => !isZombie(pid));
          assert.deepEqual(alive, [], "Python processes still running");
        }, 10_000);
        const left = (await readdir("/dev/shm")).filter((name) =>
          name.startsWith(`dynamo-kserve-python-${dataPlane}-`),
        );
        assert.deepEqual(left, [], "shared-memory files left behind");
      });
    });
  });
});

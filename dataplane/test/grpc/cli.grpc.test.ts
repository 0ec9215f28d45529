import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { CLI, EXAMPLES } from "../fixtures/paths.js";
import { TestRepository } from "../fixtures/repository.js";
import { call, dataPlaneFailing, startServer, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";
import { runFailing } from "../../../e2e/support/process.js";

const run = promisify(execFile);

/** How long repeat_int32 waits before its second response in the --stream test. */
const SECOND_RESPONSE_DELAY_MS = 1500;

/** `infer` arguments that call each bundled example model (the README's and docs' commands). */
const EXAMPLE_CALLS: Record<string, string[]> = {
  add_sub_onnx: ["--input", "INPUT0:FP32:1x4=1,2,3,4", "--input", "INPUT1:FP32:1x4=1,1,1,1"],
  ensemble_add_sub: ["--input", "INPUT0:FP32:1x4=1,2,3,4", "--input", "INPUT1:FP32:1x4=1,1,1,1"],
  identity_bytes: ["--input", "INPUT0:BYTES:1x2=hello,world"],
  identity_fp32: ["--input", "INPUT0:FP32:1x3=1,2,3"],
  identity_int32: ["--input", "INPUT0:INT32:4=1,2,3,4"],
  mlp_onnx: ["--input", `INPUT:FP32:1x64=${new Array(64).fill(1).join(",")}`],
  mock_llm: ["--stream", "--input", "text_input:BYTES:1=hello"],
  mock_llm_dynamo: ["--stream", "--input", "text_input:BYTES:1=hello"],
  mock_llm_trtllm: [
    "--stream",
    "--input",
    "text_input:BYTES:1x1=hello",
    "--input",
    "max_tokens:INT32:1x1=4",
    "--input",
    "stream:BOOL:1x1=true",
  ],
  mock_llm_vllm: [
    "--stream",
    "--input",
    "text_input:BYTES:1=hello",
    "--input",
    "stream:BOOL:1=true",
    "--input",
    'sampling_parameters:BYTES:1={"max_tokens":"4"}',
  ],
  repeat_int32: ["--stream", "--input", "IN:INT32:3=1,2,3"],
};

describe("the dynamo-kserve CLI (real processes)", function () {
  this.timeout(20_000);

  describe("infer against a running data plane", () => {
    const serving = useServer();
    let server: ServerProcess;
    before(() => ({ server } = serving));
    /** The command line of `infer <model> ...args` against this data plane. */
    const inferArgs = (model: string, ...args: string[]): string[] => [
      CLI,
      "infer",
      model,
      "--url",
      `127.0.0.1:${server.grpcPort}`,
      ...args,
    ];

    it("sends typed inputs and prints the decoded reply as JSON", async () => {
      const { stdout } = await run(
        process.execPath,
        inferArgs("identity_bytes", "--input", "INPUT0:BYTES:1x2=hello,world", "--id", "cli-1"),
      );
      assert.deepEqual(JSON.parse(stdout), {
        model_name: "identity_bytes",
        model_version: "1",
        id: "cli-1",
        outputs: [{ name: "OUTPUT0", datatype: "BYTES", shape: [1, 2], values: ["hello", "world"] }],
      });
      const fp32 = await run(process.execPath, inferArgs("identity_fp32", "--input", "INPUT0:FP32:1x2=1.5,2"));
      assert.deepEqual((JSON.parse(fp32.stdout) as { outputs: { values: number[] }[] }).outputs[0]?.values, [1.5, 2]);
    });

    it("exits non-zero with the server's message when the request is refused", async () => {
      const failed = await runFailing(inferArgs("identity_int32", "--input", "INPUT0:INT32:3=1,2,3"));
      assert.equal(failed.code, 1);
      assert.match(failed.stderr, /shape \[3\] does not match the model's \[4\]/);
    });

    it("--stream prints each response of a decoupled model as a line of JSON as it arrives", async () => {
      const child = spawn(
        process.execPath,
        inferArgs(
          "repeat_int32",
          "--stream",
          "--input",
          "IN:INT32:2=7,8",
          "--input",
          `DELAY:UINT32:2=0,${SECOND_RESPONSE_DELAY_MS}`,
        ),
      );
      const lines: { line: string; at: number }[] = [];
      createInterface({ input: child.stdout }).on("line", (line) => lines.push({ line, at: Date.now() }));
      const [code] = (await once(child, "close")) as [number];
      assert.equal(code, 0);
      const outputs = lines.map(
        ({ line }) => (JSON.parse(line) as { outputs: { name: string; values: number[] }[] }).outputs,
      );
      assert.deepEqual(
        outputs.map((tensors) => tensors.map(({ name, values }) => [name, values])),
        [
          [
            ["OUT", [7]],
            ["IDX", [0]],
          ],
          [
            ["OUT", [8]],
            ["IDX", [1]],
          ],
        ],
      );
      const gap = lines[1]!.at - lines[0]!.at;
      console.log(`      (the second response was printed ${gap} ms after the first)`);
      assert.ok(gap >= SECOND_RESPONSE_DELAY_MS / 2, "the first response waited for the second");
    });

    it("--stream fails with the server's message when a response carries an error", async () => {
      const failed = await runFailing(
        inferArgs("repeat_int32", "--stream", "--input", "IN:INT32:1=1", "--input", "WAIT:UINT32:2=1,1"),
      );
      assert.equal(failed.code, 1);
      assert.match(failed.stderr, /^infer failed: .*'WAIT'.*shape/m);
    });

    it("without --stream, names --stream when the server says the model is decoupled", async () => {
      const failed = await runFailing(inferArgs("repeat_int32", "--input", "IN:INT32:1=1"));
      assert.equal(failed.code, 1);
      assert.match(failed.stderr, /is decoupled.*infer --stream/);
    });

    it("calls every bundled example model (--stream for the decoupled ones)", async () => {
      const called = readdirSync(EXAMPLES).sort();
      assert.deepEqual(Object.keys(EXAMPLE_CALLS).sort(), called, "a bundled model has no call here");
      for (const [model, args] of Object.entries(EXAMPLE_CALLS)) {
        const { stdout } = await run(process.execPath, inferArgs(model, ...args));
        const replies = args.includes("--stream") ? stdout.trimEnd().split("\n") : [stdout];
        for (const reply of replies) {
          const parsed = JSON.parse(reply) as { model_name: string; outputs: unknown[] };
          assert.equal(parsed.model_name, model);
          assert.ok(parsed.outputs.length > 0, `${model}: a reply without outputs`);
        }
      }
    });
  });

  it("prints each dataplane option with its environment variable and default", async () => {
    const help = (await run(process.execPath, [CLI, "dataplane", "--help"])).stdout.replace(/\s+/g, " ");
    assert.match(help, /--grpc-port <port> gRPC port \(0 picks a free one\) \(default: 8001, env: DYNAMO_GRPC_PORT\)/);
    assert.match(help, /--metrics-port <port> [^-]*default: 8002, env: DYNAMO_METRICS_PORT/);
    assert.match(help, /--model-repository <location> [^(]*\(repeatable\): [^(]*\(env: DYNAMO_MODEL_REPOSITORY\)/);
  });

  it("takes settings from the environment, and a flag wins over it", async () => {
    const repository = new TestRepository();
    const server = await startServer(["--model-control-mode", "explicit"], {
      DYNAMO_MODEL_REPOSITORY: repository.dir,
      DYNAMO_MODEL_CONTROL_MODE: "poll",
      DYNAMO_LOAD_MODEL: "identity_int32,repeat_int32",
    });
    try {
      const { models } = await call(server.client, "repositoryIndex", { repositoryName: "", ready: true });
      assert.deepEqual(
        models.map((model) => model.name),
        ["identity_int32", "repeat_int32"],
      );
    } finally {
      await server.stop();
      repository.remove();
    }
  });

  it("is not ready while no model is ready, but stays live", async () => {
    const repository = new TestRepository();
    const server = await startServer(["--model-repository", repository.dir, "--model-control-mode", "explicit"]);
    try {
      assert.equal((await call(server.client, "serverLive", {})).live, true);
      assert.equal((await call(server.client, "serverReady", {})).ready, false);
    } finally {
      await server.stop();
      repository.remove();
    }
  });

  describe("starts quietly on the bundled examples (as npm start does)", () => {
    for (const workers of ["1", "2"]) {
      it(`writes no deprecation warning to stderr with --grpc-workers ${workers}`, async () => {
        const server = await startServer(["--model-repository", EXAMPLES, "--grpc-workers", workers]);
        const code = await server.stop();
        assert.equal(code, 0);
        assert.doesNotMatch(server.stderr, /DeprecationWarning|FSTDEP|\[DEP\d+\]/);
        assert.equal(server.stderr, "");
      });
    }
  });

  it("fails to start with one clear line when the model repository is missing", async () => {
    const failed = await dataPlaneFailing(["--model-repository", "/no/such/repo"]);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /^dynamo-kserve: model repository '\/no\/such\/repo' cannot be read: .*ENOENT/m);
  });

  it("refuses an invalid option value with a message naming it", async () => {
    const failed = await dataPlaneFailing(["--grpc-port", "99999"]);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /--grpc-port.*0 to 65535/);
  });
});

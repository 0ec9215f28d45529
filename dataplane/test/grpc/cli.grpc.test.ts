import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { CLI, EXAMPLES } from "../fixtures/paths.js";
import { TestRepository } from "../fixtures/repository.js";
import { call, startServer, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";
import { runFailing } from "../../../e2e/support/process.js";

const run = promisify(execFile);

describe("the dynamo-kserve CLI (real processes)", function () {
  this.timeout(20_000);

  describe("infer against a running data plane", () => {
    const serving = useServer();
    let server: ServerProcess;
    before(() => ({ server } = serving));

    it("sends typed inputs and prints the decoded reply as JSON", async () => {
      const url = `127.0.0.1:${server.grpcPort}`;
      const { stdout } = await run(process.execPath, [
        CLI,
        "infer",
        "identity_bytes",
        "--url",
        url,
        "--input",
        "INPUT0:BYTES:1x2=hello,world",
        "--id",
        "cli-1",
      ]);
      assert.deepEqual(JSON.parse(stdout), {
        model_name: "identity_bytes",
        model_version: "1",
        id: "cli-1",
        outputs: [{ name: "OUTPUT0", datatype: "BYTES", shape: [1, 2], values: ["hello", "world"] }],
      });
      const fp32 = await run(process.execPath, [
        CLI,
        "infer",
        "identity_fp32",
        "--url",
        url,
        "--input",
        "INPUT0:FP32:1x2=1.5,2",
      ]);
      assert.deepEqual((JSON.parse(fp32.stdout) as { outputs: { values: number[] }[] }).outputs[0]?.values, [1.5, 2]);
    });

    it("exits non-zero with the server's message when the request is refused", async () => {
      const failed = await runFailing([
        CLI,
        "infer",
        "identity_int32",
        "--url",
        `127.0.0.1:${server.grpcPort}`,
        "--input",
        "INPUT0:INT32:3=1,2,3",
      ]);
      assert.equal(failed.code, 1);
      assert.match(failed.stderr, /shape \[3\] does not match the model's \[4\]/);
    });
  });

  it("prints each dataplane option with its environment variable and default", async () => {
    const help = (await run(process.execPath, [CLI, "dataplane", "--help"])).stdout.replace(/\s+/g, " ");
    assert.match(help, /--grpc-port <port> gRPC port \(0 picks a free one\) \(default: 8001, env: DYNAMO_GRPC_PORT\)/);
    assert.match(help, /--metrics-port <port> [^-]*default: 8002, env: DYNAMO_METRICS_PORT/);
    assert.match(help, /--model-repository <dir> [^(]*\(repeatable\); [^(]*\(env: DYNAMO_MODEL_REPOSITORY\)/);
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
    const failed = await runFailing([CLI, "dataplane", "--grpc-port", "0", "--model-repository", "/no/such/repo"]);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /^dynamo-kserve: model repository '\/no\/such\/repo' cannot be read: .*ENOENT/m);
  });

  it("refuses an invalid option value with a message naming it", async () => {
    const failed = await runFailing([CLI, "dataplane", "--grpc-port", "99999"]);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /--grpc-port.*0 to 65535/);
  });
});

import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { grpcurlBinary, requireGrpcurl } from "../../../e2e/support/prerequisites.js";
import { HealthTestClient } from "../fixtures/health.js";
import { call, eventually, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

const run = promisify(execFile);

describe("grpc.health.v1 per model, Watch, and server reflection (grpcurl)", function () {
  this.timeout(30_000);
  const serving = useServer({}, ["--model-control-mode", "explicit", "--load-model", "identity_fp32"]);
  let server: ServerProcess;
  let health: HealthTestClient;
  before(() => {
    ({ server } = serving);
    health = new HealthTestClient(`127.0.0.1:${server.grpcPort}`);
  });
  after(() => health?.close());

  it("reports each loaded model as a service of its own; a model never loaded is NOT_FOUND", async () => {
    assert.equal(await health.check("identity_fp32"), "SERVING");
    await assert.rejects(health.check("identity_int32"), { code: status.NOT_FOUND });
  });

  it("streams a model's transitions on Watch as it is loaded and unloaded", async () => {
    await call(server.client, "repositoryModelLoad", {
      repositoryName: "",
      modelName: "identity_int32",
      parameters: {},
    });
    const watched = health.watch("identity_int32");
    const overall = health.watch("inference.GRPCInferenceService");
    try {
      await eventually(() => assert.deepEqual(watched.statuses, ["SERVING"]));
      await call(server.client, "repositoryModelUnload", {
        repositoryName: "",
        modelName: "identity_int32",
        parameters: {},
      });
      await eventually(() => assert.deepEqual(watched.statuses, ["SERVING", "NOT_SERVING"]));
      // The data plane stays ready while another model serves; with none, it is not.
      await call(server.client, "repositoryModelUnload", {
        repositoryName: "",
        modelName: "identity_fp32",
        parameters: {},
      });
      await eventually(() => assert.deepEqual(overall.statuses, ["SERVING", "NOT_SERVING"]));
      await call(server.client, "repositoryModelLoad", {
        repositoryName: "",
        modelName: "identity_fp32",
        parameters: {},
      });
      await eventually(() => assert.deepEqual(overall.statuses, ["SERVING", "NOT_SERVING", "SERVING"]));
    } finally {
      watched.stream.cancel();
      overall.stream.cancel();
    }
  });

  describe("reflection", () => {
    let grpcurl: string;
    before(function () {
      requireGrpcurl(this);
      grpcurl = grpcurlBinary();
    });
    const address = (): string => `127.0.0.1:${server.grpcPort}`;

    it("lists every service to grpcurl, with no .proto files", async () => {
      const { stdout } = await run(grpcurl, ["-plaintext", address(), "list"]);
      const services = stdout.trim().split("\n").sort();
      for (const expected of [
        "dynamokserve.v1.InferenceExtensions",
        "grpc.health.v1.Health",
        "inference.GRPCInferenceService",
      ]) {
        assert.ok(services.includes(expected), `${expected} in ${services.join(", ")}`);
      }
      const { stdout: methods } = await run(grpcurl, [
        "-plaintext",
        address(),
        "list",
        "inference.GRPCInferenceService",
      ]);
      assert.match(methods, /inference\.GRPCInferenceService\.ModelStreamInfer/);
    });

    it("calls the inference service through reflection alone", async () => {
      const { stdout } = await run(grpcurl, [
        "-plaintext",
        "-d",
        JSON.stringify({ name: "identity_fp32" }),
        address(),
        "inference.GRPCInferenceService/ModelMetadata",
      ]);
      const metadata = JSON.parse(stdout) as {
        name: string;
        platform: string;
        inputs: { name: string; datatype: string; shape: string[] }[];
      };
      assert.equal(metadata.name, "identity_fp32");
      assert.deepEqual(metadata.inputs, [{ name: "INPUT0", datatype: "FP32", shape: ["-1", "-1"] }]);
      const infer = await run(grpcurl, [
        "-plaintext",
        "-d",
        JSON.stringify({
          model_name: "identity_fp32",
          inputs: [{ name: "INPUT0", datatype: "FP32", shape: [1, 3], contents: { fp32_contents: [1, 2.5, -3] } }],
        }),
        address(),
        "inference.GRPCInferenceService/ModelInfer",
      ]);
      // Typed in, raw out, as Triton answers.
      const reply = JSON.parse(infer.stdout) as { rawOutputContents: string[] };
      const raw = Buffer.from(reply.rawOutputContents[0]!, "base64");
      assert.deepEqual([...new Float32Array(raw.buffer, raw.byteOffset, 3)], [1, 2.5, -3]);
      const { stdout: described } = await run(grpcurl, ["-plaintext", address(), "describe", "inference.ModelConfig"]);
      assert.match(described, /max_batch_size/);
    });
  });
});

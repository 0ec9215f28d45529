import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import type { ModelRepositoryParameter } from "../../../proto/gen/ts/grpc_service.js";
import { cpSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import { configJson, parseText } from "../../../lib/model-repository/config.js";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { TestRepository } from "../fixtures/repository.js";
import { useServer } from "../fixtures/serving.js";
import {
  call,
  callError,
  eventually,
  infer,
  inferRequest,
  startServer,
  type ServerProcess,
} from "../fixtures/server.js";

const identityConfig = (name: string, datatype: string, dims: string): string => `
name: "${name}"
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: ${datatype} dims: ${dims} } ]
output [ { name: "OUTPUT0" data_type: ${datatype} dims: ${dims} } ]
`;

const BROKEN = 'name: "identity_int32"\nbackend: "identity"\ninput [ { name: "INPUT0" datatype: TYPE_INT32 } ]\n';

const inputShape = async (server: ServerProcess, model: string): Promise<bigint[] | undefined> =>
  (await call(server.client, "modelMetadata", { name: model, version: "" })).inputs[0]?.shape;

const indexEntry = async (server: ServerProcess, name: string) =>
  (await call(server.client, "repositoryIndex", { repositoryName: "", ready: false })).models.find(
    (model) => model.name === name,
  );

const overrideRequest = (modelName: string, config: Record<string, unknown> | string) => ({
  repositoryName: "",
  modelName,
  parameters: {
    config: {
      parameterChoice: {
        $case: "stringParam" as const,
        value: typeof config === "string" ? config : JSON.stringify(config),
      },
    },
  },
});

/** OUTPUT0 of the add_sub ONNX model (under `model`) for [1, 2, 3, 4] + [1, 1, 1, 1]. */
async function addSub(server: ServerProcess, model: string): Promise<number[]> {
  const fp32 = (values: number[]) => new Uint8Array(Float32Array.from(values).buffer);
  const input = (name: string) => ({ name, datatype: "FP32", shape: [1n, 4n], parameters: {}, contents: undefined });
  const reply = await infer(
    server.client,
    inferRequest({
      modelName: model,
      inputs: [input("INPUT0"), input("INPUT1")],
      rawInputContents: [fp32([1, 2, 3, 4]), fp32([1, 1, 1, 1])],
    }),
  );
  const sum = reply.rawOutputContents[reply.outputs.findIndex((output) => output.name === "OUTPUT0")]!;
  return [...new Float32Array(Uint8Array.from(sum).buffer)];
}

const int32Request = (model: string, values: number[]) =>
  inferRequest({
    modelName: model,
    inputs: [
      { name: "INPUT0", datatype: "INT32", shape: [BigInt(values.length)], parameters: {}, contents: undefined },
    ],
    rawInputContents: [new Uint8Array(Int32Array.from(values).buffer)],
  });

describe("model repository (real server over loopback)", function () {
  this.timeout(30_000);

  describe("poll mode", () => {
    let repository: TestRepository;
    let configMap: string;
    let server: ServerProcess;

    /** Publishes files the way the kubelet updates a ConfigMap volume: a new ..data target, swapped atomically. */
    const publishConfigMap = (generation: number, files: Record<string, string>): void => {
      const target = `..${generation}`;
      mkdirSync(join(configMap, target));
      for (const [name, content] of Object.entries(files)) {
        writeFileSync(join(configMap, target, name), content);
        try {
          symlinkSync(join("..data", name), join(configMap, name));
        } catch {
          // the key's symlink exists from an earlier generation
        }
      }
      symlinkSync(target, join(configMap, "..data_tmp"));
      renameSync(join(configMap, "..data_tmp"), join(configMap, "..data"));
    };

    before(async () => {
      repository = new TestRepository({ bad_model: 'name: "bad_model"\nbackend: "identity"\nmax_batch_sise: 4\n' });
      configMap = repository.path("..configmap");
      mkdirSync(configMap);
      publishConfigMap(1, {
        "identity_cm.pbtxt": identityConfig("identity_cm", "TYPE_INT32", "[ 2 ]"),
        // What the operator writes for an inline config: no `name`, the key names the model.
        "unnamed-cm.pbtxt": identityConfig("", "TYPE_INT32", "[ 4 ]").replace('name: ""', ""),
      });
      const binary = repository.path("..binary.pb");
      writeFileSync(
        binary,
        ModelConfig.encode(parseText(identityConfig("identity_bin", "TYPE_INT32", "[ 3 ]"), "b")).finish(),
      );
      server = await startServer([
        "--model-repository",
        repository.dir,
        "--model-repository",
        configMap,
        "--model-config",
        binary,
        "--repository-poll-secs",
        "0.2",
      ]);
    });

    after(async () => {
      await server.stop();
      repository.remove();
    });

    it("reports a model with a bad config as UNAVAILABLE with file, line and field, and serves the rest", async () => {
      const entry = await indexEntry(server, "bad_model");
      assert.equal(entry?.state, "UNAVAILABLE");
      assert.match(entry!.reason, /bad_model\/config\.pbtxt:3: .*max_batch_sise/);
      assert.equal((await call(server.client, "modelReady", { name: "bad_model", version: "" })).ready, false);
      const error = await callError(server.client, "modelInfer", inferRequest({ modelName: "bad_model" }));
      assert.equal(error.code, status.UNAVAILABLE);
      assert.match(
        error.details,
        /Request for unknown model: 'bad_model' has no available versions \(not ready: .*max_batch_sise/,
      );
      assert.equal((await indexEntry(server, "identity_fp32"))?.state, "READY");
      const ready = await call(server.client, "repositoryIndex", { repositoryName: "", ready: true });
      assert.ok(ready.models.every((model) => model.state === "READY"));
      assert.ok(!ready.models.some((model) => model.name === "bad_model"));
    });

    it("serves single config files, text from a ConfigMap volume and binary ModelConfig", async () => {
      assert.deepEqual(await inputShape(server, "identity_cm"), [2n]);
      assert.deepEqual(await inputShape(server, "unnamed-cm"), [4n]);
      assert.deepEqual(await inputShape(server, "identity_bin"), [3n]);
      const reply = await infer(server.client, int32Request("identity_bin", [1, 2, 3]));
      assert.equal(reply.outputs[0]?.name, "OUTPUT0");
    });

    it("picks up the atomic ..data swap of a ConfigMap volume", async () => {
      publishConfigMap(2, {
        "identity_cm.pbtxt": identityConfig("identity_cm", "TYPE_INT32", "[ 5 ]"),
        "unnamed-cm.pbtxt": identityConfig("", "TYPE_INT32", "[ 4 ]").replace('name: ""', ""),
      });
      await eventually(async () => assert.deepEqual(await inputShape(server, "identity_cm"), [5n]));
    });

    it("reloads a changed config without a restart", async () => {
      repository.writeModel("identity_int32", identityConfig("identity_int32", "TYPE_INT32", "[ 2 ]"));
      await eventually(async () => assert.deepEqual(await inputShape(server, "identity_int32"), [2n]));
      await infer(server.client, int32Request("identity_int32", [1, 2]));
    });

    it("keeps serving the last good config when an update is broken", async () => {
      repository.writeModel("identity_int32", BROKEN);
      await eventually(async () => {
        const entry = await indexEntry(server, "identity_int32");
        assert.equal(entry?.state, "READY");
        assert.match(entry!.reason, /configuration update rejected.*identity_int32\/config\.pbtxt:3: .*datatype/);
      });
      assert.deepEqual(await inputShape(server, "identity_int32"), [2n]);
      await infer(server.client, int32Request("identity_int32", [3, 4]));
    });

    it("loads a fixed config, a new model, and drops a removed one", async () => {
      repository.writeModel("bad_model", identityConfig("bad_model", "TYPE_FP32", "[ 1 ]"));
      repository.writeModel("added", identityConfig("added", "TYPE_INT32", "[ 1 ]"));
      await eventually(async () => {
        assert.equal((await indexEntry(server, "bad_model"))?.state, "READY");
        assert.equal((await call(server.client, "modelReady", { name: "added", version: "" })).ready, true);
      });
      rmSync(repository.path("added"), { recursive: true });
      await eventually(async () => assert.equal(await indexEntry(server, "added"), undefined));
      const error = await callError(server.client, "modelInfer", int32Request("added", [1]));
      assert.equal(error.code, status.NOT_FOUND);
    });

    it("refuses explicit load and unload outside explicit mode", async () => {
      const error = await callError(server.client, "repositoryModelLoad", {
        repositoryName: "",
        modelName: "identity_fp32",
        parameters: {},
      });
      assert.equal(error.code, status.FAILED_PRECONDITION);
      assert.match(error.details, /--model-control-mode=explicit/);
    });
  });

  describe("explicit mode", () => {
    const serving = useServer({}, ["--model-control-mode", "explicit", "--load-model", "identity_fp32"]);
    let server: ServerProcess;
    before(() => ({ server } = serving));

    it("loads only the models it is told to", async () => {
      assert.equal((await indexEntry(server, "identity_fp32"))?.state, "READY");
      const notLoaded = await indexEntry(server, "identity_int32");
      assert.equal(notLoaded?.state, "");
      assert.equal(notLoaded?.version, "");
    });

    it("loads and unloads models on request", async () => {
      const { client } = server;
      await call(client, "repositoryModelLoad", { repositoryName: "", modelName: "identity_int32", parameters: {} });
      assert.equal((await call(client, "modelReady", { name: "identity_int32", version: "" })).ready, true);
      await infer(client, int32Request("identity_int32", [1, 2, 3, 4]));
      await call(client, "repositoryModelUnload", { repositoryName: "", modelName: "identity_int32", parameters: {} });
      assert.equal((await call(client, "modelReady", { name: "identity_int32", version: "" })).ready, false);
      const entry = await indexEntry(server, "identity_int32");
      assert.deepEqual([entry?.state, entry?.reason], ["UNAVAILABLE", "unloaded"]);
      const error = await callError(client, "modelInfer", int32Request("identity_int32", [1, 2, 3, 4]));
      assert.equal(error.code, status.UNAVAILABLE);
    });

    it("loads with a JSON config override, and keeps the model when the override is bad", async () => {
      const { client } = server;
      const config = JSON.stringify({
        name: "identity_int32",
        backend: "identity",
        input: [{ name: "INPUT0", data_type: "TYPE_INT32", dims: ["6"] }],
        output: [{ name: "OUTPUT0", data_type: "TYPE_INT32", dims: ["6"] }],
      });
      const loadRequest = (json: string) => ({
        repositoryName: "",
        modelName: "identity_int32",
        parameters: { config: { parameterChoice: { $case: "stringParam" as const, value: json } } },
      });
      await call(client, "repositoryModelLoad", loadRequest(config));
      assert.deepEqual(await inputShape(server, "identity_int32"), [6n]);
      const bad = await callError(
        client,
        "repositoryModelLoad",
        loadRequest('{"name": "identity_int32", "backend": "identity", "input": [{"name": "X"}]}'),
      );
      assert.equal(bad.code, status.INVALID_ARGUMENT);
      assert.match(bad.details, /parameters\["config"\].*input\[0\] 'X'\.data_type/);
      assert.deepEqual(await inputShape(server, "identity_int32"), [6n]);
    });

    it("refuses model files sent with the load (UNIMPLEMENTED), parameters it does not know and a model_path outside its repositories (INVALID_ARGUMENT), keeping the model", async () => {
      const { client } = server;
      const load = (parameters: Record<string, ModelRepositoryParameter>) =>
        callError(client, "repositoryModelLoad", { repositoryName: "", modelName: "identity_int32", parameters });
      const withFile = await load({
        config: { parameterChoice: { $case: "stringParam", value: '{"backend": "onnxruntime"}' } },
        "file:1/model.onnx": { parameterChoice: { $case: "bytesParam", value: new Uint8Array([8, 1]) } },
      });
      assert.equal(withFile.code, status.UNIMPLEMENTED);
      assert.match(withFile.details, /'file:1\/model\.onnx'.*model files sent with the request are not supported/);
      const unknown = await load({ model_dir: { parameterChoice: { $case: "stringParam", value: "/elsewhere" } } });
      assert.equal(unknown.code, status.INVALID_ARGUMENT);
      assert.match(unknown.details, /unknown parameter 'model_dir'.*'config'.*'model_path'/);
      const elsewhere = await load({ model_path: { parameterChoice: { $case: "stringParam", value: "/elsewhere" } } });
      assert.equal(elsewhere.code, status.INVALID_ARGUMENT);
      assert.match(
        elsewhere.details,
        /parameter 'model_path': '\/elsewhere' is not under one of this server's model repositories/,
      );
      assert.deepEqual(await inputShape(server, "identity_int32"), [6n]);
    });

    it("answers a model that is not in the repository with Triton's code and message", async () => {
      const error = await callError(server.client, "repositoryModelLoad", {
        repositoryName: "",
        modelName: "missing",
        parameters: {},
      });
      assert.equal(error.code, status.INTERNAL);
      assert.match(error.details, /^failed to load 'missing', failed to poll from model repository: /);
    });

    it("unloads a model that is not loaded, or not in the repository, as a no-op (OK), as Triton does", async () => {
      for (const modelName of ["identity_int32", "identity_int32", "not_in_repository"]) {
        await call(server.client, "repositoryModelUnload", { repositoryName: "", modelName, parameters: {} });
      }
    });

    it("answers a load that fails with Triton's code and message, naming the model", async () => {
      const error = await callError(server.client, "repositoryModelLoad", overrideRequest("identity_int32", "{"));
      assert.equal(error.code, status.INVALID_ARGUMENT);
      assert.match(error.details, /^load failed for model 'identity_int32': .*parameters\["config"\]/);
    });

    it("answers a request for an unknown model or version with Triton's messages", async () => {
      const unknown = await callError(server.client, "modelInfer", int32Request("nope", [1]));
      assert.equal(unknown.code, status.NOT_FOUND);
      assert.equal(unknown.details, "Request for unknown model: 'nope' is not found");
      const version = await callError(server.client, "modelInfer", {
        ...int32Request("identity_fp32", [1]),
        modelVersion: "7",
      });
      assert.equal(version.code, status.NOT_FOUND);
      assert.match(version.details, /^Request for unknown model: 'identity_fp32' version 7 is not found/);
    });
  });

  describe("config overrides (explicit mode): what a load request may change", () => {
    const SECRET = "s3cret-of-the-server";
    let repository: TestRepository;
    let server: ServerProcess;
    let attacker: Server;
    let attackerUrl: string;
    const seen: string[] = [];

    before(async () => {
      attacker = createServer((request, response) => {
        seen.push(`${request.method} ${request.url} ${request.headers.authorization ?? ""}`);
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
      await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
      attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}/v1`;
      repository = new TestRepository();
      server = await startServer(
        ["--model-repository", repository.dir, "--model-control-mode", "explicit", "--load-model", "*"],
        { SERVER_SECRET: SECRET },
      );
    });
    after(async () => {
      await server?.stop();
      repository?.remove();
      attacker?.close();
    });

    const load = (name: string, config: Record<string, unknown> | string) =>
      call(server.client, "repositoryModelLoad", overrideRequest(name, config));
    const loadError = (name: string, config: Record<string, unknown> | string) =>
      callError(server.client, "repositoryModelLoad", overrideRequest(name, config));
    const openAiOverride = (name: string) => ({
      name,
      backend: "openai",
      input: [{ name: "text_input", data_type: "TYPE_STRING", dims: [1] }],
      output: [{ name: "text_output", data_type: "TYPE_STRING", dims: [1] }],
      parameters: { url: { string_value: attackerUrl }, api_key_env: { string_value: "SERVER_SECRET" } },
    });

    it("never adds a model that is not in the repository (the server's secrets cannot be sent to a caller's server)", async () => {
      const error = await loadError("exfiltrate", openAiOverride("exfiltrate"));
      assert.equal(error.code, status.INTERNAL);
      assert.match(
        error.details,
        /^failed to load 'exfiltrate', failed to poll from model repository: .*not in the model repository/,
      );
      const infer = await callError(server.client, "modelInfer", inferRequest({ modelName: "exfiltrate" }));
      assert.equal(infer.code, status.NOT_FOUND);
      assert.deepEqual(seen, []);
    });

    for (const [field, change] of [
      ["backend", { backend: "openai" }],
      ["platform", { platform: "ensemble" }],
      [
        "parameters",
        { parameters: { engine: { string_value: "kserve-grpc" }, upstream: { string_value: "127.0.0.1:1" } } },
      ],
      ["parameters", { parameters: { api_key_env: { string_value: "SERVER_SECRET" } } }],
      ["default_model_filename", { default_model_filename: "../../../../tmp/model.py" }],
      ["model_repository_agents", { model_repository_agents: { agents: [{ name: "checksum" }] } }],
      ["runtime", { runtime: "../libevil.so" }],
    ] as const) {
      it(`refuses an override that changes '${field}' of a model in the repository (INVALID_ARGUMENT naming it), keeping the model`, async () => {
        const error = await loadError("identity_fp32", { name: "identity_fp32", ...change });
        assert.equal(error.code, status.INVALID_ARGUMENT);
        assert.match(
          error.details,
          new RegExp(`^load failed for model 'identity_fp32': .*'${field}' cannot be changed by a load request`),
        );
        assert.equal((await call(server.client, "modelReady", { name: "identity_fp32", version: "" })).ready, true);
        assert.deepEqual(seen, []);
      });
    }

    it("refuses a name that is not a model folder's (a path, a NUL, '..') as INVALID_ARGUMENT naming the model name", async () => {
      for (const name of ["a/b", "x\0y", "..", "a\\b", ""]) {
        const error = await callError(server.client, "repositoryModelLoad", {
          repositoryName: "",
          modelName: name,
          parameters: {},
        });
        assert.equal(error.code, status.INVALID_ARGUMENT, name);
        assert.match(error.details, /model name/, name);
      }
    });

    it("completes a partial override from the model's own config ({max_batch_size} alone)", async () => {
      await load("add_sub_onnx", { max_batch_size: 2 });
      const config = await call(server.client, "modelConfig", { name: "add_sub_onnx", version: "" });
      assert.equal(config.config?.maxBatchSize, 2);
      assert.equal(config.config?.platform, "onnxruntime_onnx");
      assert.equal(config.config?.input.length, 2);
    });

    it("reloads an ONNX model with an override that names its backend, reading its files from its own folder (not the server's working directory)", async () => {
      await load("add_sub_onnx", {
        name: "add_sub_onnx",
        platform: "onnxruntime_onnx",
        max_batch_size: 4,
        input: [
          { name: "INPUT0", data_type: "TYPE_FP32", dims: [4] },
          { name: "INPUT1", data_type: "TYPE_FP32", dims: [4] },
        ],
        output: [
          { name: "OUTPUT0", data_type: "TYPE_FP32", dims: [4] },
          { name: "OUTPUT1", data_type: "TYPE_FP32", dims: [4] },
        ],
      });
      assert.deepEqual(await addSub(server, "add_sub_onnx"), [2, 3, 4, 5]);
    });

    it("reads a single-file config's model files next to that file when overridden, never from the server's working directory", async () => {
      const folder = repository.path("..single");
      mkdirSync(join(folder, "1"), { recursive: true });
      cpSync(repository.path("add_sub_onnx/1/model.onnx"), join(folder, "1", "model.onnx"));
      const config = readFileSync(repository.path("add_sub_onnx/config.pbtxt"), "utf8").replace(
        "add_sub_onnx",
        "single_onnx",
      );
      writeFileSync(join(folder, "single_onnx.pbtxt"), config);
      const single = await startServer([
        "--model-config",
        join(folder, "single_onnx.pbtxt"),
        "--model-control-mode",
        "explicit",
        "--load-model",
        "*",
      ]);
      try {
        await call(single.client, "repositoryModelLoad", overrideRequest("single_onnx", { max_batch_size: 2 }));
        assert.deepEqual(await addSub(single, "single_onnx"), [2, 3, 4, 5]);
      } finally {
        await single.stop();
      }
    });

    it("takes back an override that sends the model's whole config unchanged (get the config, change a field, load it)", async () => {
      const current = await call(server.client, "modelConfig", { name: "identity_fp32", version: "" });
      const json = configJson({ ...current.config!, maxBatchSize: current.config!.maxBatchSize });
      await load("identity_fp32", JSON.stringify(json));
      assert.equal((await call(server.client, "modelReady", { name: "identity_fp32", version: "" })).ready, true);
    });
  });

  describe("shutdown", () => {
    it("finishes in-flight requests on SIGTERM, then exits 0", async () => {
      const repository = new TestRepository();
      const server = await startServer(["--model-repository", repository.dir]);
      try {
        const stream = server.client.modelStreamInfer();
        const values: number[] = [];
        const ended = new Promise<void>((resolve, reject) => {
          stream.on("data", (reply: { inferResponse?: { rawOutputContents: Uint8Array[] } }) => {
            const raw = reply.inferResponse!.rawOutputContents[0]!;
            values.push(new DataView(raw.buffer, raw.byteOffset).getInt32(0, true));
          });
          stream.on("end", resolve);
          stream.on("error", reject);
        });
        stream.write(
          inferRequest({
            modelName: "repeat_int32",
            inputs: [
              { name: "IN", datatype: "INT32", shape: [2n], parameters: {}, contents: undefined },
              { name: "DELAY", datatype: "UINT32", shape: [2n], parameters: {}, contents: undefined },
            ],
            rawInputContents: [
              new Uint8Array(Int32Array.of(1, 2).buffer),
              new Uint8Array(Uint32Array.of(0, 500).buffer),
            ],
          }),
        );
        stream.end();
        await new Promise((resolve) => setTimeout(resolve, 100));
        server.process.kill("SIGTERM");
        await ended;
        assert.deepEqual(values, [1, 2]);
        assert.equal(await server.stop(), 0);
      } finally {
        await server.stop();
        repository.remove();
      }
    });
  });
});

import { status, type ServiceError } from "@grpc/grpc-js";
import fc from "fast-check";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import { call, infer, inferRequest, startServer, type ServerProcess } from "../fixtures/server.js";
import { TestRepository } from "../fixtures/repository.js";

/**
 * The fuzz tier for model control: hostile RepositoryModelLoad requests — config overrides
 * that try to point a model at a caller's server with a secret of the server's environment,
 * at an internal address, at code outside the model's folder, or names that are paths —
 * mixed with legitimate overrides, sent in batches to a data plane in explicit mode. After
 * each batch: the caller's server has seen nothing, every model still serves with the
 * engine, parameters and files its repository gives it, and a model no request touched
 * answers correctly. Seeded: FUZZ_SEED, FUZZ_RUNS (batches: a twentieth of the gRPC tier's).
 */

const SEED = Number(process.env["FUZZ_SEED"] ?? 15);
const RUNS = Math.max(1, Math.floor(Number(process.env["FUZZ_RUNS"] ?? 600) / 20));
const BATCH = 10;
const SECRET = "secret-of-the-server-environment";
/** What a load may not change, as ModelConfig fields. */
const GUARDED = [
  "backend",
  "platform",
  "runtime",
  "parameters",
  "defaultModelFilename",
  "modelRepositoryAgents",
] as const;
const TARGETS = ["identity_fp32", "add_sub_onnx", "mock_llm", "missing", "a/b", "x\0y", "..", ""];
/** No request names it: it must serve throughout. */
const UNTOUCHED = "identity_int32";

const parameterValue = (urls: { http: string; hostPort: string }) =>
  fc.constantFrom(urls.http, urls.hostPort, "SERVER_SECRET", "openai", "kserve-grpc", "../../../etc", "python");

/** What a load may change: how the model is served. */
const SERVING_FIELDS = {
  max_batch_size: fc.constantFrom(0, 1, 8, -1, 2_147_483_647),
  instance_group: fc.array(fc.record({ count: fc.integer({ min: 0, max: 3 }) }), { maxLength: 2 }),
  dynamic_batching: fc.constant({}),
  model_transaction_policy: fc.record({ decoupled: fc.boolean() }),
  version_policy: fc.constant({ latest: { num_versions: 1 } }),
};

/** Overrides that also try what a load may not change. */
const hostileOverride = (urls: { http: string; hostPort: string }) =>
  fc.record(
    {
      name: fc.constantFrom("identity_fp32", "other", "../x"),
      backend: fc.constantFrom("identity", "openai", "kserve-grpc", "python", "onnxruntime", "mocker"),
      platform: fc.constantFrom("", "ensemble", "onnxruntime_onnx"),
      runtime: fc.constantFrom("", "../libevil.so"),
      parameters: fc.dictionary(
        fc.constantFrom("engine", "url", "upstream", "api_key_env", "EXECUTION_ENV_PATH"),
        parameterValue(urls).map((value) => ({ string_value: value })),
      ),
      default_model_filename: fc.constantFrom("model.py", "../../../../tmp/model.py", "/etc/passwd"),
      ...SERVING_FIELDS,
    },
    { requiredKeys: [] },
  );

describe(`fuzz: hostile config overrides for model control (seed ${SEED}, ${RUNS} batches of ${BATCH})`, function () {
  this.timeout(Math.max(120_000, RUNS * 10_000));
  let repository: TestRepository;
  let server: ServerProcess;
  let attacker: Server;
  const seen: string[] = [];
  const urls = { http: "", hostPort: "" };
  const original = new Map<string, ModelConfig>();
  const codes = new Map<string, number>();

  before(async () => {
    attacker = createServer((request, response) => {
      seen.push(`${request.method} ${request.url} ${request.headers.authorization ?? ""}`);
      response.end();
    });
    await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
    const { port } = attacker.address() as AddressInfo;
    urls.http = `http://127.0.0.1:${port}/v1`;
    urls.hostPort = `127.0.0.1:${port}`;
    repository = new TestRepository();
    server = await startServer(
      ["--model-repository", repository.dir, "--model-control-mode", "explicit", "--load-model", "*"],
      { SERVER_SECRET: SECRET },
    );
    for (const name of TARGETS.slice(0, 3)) {
      original.set(name, (await call(server.client, "modelConfig", { name, version: "" })).config!);
    }
  });
  after(async () => {
    await server?.stop();
    repository?.remove();
    attacker?.close();
    console.log(`      fuzz: overrides: ${[...codes].map(([code, n]) => `${code} ${n}`).join(", ")}`);
  });

  const load = async (modelName: string, config: string): Promise<void> => {
    const error = await call(server.client, "repositoryModelLoad", {
      repositoryName: "",
      modelName,
      parameters: { config: { parameterChoice: { $case: "stringParam", value: config } } },
    }).then(
      () => undefined,
      (failure: ServiceError) => failure,
    );
    const code = status[error?.code ?? status.OK];
    codes.set(code, (codes.get(code) ?? 0) + 1);
    if (error === undefined) return;
    if (error.code === status.INVALID_ARGUMENT) return;
    if (
      error.code === status.INTERNAL &&
      /^failed to load '.*', failed to poll from model repository/s.test(error.details)
    )
      return;
    throw new Error(`${modelName}: ${status[error.code]}: ${error.details} (override ${config})`);
  };

  it("never lets a load choose where secrets, code or connections go, and keeps every other model serving", async () => {
    const request = fc.record({
      model: fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...TARGETS.slice(0, 3)) }, fc.constantFrom(...TARGETS)),
      override: fc.oneof(
        { weight: 4, arbitrary: fc.record(SERVING_FIELDS, { requiredKeys: [] }).map((json) => JSON.stringify(json)) },
        { weight: 5, arbitrary: hostileOverride(urls).map((json) => JSON.stringify(json)) },
        { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
      ),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: BATCH, maxLength: BATCH }), async (requests) => {
        await Promise.all(requests.map(({ model, override }) => load(model, override)));
        assert.equal(server.process.exitCode, null, "the data plane exited");
        for (const [name, before] of original) {
          const reply = await call(server.client, "modelConfig", { name, version: "" }).catch(() => undefined);
          if (reply === undefined) continue; // a failed load of a model not yet loaded: not served at all
          for (const field of GUARDED) assert.deepEqual(reply.config![field], before[field], `${name}.${field}`);
        }
        const answer = await infer(
          server.client,
          inferRequest({
            modelName: UNTOUCHED,
            inputs: [{ name: "INPUT0", datatype: "INT32", shape: [4n], parameters: {}, contents: undefined }],
            rawInputContents: [new Uint8Array(Int32Array.of(1, 2, 3, 4).buffer)],
          }),
        );
        assert.deepEqual([...new Int32Array(new Uint8Array(answer.rawOutputContents[0]!).buffer)], [1, 2, 3, 4]);
        assert.deepEqual(seen, [], "the caller's server was reached");
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });
});

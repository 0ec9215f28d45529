import { status, type Metadata } from "@grpc/grpc-js";
import { VARIANT_HEADER } from "../../../lib/contract/dataplane.js";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import type { InferTensorContents, ModelInferRequest_InferInputTensor } from "../../../proto/gen/ts/grpc_service.js";
import { DataType } from "../../../proto/gen/ts/model_config.js";
import { joinBytesElements } from "../../src/tensors/bytes.js";
import { DATATYPE_NAMES, DATATYPES, type Datatype } from "../../../lib/model-repository/datatypes.js";
import { emptyContents } from "../../src/tensors/typed.js";
import { IDENTITY_ALL_TYPES, IDENTITY_PAIR } from "../fixtures/repository.js";
import { call, callError, infer, inferRequest, startServer, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";
import { HealthTestClient } from "../fixtures/health.js";

/** Two elements of every datatype, typed (where it has a typed form) and raw. */
const SAMPLES: Record<Datatype, { typed?: unknown[]; raw: Uint8Array }> = {
  BOOL: { typed: [true, false], raw: Uint8Array.of(1, 0) },
  UINT8: { typed: [7, 255], raw: Uint8Array.of(7, 255) },
  UINT16: { typed: [7, 65535], raw: new Uint8Array(Uint16Array.of(7, 65535).buffer) },
  UINT32: { typed: [7, 4294967295], raw: new Uint8Array(Uint32Array.of(7, 4294967295).buffer) },
  UINT64: { typed: [7n, 18446744073709551615n], raw: new Uint8Array(BigUint64Array.of(7n, 2n ** 64n - 1n).buffer) },
  INT8: { typed: [-7, 127], raw: new Uint8Array(Int8Array.of(-7, 127).buffer) },
  INT16: { typed: [-7, 32767], raw: new Uint8Array(Int16Array.of(-7, 32767).buffer) },
  INT32: { typed: [-7, 2147483647], raw: new Uint8Array(Int32Array.of(-7, 2147483647).buffer) },
  INT64: { typed: [-7n, 9223372036854775807n], raw: new Uint8Array(BigInt64Array.of(-7n, 2n ** 63n - 1n).buffer) },
  FP16: { raw: Uint8Array.of(0x00, 0x3c, 0x00, 0xc0) },
  BF16: { raw: Uint8Array.of(0x80, 0x3f, 0x00, 0xc0) },
  FP32: { typed: [1.5, -0.25], raw: new Uint8Array(Float32Array.of(1.5, -0.25).buffer) },
  FP64: { typed: [Math.E, -1e300], raw: new Uint8Array(Float64Array.of(Math.E, -1e300).buffer) },
  BYTES: {
    typed: [new TextEncoder().encode("héllo"), new Uint8Array(0)],
    raw: joinBytesElements([new TextEncoder().encode("héllo"), new Uint8Array(0)]),
  },
};

const typedInput = (name: string, datatype: Datatype, values: unknown[], shape = [BigInt(values.length)]) => {
  const contents: InferTensorContents = { ...emptyContents(), [DATATYPES[datatype].typedField!]: values };
  return { name, datatype, shape, parameters: {}, contents } satisfies ModelInferRequest_InferInputTensor;
};
const rawInput = (name: string, datatype: string, shape: bigint[]): ModelInferRequest_InferInputTensor => ({
  name,
  datatype,
  shape,
  parameters: {},
  contents: undefined,
});
const fp32 = (...values: number[]): Uint8Array => new Uint8Array(Float32Array.from(values).buffer);

describe("data plane RPCs (real server over loopback)", function () {
  this.timeout(20_000);
  const serving = useServer({ identity_all: IDENTITY_ALL_TYPES, identity_pair: IDENTITY_PAIR }, [
    "--model-control-mode",
    "none",
  ]);
  let server: ServerProcess;
  before(() => ({ server } = serving));

  describe("health", () => {
    it("is live and ready, and knows which models are ready", async () => {
      const { client } = server;
      assert.equal((await call(client, "serverLive", {})).live, true);
      assert.equal((await call(client, "serverReady", {})).ready, true);
      assert.equal((await call(client, "modelReady", { name: "identity_fp32", version: "" })).ready, true);
      assert.equal((await call(client, "modelReady", { name: "identity_fp32", version: "1" })).ready, true);
      assert.equal((await call(client, "modelReady", { name: "identity_fp32", version: "9" })).ready, false);
      assert.equal((await call(client, "modelReady", { name: "no_such_model", version: "" })).ready, false);
    });

    it("answers grpc.health.v1 Check for liveness ('') and readiness (the inference service)", async () => {
      const health = new HealthTestClient(`127.0.0.1:${server.grpcPort}`);
      try {
        assert.equal(await health.check(""), "SERVING");
        assert.equal(await health.check("inference.GRPCInferenceService"), "SERVING");
        await assert.rejects(health.check("no.such.Service"), { code: status.NOT_FOUND });
      } finally {
        health.close();
      }
    });

    it("answers the KServe HTTP health endpoints on the metrics port", async () => {
      const get = (path: string) =>
        new Promise<number>((resolve, reject) => {
          httpRequest({ host: "127.0.0.1", port: server.metricsPort, path }, (response) => {
            response.resume();
            resolve(response.statusCode ?? 0);
          })
            .on("error", reject)
            .end();
        });
      assert.equal(await get("/v2/health/live"), 200);
      assert.equal(await get("/v2/health/ready"), 200);
      assert.equal(await get("/nothing"), 404);
    });
  });

  describe("metadata and configuration", () => {
    it("reports the server's name, version and the extensions it implements", async () => {
      const metadata = await call(server.client, "serverMetadata", {});
      assert.equal(metadata.name, "dynamo-kserve");
      assert.match(metadata.version, /^\d+\.\d+\.\d+/);
      assert.deepEqual(metadata.extensions, [
        "model_repository",
        "model_configuration",
        "statistics",
        "parameters",
        "logging",
        "binary_tensor_data",
        "generate",
        "system_shared_memory",
        "sequence",
      ]);
    });

    it("reports the name --server-name sets (clients written for Triton check for 'triton'), on gRPC and GET /v2 alike", async () => {
      const named = await startServer(["--server-name", "triton"]);
      try {
        assert.equal((await call(named.client, "serverMetadata", {})).name, "triton");
        const rest = (await (await fetch(`http://127.0.0.1:${named.httpPort}/v2`)).json()) as { name: string };
        assert.equal(rest.name, "triton");
      } finally {
        await named.stop();
      }
    });

    it("names its variant (--variant) in every gRPC reply's initial metadata and every HTTP reply, errors too; none without it", async () => {
      const variant = await startServer(["--variant", "canary"]);
      const headerOf = async (port: number, path: string) =>
        (await fetch(`http://127.0.0.1:${port}${path}`)).headers.get(VARIANT_HEADER);
      /** The initial metadata of a reply (ServerMetadata: the same interceptor as every call). */
      const replyMetadata = (target: ServerProcess) =>
        new Promise<Metadata>((resolve, reject) => {
          let received: Metadata | undefined;
          const pending = target.client.serverMetadata({}, (error) => (error ? reject(error) : resolve(received!)));
          pending.on("metadata", (metadata: Metadata) => (received = metadata));
        });
      try {
        assert.deepEqual((await replyMetadata(variant)).get(VARIANT_HEADER), ["canary"]);
        assert.equal(await headerOf(variant.httpPort, "/v2/health/ready"), "canary");
        assert.equal(await headerOf(variant.httpPort, "/v2/models/no_such_model"), "canary");
        assert.deepEqual((await replyMetadata(server)).get(VARIANT_HEADER), []);
        assert.equal(await headerOf(server.httpPort, "/v2/health/ready"), null);
      } finally {
        await variant.stop();
      }
    });

    it("prepends a -1 batch dimension for batching models, as Triton does", async () => {
      const { client } = server;
      const batched = await call(client, "modelMetadata", { name: "identity_pair", version: "" });
      assert.deepEqual(batched.versions, ["1"]);
      assert.equal(batched.platform, "identity");
      assert.deepEqual(
        batched.inputs.map((input) => [input.name, input.datatype, input.shape]),
        [
          ["A", "FP32", [-1n, 2n, 3n]],
          ["B", "INT64", [-1n, -1n]],
        ],
      );
      const plain = await call(client, "modelMetadata", { name: "identity_int32", version: "1" });
      assert.deepEqual(plain.outputs[0]?.shape, [4n]);
      const bytes = await call(client, "modelMetadata", { name: "identity_bytes", version: "" });
      assert.equal(bytes.inputs[0]?.datatype, "BYTES");
    });

    it("returns the parsed configuration", async () => {
      const { config } = await call(server.client, "modelConfig", { name: "repeat_int32", version: "" });
      assert.equal(config?.name, "repeat_int32");
      assert.equal(config?.backend, "repeat");
      assert.equal(config?.modelTransactionPolicy?.decoupled, true);
      assert.equal(config?.input[0]?.dataType, DataType.TYPE_INT32);
    });

    it("answers NOT_FOUND for an unknown model or version", async () => {
      const { client } = server;
      const unknown = await callError(client, "modelMetadata", { name: "nope", version: "" });
      assert.equal(unknown.code, status.NOT_FOUND);
      assert.match(unknown.details, /^Request for unknown model: 'nope' is not found/);
      const version = await callError(client, "modelConfig", { name: "identity_fp32", version: "3" });
      assert.equal(version.code, status.NOT_FOUND);
      assert.match(version.details, /^Request for unknown model: 'identity_fp32' version 3 is not found/);
    });
  });

  describe("ModelInfer", () => {
    for (const datatype of DATATYPE_NAMES) {
      const sample = SAMPLES[datatype];
      it(`echoes ${datatype} raw in, raw out`, async () => {
        const reply = await infer(
          server.client,
          inferRequest({
            modelName: "identity_all",
            inputs: [rawInput(`IN_${datatype}`, datatype, [2n])],
            rawInputContents: [sample.raw],
          }),
        );
        assert.equal(reply.outputs.length, 1);
        assert.equal(reply.outputs[0]?.name, `OUT_${datatype}`);
        assert.equal(reply.outputs[0]?.datatype, datatype);
        assert.deepEqual(reply.outputs[0]?.shape, [2n]);
        assert.deepEqual(Buffer.from(reply.rawOutputContents[0]!), Buffer.from(sample.raw));
      });

      if (sample.typed === undefined) {
        it(`refuses ${datatype} in typed contents (it has no typed field)`, async () => {
          const error = await callError(
            server.client,
            "modelInfer",
            inferRequest({ modelName: "identity_all", inputs: [rawInput(`IN_${datatype}`, datatype, [0n])] }),
          );
          assert.equal(error.code, status.INVALID_ARGUMENT);
          assert.match(error.details, new RegExp(`${datatype} has no typed 'contents' field`));
        });
      } else {
        it(`echoes ${datatype} typed in, raw out (raw_output_contents[0]), as Triton answers`, async () => {
          const reply = await infer(
            server.client,
            inferRequest({
              modelName: "identity_all",
              inputs: [typedInput(`IN_${datatype}`, datatype, sample.typed!)],
            }),
          );
          assert.equal(reply.outputs[0]?.contents, undefined);
          assert.deepEqual(Buffer.from(reply.rawOutputContents[0] ?? []), Buffer.from(sample.raw));
        });
      }
    }

    it("echoes the request id and the chosen version, and, as Triton, not the request's parameters", async () => {
      const reply = await infer(
        server.client,
        inferRequest({
          modelName: "identity_fp32",
          id: "req-42",
          parameters: { note: { parameterChoice: { $case: "stringParam", value: "not echoed" } } },
          inputs: [rawInput("INPUT0", "FP32", [1n, 2n])],
          rawInputContents: [fp32(1, 2)],
        }),
      );
      assert.equal(reply.id, "req-42");
      assert.equal(reply.modelName, "identity_fp32");
      assert.equal(reply.modelVersion, "1");
      assert.deepEqual(reply.parameters, {});
    });

    it("returns only the requested outputs and skips absent optional inputs", async () => {
      const both = inferRequest({
        modelName: "identity_pair",
        inputs: [rawInput("A", "FP32", [1n, 2n, 3n]), rawInput("B", "INT64", [1n, 1n])],
        rawInputContents: [fp32(1, 2, 3, 4, 5, 6), new Uint8Array(BigInt64Array.of(5n).buffer)],
      });
      const all = await infer(server.client, both);
      assert.deepEqual(
        all.outputs.map((output) => output.name),
        ["A_OUT", "B_OUT"],
      );
      const onlyB = await infer(server.client, { ...both, outputs: [{ name: "B_OUT", parameters: {} }] });
      assert.deepEqual(
        onlyB.outputs.map((output) => output.name),
        ["B_OUT"],
      );
      assert.deepEqual([...new BigInt64Array(new Uint8Array(onlyB.rawOutputContents[0]!).buffer)], [5n]);
      const withoutB = await infer(server.client, {
        ...both,
        inputs: both.inputs.slice(0, 1),
        rawInputContents: both.rawInputContents.slice(0, 1),
      });
      assert.deepEqual(
        withoutB.outputs.map((output) => output.name),
        ["A_OUT"],
      );
    });

    it("passes a large raw tensor through unchanged", async () => {
      const values = new Float32Array(4 * 1024 * 1024).map((_, i) => i % 1000);
      const raw = new Uint8Array(values.buffer);
      const reply = await infer(
        server.client,
        inferRequest({
          modelName: "identity_fp32",
          inputs: [rawInput("INPUT0", "FP32", [1n, BigInt(values.length)])],
          rawInputContents: [raw],
        }),
      );
      assert.ok(Buffer.from(reply.rawOutputContents[0]!).equals(Buffer.from(raw)));
    });

    const rejections: [string, () => Parameters<typeof inferRequest>[0], status, RegExp][] = [
      [
        "an unknown model",
        () => ({ modelName: "nope" }),
        status.NOT_FOUND,
        /^Request for unknown model: 'nope' is not found$/,
      ],
      [
        "an unknown version",
        () => ({ modelName: "identity_fp32", modelVersion: "2" }),
        status.NOT_FOUND,
        /^Request for unknown model: '[^']+' version 2 is not found/,
      ],
      [
        "an unknown input",
        () => ({ modelName: "identity_fp32", inputs: [rawInput("X", "FP32", [1n, 1n])], rawInputContents: [fp32(1)] }),
        status.INVALID_ARGUMENT,
        /unexpected input 'X'/,
      ],
      [
        "a missing required input",
        () => ({ modelName: "identity_pair" }),
        status.INVALID_ARGUMENT,
        /missing required input 'A'/,
      ],
      [
        "a datatype mismatch",
        () => ({
          modelName: "identity_fp32",
          inputs: [rawInput("INPUT0", "INT32", [1n, 1n])],
          rawInputContents: [fp32(1)],
        }),
        status.INVALID_ARGUMENT,
        /tensor 'INPUT0': datatype mismatch: model 'identity_fp32' expects FP32, got 'INT32'/,
      ],
      [
        "a shape that does not match the config",
        () => ({
          modelName: "identity_int32",
          inputs: [rawInput("INPUT0", "INT32", [3n])],
          rawInputContents: [new Uint8Array(12)],
        }),
        status.INVALID_ARGUMENT,
        /tensor 'INPUT0': shape \[3\] does not match the model's \[4\]/,
      ],
      [
        "a batch larger than max_batch_size",
        () => ({
          modelName: "identity_fp32",
          inputs: [rawInput("INPUT0", "FP32", [9n, 1n])],
          rawInputContents: [new Uint8Array(36)],
        }),
        status.INVALID_ARGUMENT,
        /batch size 9 is outside 1\.\.8/,
      ],
      [
        "a missing batch dimension",
        () => ({
          modelName: "identity_fp32",
          inputs: [rawInput("INPUT0", "FP32", [2n])],
          rawInputContents: [fp32(1, 2)],
        }),
        status.INVALID_ARGUMENT,
        /shape \[2\] does not match the model's \[-1,-1\] \(first dimension is the batch/,
      ],
      [
        "a raw byte size that does not match the shape",
        () => ({
          modelName: "identity_fp32",
          inputs: [rawInput("INPUT0", "FP32", [1n, 3n])],
          rawInputContents: [fp32(1, 2)],
        }),
        status.INVALID_ARGUMENT,
        /raw data is 8 bytes, but shape \[1,3\] of FP32 needs 12/,
      ],
      [
        "a malformed BYTES length prefix",
        () => ({
          modelName: "identity_bytes",
          inputs: [rawInput("INPUT0", "BYTES", [1n, 1n])],
          rawInputContents: [Uint8Array.of(200, 0, 0, 0, 65)],
        }),
        status.INVALID_ARGUMENT,
        /tensor 'INPUT0': malformed BYTES data/,
      ],
      [
        "both typed contents and raw contents",
        () => ({
          modelName: "identity_fp32",
          inputs: [{ ...typedInput("INPUT0", "FP32", [1], [1n, 1n]) }],
          rawInputContents: [fp32(1)],
        }),
        status.INVALID_ARGUMENT,
        /both 'contents' and raw_input_contents are set/,
      ],
      [
        "more raw contents than inputs",
        () => ({
          modelName: "identity_fp32",
          inputs: [rawInput("INPUT0", "FP32", [1n, 1n])],
          rawInputContents: [fp32(1), fp32(2)],
        }),
        status.INVALID_ARGUMENT,
        /raw_input_contents has 2 entries but the request has 1 inputs/,
      ],
      [
        "a typed element count that does not match the shape",
        () => ({ modelName: "identity_fp32", inputs: [typedInput("INPUT0", "FP32", [1, 2], [1n, 3n])] }),
        status.INVALID_ARGUMENT,
        /shape needs 3 elements but contents\.fp32_contents holds 2/,
      ],
      [
        "an unknown requested output",
        () => ({
          modelName: "identity_fp32",
          inputs: [rawInput("INPUT0", "FP32", [1n, 1n])],
          rawInputContents: [fp32(1)],
          outputs: [{ name: "NOPE", parameters: {} }],
        }),
        status.INVALID_ARGUMENT,
        /unexpected requested output 'NOPE'/,
      ],
      [
        "a decoupled model",
        () => ({ modelName: "repeat_int32", inputs: [typedInput("IN", "INT32", [1])] }),
        status.UNIMPLEMENTED,
        /decoupled.*use the ModelStreamInfer RPC/,
      ],
    ];
    for (const [what, build, code, pattern] of rejections) {
      it(`rejects ${what} with ${status[code]}`, async () => {
        const error = await callError(server.client, "modelInfer", inferRequest(build()));
        assert.equal(error.code, code, error.details);
        assert.match(error.details, pattern);
      });
    }
  });

  describe("ModelStatistics", () => {
    it("counts successes, failures, inferences and executions per model version", async () => {
      const { client } = server;
      const send = (batch: number) =>
        infer(
          client,
          inferRequest({
            modelName: "identity_pair",
            inputs: [rawInput("A", "FP32", [BigInt(batch), 2n, 3n])],
            rawInputContents: [new Uint8Array(batch * 24)],
          }),
        );
      const read = async () => {
        const { modelStats } = await call(client, "modelStatistics", { name: "identity_pair", version: "" });
        assert.equal(modelStats.length, 1);
        assert.equal(modelStats[0]!.version, "1");
        return modelStats[0]!;
      };
      const before = await read();
      await send(1);
      await send(3);
      await callError(client, "modelInfer", inferRequest({ modelName: "identity_pair" }));
      const stats = await read();
      assert.equal(stats.inferenceCount - before.inferenceCount, 4n);
      assert.equal(stats.executionCount - before.executionCount, 2n);
      assert.equal(stats.inferenceStats!.success!.count - before.inferenceStats!.success!.count, 2n);
      assert.equal(stats.inferenceStats!.fail!.count - before.inferenceStats!.fail!.count, 1n);
      assert.equal(stats.inferenceStats!.computeInfer!.count - before.inferenceStats!.computeInfer!.count, 2n);
      assert.ok(stats.inferenceStats!.success!.ns > before.inferenceStats!.success!.ns);
      assert.ok(stats.lastInference > 0n);
      const all = await call(client, "modelStatistics", { name: "", version: "" });
      assert.ok(all.modelStats.some((row) => row.name === "identity_fp32"));
      const missing = await callError(client, "modelStatistics", { name: "nope", version: "" });
      assert.equal(missing.code, status.NOT_FOUND);
    });
  });

  describe("RPCs this data plane does not implement, and shared memory when --allow-client-shm is off", () => {
    it("answers UNIMPLEMENTED with a reason, and reports no shared-memory regions", async () => {
      const { client } = server;
      const disabled = [
        callError(client, "systemSharedMemoryRegister", { name: "r", key: "/k", offset: 0n, byteSize: 8n }),
        callError(client, "systemSharedMemoryUnregister", { name: "" }),
        callError(client, "cudaSharedMemoryUnregister", { name: "" }),
        // Off, the option is said first (Triton's GPU build, and both builds over HTTP).
        callError(client, "cudaSharedMemoryRegister", {
          name: "r",
          rawHandle: new Uint8Array(0),
          deviceId: 0n,
          byteSize: 8n,
        }),
      ];
      for (const error of await Promise.all(disabled)) {
        assert.equal(error.code, status.UNIMPLEMENTED);
        assert.equal(
          error.details,
          "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.",
        );
      }
      const trace = await callError(client, "traceSetting", { settings: {}, modelName: "" });
      assert.equal(trace.code, status.UNIMPLEMENTED);
      assert.match(trace.details, /is not implemented by this data plane/);
      assert.deepEqual((await call(client, "systemSharedMemoryStatus", { name: "" })).regions, {});
      assert.deepEqual((await call(client, "cudaSharedMemoryStatus", { name: "" })).regions, {});
    });
  });
});

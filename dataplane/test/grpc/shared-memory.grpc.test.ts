import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { readFileSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { MAX_SHM_REGIONS } from "../../src/limits.js";
import { joinBytesElements, splitBytesElements } from "../../src/tensors/bytes.js";
import {
  MODELS_PYTHON,
  requireTritonPeers,
  requireTritonServer,
  startTritonServer,
  type Peer,
} from "../fixtures/peers.js";
import { PYTHON_MODELS } from "../fixtures/python-models.js";
import { TestRepository } from "../fixtures/repository.js";
import {
  call,
  callError,
  eventually,
  infer,
  inferRequest,
  startServer,
  streamAll,
  type ServerProcess,
} from "../fixtures/server.js";
import {
  assertNoSegmentsLeft,
  inRegion,
  int64Parameter as int64,
  removeSegment,
  shmName,
  shmSegment,
  stringParameter as string,
  tensorInput as input,
  type ShmSegment,
} from "../fixtures/shm-segments.js";

/**
 * System shared memory over gRPC, as Triton's extension (design/issue-38.md §1.4): regions
 * registered by name, tensors named by region in a request's parameters, every error with
 * Triton's text and code. Segments are files under /dev/shm, as shm_open makes them.
 */

const DISABLED = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";
const MAX_MESSAGE_SIZE = 4 * 1024 * 1024;

const fp32 = (...values: number[]): Buffer => Buffer.from(Float32Array.from(values).buffer);
const floats = (bytes: Uint8Array): number[] => Array.from(new Float32Array(Uint8Array.from(bytes).buffer));
const output = (response: ModelInferResponse, name: string) => {
  const index = response.outputs.findIndex((tensor) => tensor.name === name);
  assert.ok(index >= 0, `no output ${name}`);
  return { tensor: response.outputs[index]!, raw: response.rawOutputContents[index] };
};

/** add_sub's request: INPUT0 from region `in` (at `offset`), INPUT1 over the wire; OUTPUT0 into region `out`. */
const addSubRequest = (model: string, in0: string, offset: number, in1: Buffer, out: string): ModelInferRequest =>
  inferRequest({
    modelName: model,
    inputs: [input("INPUT0", "FP32", [4], inRegion(in0, 16, offset)), input("INPUT1", "FP32", [4])],
    outputs: [
      { name: "OUTPUT0", parameters: inRegion(out, 16) },
      { name: "OUTPUT1", parameters: {} },
    ],
    rawInputContents: [in1],
  });

describe("system shared memory over gRPC (real server over loopback)", function () {
  this.timeout(60_000);
  const segments: ShmSegment[] = [];
  const segment = (contents: Uint8Array | number): ShmSegment => {
    const made = shmSegment(contents);
    segments.push(made);
    return made;
  };
  afterEach(() => {
    for (const made of segments.splice(0)) removeSegment(made);
  });
  after(assertNoSegmentsLeft);

  describe("with --allow-client-shm (and a python model)", () => {
    let server: ServerProcess;
    let repository: TestRepository;
    before(async function () {
      requireTritonPeers(this);
      repository = new TestRepository();
      server = await startServer([
        ...["--model-repository", repository.dir, "--model-repository", PYTHON_MODELS],
        ...["--python", MODELS_PYTHON, "--allow-client-shm", "--max-message-size", String(MAX_MESSAGE_SIZE)],
      ]);
    });
    after(async () => {
      await server?.stop();
      repository?.remove();
    });
    afterEach(async () => {
      if (server !== undefined) await call(server.client, "systemSharedMemoryUnregister", { name: "" });
    });
    const registration = (name: string, key: string, offset: number, byteSize: number) => ({
      name,
      key,
      offset: BigInt(offset),
      byteSize: BigInt(byteSize),
    });
    const register = (...region: Parameters<typeof registration>) =>
      call(server.client, "systemSharedMemoryRegister", registration(...region));
    const registerError = (...region: Parameters<typeof registration>) =>
      callError(server.client, "systemSharedMemoryRegister", registration(...region));
    const statusNames = async (): Promise<string[]> =>
      Object.keys((await call(server.client, "systemSharedMemoryStatus", { name: "" })).regions).sort();

    it("registers regions, reports them (all, or one by name) and unregisters one or all", async () => {
      const file = segment(64);
      await register("a", file.key, 0, 64);
      await register("b", file.key, 8, 32);
      assert.deepEqual(await statusNames(), ["a", "b"]);
      assert.deepEqual((await call(server.client, "systemSharedMemoryStatus", { name: "b" })).regions, {
        b: { name: "b", key: file.key, offset: 8n, byteSize: 32n },
      });
      await call(server.client, "systemSharedMemoryUnregister", { name: "a" });
      await call(server.client, "systemSharedMemoryUnregister", { name: "never-registered" });
      assert.deepEqual(await statusNames(), ["b"]);
      await call(server.client, "systemSharedMemoryUnregister", { name: "" });
      assert.deepEqual(await statusNames(), []);
      // Registered with the ServerMetadata extensions.
      const metadata = await call(server.client, "serverMetadata", {});
      assert.ok(metadata.extensions.includes("system_shared_memory"));
    });

    it("answers every register and status error with Triton's code and text", async () => {
      const file = segment(64);
      await register("taken", file.key, 0, 8);
      const missing = shmName();
      const link = shmName();
      segments.push(link);
      symlinkSync("/etc/passwd", link.path);
      const cases: [Promise<{ code: number; details: string }>, number, string][] = [
        [
          registerError("r", "///", 0, 8),
          status.INVALID_ARGUMENT,
          "cannot register shared memory region 'r' - invalid shm key '///'",
        ],
        [
          registerError("r", "/../../etc/passwd", 0, 8),
          status.INVALID_ARGUMENT,
          "cannot register shared memory region 'r' - invalid shm key '/../../etc/passwd'",
        ],
        [
          registerError("r", "/triton_python_backend_shm_region_7", 0, 8),
          status.INVALID_ARGUMENT,
          "cannot register shared memory region 'r' with key '/triton_python_backend_shm_region_7' as the key contains the reserved prefix 'triton_python_backend_shm_region_'",
        ],
        [
          registerError("taken", file.key, 0, 8),
          status.ALREADY_EXISTS,
          "shared memory region 'taken' already in manager",
        ],
        [
          registerError("r", missing.key, 0, 8),
          status.INTERNAL,
          `Unable to open shared memory region: '${missing.key}'`,
        ],
        [registerError("r", link.key, 0, 8), status.INTERNAL, `Unable to open shared memory region: '${link.key}'`],
        [
          registerError("r", file.key, 60, 8),
          status.INVALID_ARGUMENT,
          "failed to register shared memory region 'r': invalid args",
        ],
        [
          registerError("r", file.key, 0, Number.MAX_SAFE_INTEGER),
          status.INVALID_ARGUMENT,
          "failed to register shared memory region 'r': invalid args",
        ],
        [
          callError(server.client, "systemSharedMemoryStatus", { name: "nope" }),
          status.NOT_FOUND,
          "Unable to find system shared memory region: 'nope'",
        ],
      ];
      for (const [failed, code, details] of cases) {
        const error = await failed;
        assert.deepEqual([error.code, error.details], [code, details]);
      }
      const huge = await callError(server.client, "systemSharedMemoryRegister", {
        name: "r",
        key: file.key,
        offset: 2n ** 63n,
        byteSize: 2n ** 63n,
      });
      assert.deepEqual(
        [huge.code, huge.details],
        [status.INVALID_ARGUMENT, "failed to register shared memory region 'r': invalid args"],
      );
      assert.deepEqual(await statusNames(), ["taken"]);
    });

    it(`holds ${MAX_SHM_REGIONS} regions, refuses one more (RESOURCE_EXHAUSTED), and frees them all on unregister`, async () => {
      const file = segment(8);
      const started = Date.now();
      for (let i = 0; i < MAX_SHM_REGIONS; i++) await register(`r${i}`, file.key, 0, 8);
      const error = await registerError("one-more", file.key, 0, 8);
      assert.equal(error.code, status.RESOURCE_EXHAUSTED);
      assert.match(error.details, /1024 regions are registered/);
      console.log(`    (${MAX_SHM_REGIONS} registers took ${Date.now() - started} ms)`);
      await call(server.client, "systemSharedMemoryUnregister", { name: "" });
      await register("one-more", file.key, 0, 8);
    });

    it("answers CUDA shared memory as Triton built without GPUs: register refused, status and unregister served", async () => {
      const file = segment(8);
      await register("system", file.key, 0, 8);
      const refused = await callError(server.client, "cudaSharedMemoryRegister", {
        name: "gpu",
        rawHandle: new Uint8Array(64),
        deviceId: 0n,
        byteSize: 8n,
      });
      assert.deepEqual(
        [refused.code, refused.details],
        [status.INVALID_ARGUMENT, "failed to register CUDA shared memory region: 'gpu', GPUs not supported"],
      );
      assert.deepEqual((await call(server.client, "cudaSharedMemoryStatus", { name: "" })).regions, {});
      const system = await callError(server.client, "cudaSharedMemoryStatus", { name: "system" });
      assert.deepEqual(
        [system.code, system.details],
        [status.NOT_FOUND, "The region named 'system' is registered as system shared memory, not CUDA shared memory"],
      );
      const unknown = await callError(server.client, "cudaSharedMemoryStatus", { name: "gpu" });
      assert.deepEqual(
        [unknown.code, unknown.details],
        [status.NOT_FOUND, "Unable to find cuda shared memory region: 'gpu'"],
      );
      await call(server.client, "cudaSharedMemoryUnregister", { name: "" });
      await call(server.client, "cudaSharedMemoryUnregister", { name: "system" });
      assert.deepEqual(await statusNames(), ["system"], "a CUDA unregister leaves system regions alone");
    });

    it("runs the identity engine with its input and output in regions: the reply names the output and carries no bytes", async () => {
      const values = [1.5, -2, 3.25, 1e6];
      const inFile = segment(Buffer.concat([Buffer.alloc(16), fp32(...values)]));
      const outFile = segment(64);
      await register("in", inFile.key, 16, 16);
      await register("out", outFile.key, 32, 32);
      const response = await infer(
        server.client,
        inferRequest({
          modelName: "identity_fp32",
          inputs: [input("INPUT0", "FP32", [1, 4], inRegion("in", 16))],
          outputs: [{ name: "OUTPUT0", parameters: inRegion("out", 16, 8) }],
        }),
      );
      const { tensor, raw } = output(response, "OUTPUT0");
      assert.deepEqual([tensor.datatype, tensor.shape], ["FP32", [1n, 4n]]);
      assert.equal(response.rawOutputContents.length, 1);
      assert.equal(raw?.byteLength ?? 0, 0, "an output in a region has an empty raw_output_contents entry");
      assert.deepEqual(tensor.parameters, {});
      assert.deepEqual(floats(readFileSync(outFile.path).subarray(40, 56)), values);
      // The same input by the wire and the output over it too: the same values.
      const wire = await infer(
        server.client,
        inferRequest({
          modelName: "identity_fp32",
          inputs: [input("INPUT0", "FP32", [1, 4], inRegion("in", 16))],
        }),
      );
      assert.deepEqual(floats(output(wire, "OUTPUT0").raw!), values);
    });

    it("carries BYTES in regions, framed, both ways", async () => {
      const elements = [Buffer.from("héllo"), Buffer.alloc(0), Buffer.from("shared")];
      const framed = Buffer.from(joinBytesElements(elements));
      const inFile = segment(framed);
      const outFile = segment(64);
      await register("in", inFile.key, 0, framed.length);
      await register("out", outFile.key, 0, 64);
      const response = await infer(
        server.client,
        inferRequest({
          modelName: "identity_bytes",
          inputs: [input("INPUT0", "BYTES", [1, 3], inRegion("in", framed.length))],
          outputs: [{ name: "OUTPUT0", parameters: inRegion("out", 64) }],
        }),
      );
      assert.deepEqual(output(response, "OUTPUT0").tensor.shape, [1n, 3n]);
      const written = readFileSync(outFile.path).subarray(0, framed.length);
      assert.deepEqual(splitBytesElements(written).map(Buffer.from), elements);
    });

    it("runs a python model with one input from a region and one over the wire (Triton's raw index), one output into a region", async () => {
      const inFile = segment(Buffer.concat([fp32(9, 9, 9, 9), fp32(1, 2, 3, 4)]));
      const outFile = segment(16);
      await register("in", inFile.key, 0, 32);
      await register("out", outFile.key, 0, 16);
      const response = await infer(server.client, addSubRequest("add_sub", "in", 16, fp32(10, 20, 30, 40), "out"));
      assert.deepEqual(floats(readFileSync(outFile.path)), [11, 22, 33, 44]);
      assert.equal(output(response, "OUTPUT0").raw?.byteLength ?? 0, 0);
      assert.deepEqual(floats(output(response, "OUTPUT1").raw!), [-9, -18, -27, -36]);
    });

    it("writes each response of a decoupled model into the same place (a stream)", async () => {
      const inFile = segment(Buffer.from(Int32Array.of(5, 6, 7).buffer));
      const outFile = segment(4);
      await register("in", inFile.key, 0, 12);
      await register("out", outFile.key, 0, 4);
      const replies = await streamAll(server.client, [
        inferRequest({
          modelName: "repeat_int32",
          inputs: [input("IN", "INT32", [3], inRegion("in", 12))],
          outputs: [{ name: "OUT", parameters: inRegion("out", 4) }],
        }),
      ]);
      const answered = replies.filter((reply) => reply.inferResponse?.outputs.length);
      assert.equal(answered.length, 3);
      for (const reply of answered) assert.equal(reply.errorMessage, "");
      assert.deepEqual(
        [...new Int32Array(Uint8Array.from(readFileSync(outFile.path)).buffer)],
        [7],
        "the last response's",
      );
    });

    it("answers every tensor error with Triton's code and text", async () => {
      const file = segment(64);
      await register("r", file.key, 0, 32);
      const identity = (
        parameters: Record<string, InferParameter>,
        outputParameters?: Record<string, InferParameter>,
      ) =>
        callError(
          server.client,
          "modelInfer",
          inferRequest({
            modelName: "identity_fp32",
            inputs: [input("INPUT0", "FP32", [1, 4], parameters)],
            outputs: outputParameters === undefined ? [] : [{ name: "OUTPUT0", parameters: outputParameters }],
            rawInputContents: "shared_memory_region" in parameters ? [] : [fp32(1, 2, 3, 4)],
          }),
        );
      const cases: [Promise<{ code: number; details: string }>, number, string][] = [
        [
          identity({ shared_memory_region: int64(1), shared_memory_byte_size: int64(16) }),
          status.INVALID_ARGUMENT,
          "invalid value type for 'shared_memory_region' parameter for tensor 'INPUT0', expected string_param.",
        ],
        [
          identity({ shared_memory_region: string("r"), shared_memory_byte_size: string("16") }),
          status.INVALID_ARGUMENT,
          "invalid value type for 'shared_memory_byte_size' parameter for tensor 'INPUT0', expected int64_param.",
        ],
        [
          identity({ ...inRegion("r", 16), shared_memory_offset: string("0") }),
          status.INVALID_ARGUMENT,
          "invalid value type for 'shared_memory_offset' parameter for tensor 'INPUT0', expected int64_param.",
        ],
        [
          identity({ shared_memory_offset: int64(0) }),
          status.INVALID_ARGUMENT,
          "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor 'INPUT0'",
        ],
        [
          identity({ shared_memory_byte_size: int64(16) }),
          status.INVALID_ARGUMENT,
          "'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter for tensor 'INPUT0'",
        ],
        [
          identity({ shared_memory_region: string("r") }),
          status.INVALID_ARGUMENT,
          "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor 'INPUT0'",
        ],
        [identity(inRegion("nope", 16)), status.NOT_FOUND, "Unable to find shared memory region: 'nope'"],
        [identity(inRegion("r", 16, 32)), status.INVALID_ARGUMENT, "Invalid offset for shared memory region: 'r'"],
        [
          identity(inRegion("r", 16, 24)),
          status.INVALID_ARGUMENT,
          "Invalid offset + byte size for shared memory region: 'r'",
        ],
        [
          identity({}, inRegion("r", 8)),
          status.INTERNAL,
          "shared memory size specified with the request for output 'OUTPUT0' (8 bytes) should be at least 16 bytes to hold the results",
        ],
        [
          identity(inRegion("r", 12)),
          status.INVALID_ARGUMENT,
          "tensor 'INPUT0': raw data is 12 bytes, but shape [1,4] of FP32 needs 16",
        ],
      ];
      for (const [failed, code, details] of cases) {
        const error = await failed;
        assert.deepEqual([error.code, error.details], [code, details]);
      }
      const withContents = await callError(
        server.client,
        "modelInfer",
        inferRequest({
          modelName: "identity_fp32",
          inputs: [
            {
              ...input("INPUT0", "FP32", [1, 1], inRegion("r", 4)),
              contents: {
                boolContents: [],
                intContents: [],
                int64Contents: [],
                uintContents: [],
                uint64Contents: [],
                fp32Contents: [1],
                fp64Contents: [],
                bytesContents: [],
              },
            },
          ],
        }),
      );
      assert.deepEqual(
        [withContents.code, withContents.details],
        [
          status.INVALID_ARGUMENT,
          "unexpected 'content' provided when using shared memory for input tensor 'INPUT0' for model 'identity_fp32'",
        ],
      );
      // Failed requests gave their leases back: the region unregisters at once.
      await call(server.client, "systemSharedMemoryUnregister", { name: "r" });
      assert.deepEqual(await statusNames(), []);
    });

    it("bounds a request's region bytes by --max-message-size", async () => {
      const size = MAX_MESSAGE_SIZE + 4;
      const file = segment(size);
      await register("big", file.key, 0, size);
      const error = await callError(
        server.client,
        "modelInfer",
        inferRequest({
          modelName: "identity_fp32",
          inputs: [input("INPUT0", "FP32", [1, size / 4], inRegion("big", size))],
        }),
      );
      assert.equal(error.code, status.INVALID_ARGUMENT);
      assert.match(error.details, /--max-message-size/);
    });

    it("fails a request whose client shrank its segment (INTERNAL), and serves the next once it is whole again", async () => {
      const file = segment(16);
      await register("r", file.key, 0, 16);
      truncateSync(file.path, 4);
      const request = inferRequest({
        modelName: "identity_fp32",
        inputs: [input("INPUT0", "FP32", [1, 4], inRegion("r", 16))],
      });
      const error = await callError(server.client, "modelInfer", request);
      assert.deepEqual(
        [error.code, error.details],
        [status.INTERNAL, "shared memory region 'r' is shorter than registered"],
      );
      writeFileSync(file.path, fp32(1, 2, 3, 4));
      assert.deepEqual(floats(output(await infer(server.client, request), "OUTPUT0").raw!), [1, 2, 3, 4]);
    });

    it("keeps a region unregistered during a request until the request ends: listed meanwhile, its name still taken", async () => {
      const inFile = segment(fp32(2));
      const outFile = segment(1);
      await register("seconds", inFile.key, 0, 4);
      await register("cancelled", outFile.key, 0, 1);
      const running = infer(
        server.client,
        inferRequest({
          modelName: "slow_cancellable",
          inputs: [input("SECONDS", "FP32", [1], inRegion("seconds", 4))],
          outputs: [{ name: "CANCELLED", parameters: inRegion("cancelled", 1) }],
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      await call(server.client, "systemSharedMemoryUnregister", { name: "" });
      assert.deepEqual(await statusNames(), ["cancelled", "seconds"], "both are still leased");
      const taken = await registerError("seconds", inFile.key, 0, 4);
      assert.equal(taken.code, status.ALREADY_EXISTS);
      writeFileSync(outFile.path, Uint8Array.of(9));
      await running;
      assert.deepEqual([...readFileSync(outFile.path)], [0], "the output was written into the unregistered region");
      assert.deepEqual(await statusNames(), []);
    });

    it("writes nothing into a region once the request's deadline has passed (the client was told it failed)", async () => {
      const inFile = segment(fp32(1));
      const outFile = segment(Uint8Array.of(9));
      await register("seconds", inFile.key, 0, 4);
      await register("cancelled", outFile.key, 0, 1);
      // slow_cancellable answers CANCELLED = [true] once it sees the cancel: after the deadline.
      const error = await new Promise<ServiceError | null>((resolve) =>
        server.client.modelInfer(
          inferRequest({
            modelName: "slow_cancellable",
            inputs: [input("SECONDS", "FP32", [1], inRegion("seconds", 4))],
            outputs: [{ name: "CANCELLED", parameters: inRegion("cancelled", 1) }],
          }),
          new Metadata(),
          { deadline: Date.now() + 300 },
          (failure) => resolve(failure),
        ),
      );
      assert.equal(error?.code, status.DEADLINE_EXCEEDED);
      // Unregistered, the regions go when the request has ended (its response made or not).
      await call(server.client, "systemSharedMemoryUnregister", { name: "" });
      await eventually(async () => assert.deepEqual(await statusNames(), []));
      assert.deepEqual([...readFileSync(outFile.path)], [9], "the late response was not written into the region");
    });
  });

  describe("a forwarded model (the Triton peer)", () => {
    let triton: Peer | undefined;
    let server: ServerProcess;
    let repository: TestRepository;
    before(async function () {
      requireTritonServer(this);
      triton = await startTritonServer([PYTHON_MODELS]);
      repository = new TestRepository({
        // Declares no tensors: without shared memory its requests pass through as bytes.
        add_sub_upstream: `
name: "add_sub_upstream"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${triton.address}" } }
parameters { key: "upstream_model" value { string_value: "add_sub" } }
`,
      });
      server = await startServer(["--model-repository", repository.dir, "--allow-client-shm"]);
    });
    after(async () => {
      await server?.stop();
      repository?.remove();
      await triton?.kill();
    });

    it("reads the regions here and sends their bytes upstream; writes the upstream's output into its region", async () => {
      const inFile = segment(fp32(1, 2, 3, 4));
      const outFile = segment(16);
      for (const [name, key, size] of [
        ["in", inFile.key, 16],
        ["out", outFile.key, 16],
      ] as const) {
        await call(server.client, "systemSharedMemoryRegister", { name, key, offset: 0n, byteSize: BigInt(size) });
      }
      try {
        const response = await infer(
          server.client,
          addSubRequest("add_sub_upstream", "in", 0, fp32(1, 1, 1, 1), "out"),
        );
        assert.deepEqual(floats(readFileSync(outFile.path)), [2, 3, 4, 5]);
        assert.deepEqual(floats(output(response, "OUTPUT1").raw!), [0, 1, 2, 3]);
        assert.equal(output(response, "OUTPUT0").raw?.byteLength ?? 0, 0);
      } finally {
        await call(server.client, "systemSharedMemoryUnregister", { name: "" });
      }
    });
  });

  describe("off by default, and refused with --grpc-workers 2", () => {
    it("refuses register and unregister (UNIMPLEMENTED, Triton's text); a request naming a region finds none", async () => {
      const server = await startServer([]);
      try {
        const file = segment(16);
        for (const error of [
          await callError(server.client, "systemSharedMemoryRegister", {
            name: "r",
            key: file.key,
            offset: 0n,
            byteSize: 16n,
          }),
          await callError(server.client, "systemSharedMemoryUnregister", { name: "" }),
          await callError(server.client, "cudaSharedMemoryUnregister", { name: "" }),
          // As Triton's GPU build and its HTTP route: the option is checked before anything else.
          await callError(server.client, "cudaSharedMemoryRegister", {
            name: "r",
            rawHandle: new Uint8Array(),
            deviceId: 0n,
            byteSize: 16n,
          }),
        ]) {
          assert.deepEqual([error.code, error.details], [status.UNIMPLEMENTED, DISABLED]);
        }
        assert.deepEqual((await call(server.client, "systemSharedMemoryStatus", { name: "" })).regions, {});
        const error = await callError(
          server.client,
          "modelInfer",
          inferRequest({ modelName: "identity_fp32", inputs: [input("INPUT0", "FP32", [1, 4], inRegion("r", 16))] }),
        );
        assert.deepEqual([error.code, error.details], [status.NOT_FOUND, "Unable to find shared memory region: 'r'"]);
      } finally {
        await server.stop();
      }
    });

    it("refuses registers with --grpc-workers 2, saying why", async () => {
      const server = await startServer(["--grpc-workers", "2", "--allow-client-shm=true"]);
      try {
        const file = segment(16);
        const error = await callError(server.client, "systemSharedMemoryRegister", {
          name: "r",
          key: file.key,
          offset: 0n,
          byteSize: 16n,
        });
        assert.equal(error.code, status.UNIMPLEMENTED);
        assert.match(error.details, /system shared memory needs --grpc-workers 1/);
      } finally {
        await server.stop();
      }
    });
  });
});

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, truncateSync } from "node:fs";
import type { InferParameter, ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { DataPlaneError, type ErrorKind } from "../../../lib/errors.js";
import { MAX_SHM_REGION_NAME_BYTES, MAX_SHM_REGIONS } from "../../src/limits.js";
import { shmKeyPath } from "../../src/shared-memory/keys.js";
import {
  CLIENT_SHM_DISABLED,
  CLIENT_SHM_NEEDS_ONE_WORKER,
  SystemSharedMemoryRegistry,
  type SharedMemoryOptions,
} from "../../src/shared-memory/regions.js";
import { resolveSharedMemory, usesSharedMemory, writeOutputs } from "../../src/shared-memory/tensors.js";
import { joinBytesElements, splitBytesElements } from "../../src/tensors/bytes.js";
import { decodeInputs } from "../../src/tensors/request.js";
import { emptyContents } from "../../src/tensors/typed.js";
import {
  assertNoSegmentsLeft,
  openFdCount,
  removeSegment,
  shmName,
  shmSegment,
  inRegion,
  int64Parameter as int64,
  stringParameter as string,
  tensorInput as input,
  type ShmSegment,
} from "../fixtures/shm-segments.js";

const ENABLED: SharedMemoryOptions = { allowClientShm: true, grpcWorkers: 1 };
const LIMITS = { maxMessageSize: 64 * 1024 * 1024 };

const fails = (kind: ErrorKind, message: string | RegExp) => (error: unknown) => {
  assert.ok(error instanceof DataPlaneError, `not a DataPlaneError: ${String(error)}`);
  assert.equal(error.kind, kind);
  if (typeof message === "string") assert.equal(error.message, message);
  else assert.match(error.message, message);
  return true;
};

const request = (fields: Partial<ModelInferRequest>): ModelInferRequest => ({
  modelName: "m",
  modelVersion: "",
  id: "",
  parameters: {},
  inputs: [],
  outputs: [],
  rawInputContents: [],
  ...fields,
});
const fp32 = (...values: number[]): Buffer => Buffer.from(Float32Array.from(values).buffer);
const fp32Values = (data: Uint8Array): number[] =>
  Array.from(new Float32Array(data.buffer, data.byteOffset, data.byteLength / 4));

describe("system shared memory (dataplane/src/shared-memory)", () => {
  const segments: ShmSegment[] = [];
  const regions: SystemSharedMemoryRegistry[] = [];
  const segment = (contents: Uint8Array | number): ShmSegment => {
    const made = shmSegment(contents);
    segments.push(made);
    return made;
  };
  const registry = (options: SharedMemoryOptions = ENABLED): SystemSharedMemoryRegistry => {
    const made = new SystemSharedMemoryRegistry(options);
    regions.push(made);
    return made;
  };
  afterEach(() => {
    for (const made of regions.splice(0)) made.close();
    for (const made of segments.splice(0)) removeSegment(made);
  });
  after(assertNoSegmentsLeft);

  describe("keys", () => {
    it("takes one POSIX shared-memory name after any leading slashes, as shm_open does", () => {
      assert.equal(shmKeyPath("r", "/input_simple"), "/dev/shm/input_simple");
      assert.equal(shmKeyPath("r", "//x"), "/dev/shm/x");
      assert.equal(shmKeyPath("r", "plain"), "/dev/shm/plain");
    });

    it("refuses a key of slashes only, a path, '.', '..', a NUL and a name longer than 255 bytes (Triton's text)", () => {
      for (const key of ["", "/", "///", "/a/b", "/../etc/passwd", "/..", "/.", "/a\0b", `/${"k".repeat(256)}`]) {
        assert.throws(
          () => shmKeyPath("r", key),
          fails("InvalidArgument", `cannot register shared memory region 'r' - invalid shm key '${key}'`),
          key,
        );
      }
      assert.equal(shmKeyPath("r", `/${"k".repeat(255)}`), `/dev/shm/${"k".repeat(255)}`);
    });

    it("refuses the Python backends' reserved prefixes, after any slashes", () => {
      for (const [key, prefix] of [
        ["/triton_python_backend_shm_region_1", "triton_python_backend_shm_region_"],
        ["triton_python_backend_shm_region_x", "triton_python_backend_shm_region_"],
        ["//dynamo-kserve-python-123", "dynamo-kserve-python-"],
      ] as const) {
        assert.throws(
          () => shmKeyPath("r", key),
          fails(
            "InvalidArgument",
            `cannot register shared memory region 'r' with key '${key}' as the key contains the reserved prefix '${prefix}'`,
          ),
        );
      }
    });
  });

  describe("regions", () => {
    it("registers, reports and unregisters one region or all; an unknown name unregisters as a success", () => {
      const file = segment(64);
      const shm = registry();
      shm.register("a", file.key, 0, 64);
      shm.register("b", file.key, 16, 32);
      assert.deepEqual(shm.status("b"), [{ name: "b", key: file.key, offset: 16, byteSize: 32 }]);
      assert.deepEqual(
        shm.status().map((region) => region.name),
        ["a", "b"],
      );
      assert.throws(() => shm.status("c"), fails("NotFound", "Unable to find system shared memory region: 'c'"));
      shm.unregister("nope");
      shm.unregister("a");
      assert.deepEqual(
        shm.status().map((region) => region.name),
        ["b"],
      );
      shm.unregister("");
      assert.deepEqual(shm.status(), []);
    });

    it("refuses a name taken, a missing key, and a region past its file's end (Triton's texts and kinds)", () => {
      const file = segment(64);
      const shm = registry();
      shm.register("a", file.key, 0, 64);
      assert.throws(
        () => shm.register("a", file.key, 0, 8),
        fails("AlreadyExists", "shared memory region 'a' already in manager"),
      );
      const missing = shmName();
      assert.throws(
        () => shm.register("b", missing.key, 0, 8),
        fails("Internal", `Unable to open shared memory region: '${missing.key}'`),
      );
      for (const [offset, size] of [
        [0, 65],
        [60, 8],
        [Number.POSITIVE_INFINITY, 1],
      ] as const) {
        assert.throws(
          () => shm.register("c", file.key, offset, size),
          fails("InvalidArgument", "failed to register shared memory region 'c': invalid args"),
        );
      }
    });

    it("never follows a symbolic link (to /etc/passwd), and opens only regular files (not a FIFO, not a folder)", () => {
      const shm = registry();
      const link = shmName();
      const ownLink = shmName();
      const fifo = shmName();
      const folder = shmName();
      segments.push(link, ownLink, fifo, folder);
      symlinkSync("/etc/passwd", link.path);
      // A link to a file this process may open for writing: only O_NOFOLLOW refuses it.
      symlinkSync(segment(8).path, ownLink.path);
      execFileSync("mkfifo", [fifo.path]);
      mkdirSync(folder.path);
      const before = openFdCount();
      for (const { key } of [link, ownLink, fifo, folder]) {
        assert.throws(
          () => shm.register("r", key, 0, 1),
          fails("Internal", `Unable to open shared memory region: '${key}'`),
        );
      }
      assert.equal(openFdCount(), before, "a refused file's descriptor is closed");
      assert.deepEqual(shm.status(), []);
    });

    it("refuses register and unregister (not status) when client shared memory is off, or with --grpc-workers > 1", () => {
      const file = segment(8);
      for (const [options, message] of [
        [{ allowClientShm: false, grpcWorkers: 1 }, CLIENT_SHM_DISABLED],
        [{ allowClientShm: true, grpcWorkers: 2 }, CLIENT_SHM_NEEDS_ONE_WORKER],
      ] as const) {
        const shm = registry(options);
        assert.throws(() => shm.register("r", file.key, 0, 8), fails("Unimplemented", message));
        assert.throws(() => shm.unregister(), fails("Unimplemented", message));
        assert.deepEqual(shm.status(), []);
      }
      assert.equal(
        CLIENT_SHM_DISABLED,
        "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.",
      );
    });

    it(`holds at most ${MAX_SHM_REGIONS} regions (RESOURCE_EXHAUSTED past it), each one file descriptor, all closed by close()`, () => {
      const file = segment(8);
      const start = openFdCount();
      const shm = registry();
      for (let i = 0; i < MAX_SHM_REGIONS; i++) shm.register(`r${i}`, file.key, 0, 8);
      assert.equal(openFdCount(), start + MAX_SHM_REGIONS);
      assert.throws(() => shm.register("one-more", file.key, 0, 8), fails("ResourceExhausted", /1024 regions/));
      shm.unregister("r0");
      shm.register("one-more", file.key, 0, 8);
      shm.close();
      assert.equal(openFdCount(), start, "every region's descriptor is closed");
    });

    it(`refuses a region name longer than ${MAX_SHM_REGION_NAME_BYTES} bytes: ${MAX_SHM_REGIONS} regions must not hold gigabytes of names`, () => {
      const file = segment(8);
      const shm = registry();
      const longest = "n".repeat(MAX_SHM_REGION_NAME_BYTES);
      shm.register(longest, file.key, 0, 8);
      assert.throws(
        () => shm.register(`${longest}é`, file.key, 0, 8),
        fails(
          "InvalidArgument",
          `cannot register a shared memory region named by ${MAX_SHM_REGION_NAME_BYTES + 2} bytes: a name may take at most ${MAX_SHM_REGION_NAME_BYTES} (UTF-8)`,
        ),
      );
      assert.deepEqual(
        shm.status().map((region) => region.name),
        [longest],
      );
    });

    it("leases parts within a region, with Triton's errors for an unknown region and out-of-bounds parts", async () => {
      const file = segment(Buffer.from("0123456789abcdef"));
      const shm = registry();
      shm.register("r", file.key, 4, 8);
      const lease = shm.lease("r", 2, 4);
      assert.equal((await lease.read()).toString(), "6789");
      lease.release();
      assert.throws(() => shm.lease("x", 0, 1), fails("NotFound", "Unable to find shared memory region: 'x'"));
      assert.throws(
        () => shm.lease("r", 8, 0),
        fails("InvalidArgument", "Invalid offset for shared memory region: 'r'"),
      );
      assert.throws(
        () => shm.lease("r", 4, 5),
        fails("InvalidArgument", "Invalid offset + byte size for shared memory region: 'r'"),
      );
    });

    it("unregisters a leased region when its last lease ends: until then it is listed, usable, and its name taken", async () => {
      const file = segment(Buffer.from("abcdefgh"));
      const start = openFdCount();
      const shm = registry();
      shm.register("r", file.key, 0, 8);
      const first = shm.lease("r", 0, 4);
      const second = shm.lease("r", 4, 4);
      shm.unregister("r");
      assert.deepEqual(
        shm.status().map((region) => region.name),
        ["r"],
      );
      assert.throws(() => shm.register("r", file.key, 0, 8), fails("AlreadyExists", /already in manager/));
      const third = shm.lease("r", 0, 8);
      assert.equal((await third.read()).toString(), "abcdefgh");
      first.release();
      first.release(); // idempotent: counts once
      second.release();
      assert.equal(shm.status().length, 1, "a lease is still out");
      third.release();
      assert.deepEqual(shm.status(), []);
      assert.equal(openFdCount(), start);
      shm.register("r", file.key, 0, 8);
    });

    it("keeps a leased region's file open past close() (the drain) until the lease ends", async () => {
      const file = segment(8);
      const start = openFdCount();
      const shm = registry();
      shm.register("leased", file.key, 0, 8);
      shm.register("idle", file.key, 0, 8);
      const lease = shm.lease("leased", 0, 8);
      shm.close();
      assert.equal(openFdCount(), start + 1);
      assert.equal((await lease.read()).length, 8);
      lease.release();
      assert.equal(openFdCount(), start);
      assert.throws(() => shm.register("again", file.key, 0, 8), fails("Unavailable", /stopping/));
    });

    it("fails a read from a file the client shrank (INTERNAL; Triton would SIGBUS), and a write larger than the output's part", async () => {
      const file = segment(64);
      const shm = registry();
      shm.register("r", file.key, 0, 64);
      truncateSync(file.path, 10);
      const lease = shm.lease("r", 0, 64);
      await assert.rejects(lease.read(), fails("Internal", "shared memory region 'r' is shorter than registered"));
      const small = shm.lease("r", 0, 4);
      await assert.rejects(
        small.write(new Uint8Array(8), "OUT"),
        fails(
          "Internal",
          "shared memory size specified with the request for output 'OUT' (4 bytes) should be at least 8 bytes to hold the results",
        ),
      );
      lease.release();
      small.release();
    });

    it("bounds the bytes read from regions and held at once (RESOURCE_EXHAUSTED naming the bound); one read alone always goes", async () => {
      // Each request's inputs are a copy (Node cannot map a region): a client with one large
      // region and many small requests would otherwise make the data plane hold gigabytes.
      const file = segment(64);
      const shm = registry({ ...ENABLED, maxReadBytesInFlight: 40 });
      shm.register("r", file.key, 0, 64);
      const first = shm.lease("r", 0, 32);
      await first.read();
      const second = shm.lease("r", 32, 16);
      await assert.rejects(
        second.read(),
        fails(
          "ResourceExhausted",
          "cannot read 16 bytes from shared memory region 'r': requests in flight hold 32 bytes read from shared memory, and 40 bytes (MAX_SHM_READ_BYTES_IN_FLIGHT) is the most this data plane holds at once; retry when they finish",
        ),
      );
      second.release();
      const small = shm.lease("r", 32, 8);
      await small.read();
      small.release();
      first.release();
      // Released, the bytes are free again; a read larger than the bound goes when none is held.
      const whole = shm.lease("r", 0, 64);
      assert.equal((await whole.read()).length, 64);
      whole.release();
      const again = shm.lease("r", 0, 40);
      await again.read();
      again.release();
    });

    it("reads and writes the same on the event loop and on the thread pool (above the threshold)", async () => {
      const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 251));
      for (const syncIoMaxBytes of [1 << 20, 0]) {
        const file = segment(bytes);
        const shm = registry({ ...ENABLED, syncIoMaxBytes });
        shm.register("r", file.key, 0, bytes.length);
        const lease = shm.lease("r", 0, bytes.length);
        assert.deepEqual(await lease.read(), bytes);
        await lease.write(Buffer.alloc(16, 7), "OUT");
        assert.deepEqual(readFileSync(file.path).subarray(0, 17), Buffer.from([...Buffer.alloc(16, 7), 16]));
        lease.release();
      }
    });
  });

  describe("tensors", () => {
    it("reads inputs in regions into raw_input_contents, counting raw entries only for the other inputs (Triton's index)", async () => {
      const file = segment(Buffer.concat([Buffer.alloc(8), fp32(2, 3)]));
      const shm = registry();
      shm.register("in", file.key, 0, 16);
      const received = request({
        inputs: [input("A", "FP32", [1]), input("B", "FP32", [2], inRegion("in", 8, 8)), input("C", "FP32", [1])],
        outputs: [{ name: "OUT", parameters: { keep: string("me") } }],
        rawInputContents: [fp32(1), fp32(4)],
      });
      assert.equal(usesSharedMemory(received), true);
      const resolved = await resolveSharedMemory(received, shm, LIMITS);
      try {
        assert.deepEqual(resolved.request.rawInputContents, [fp32(1), fp32(2, 3), fp32(4)]);
        assert.deepEqual(resolved.request.inputs[1]!.parameters, {}, "the shm parameters are gone");
        assert.deepEqual(resolved.request.outputs[0]!.parameters, { keep: string("me") });
        assert.equal(resolved.outputs.size, 0);
        assert.equal(resolved.request.rawInputContents[0], received.rawInputContents[0], "raw inputs are not copied");
        const { tensors } = decodeInputs(resolved.request, { modelName: "m", inputs: undefined, maxBatchSize: 0 });
        assert.deepEqual(
          tensors.map((tensor) => [tensor.name, fp32Values(tensor.data)]),
          [
            ["A", [1]],
            ["B", [2, 3]],
            ["C", [4]],
          ],
        );
      } finally {
        resolved.release();
      }
    });

    it("makes typed inputs beside inputs in regions raw, and refuses contents with a region or beside raw_input_contents", async () => {
      const file = segment(fp32(5));
      const shm = registry();
      shm.register("in", file.key, 0, 4);
      const typed = { ...input("T", "INT32", [2]), contents: { ...emptyContents(), intContents: [7, -1] } };
      const resolved = await resolveSharedMemory(
        request({ inputs: [input("S", "FP32", [1], inRegion("in", 4)), typed] }),
        shm,
        LIMITS,
      );
      assert.deepEqual(Buffer.from(resolved.request.rawInputContents[1]!), Buffer.from(Int32Array.of(7, -1).buffer));
      assert.equal(resolved.request.inputs[1]!.contents, undefined);
      resolved.release();
      await assert.rejects(
        resolveSharedMemory(request({ inputs: [{ ...typed, parameters: inRegion("in", 4) }] }), shm, LIMITS),
        fails(
          "InvalidArgument",
          "unexpected 'content' provided when using shared memory for input tensor 'T' for model 'm'",
        ),
      );
      await assert.rejects(
        resolveSharedMemory(
          request({ inputs: [input("S", "FP32", [1], inRegion("in", 4)), typed], rawInputContents: [fp32(1)] }),
          shm,
          LIMITS,
        ),
        fails(
          "InvalidArgument",
          "contents field must not be specified when using raw_input_contents for 'T' for model 'm'",
        ),
      );
      await assert.rejects(
        resolveSharedMemory(
          request({ inputs: [input("S", "FP32", [1], inRegion("in", 4)), input("R", "FP32", [1])] }),
          shm,
          LIMITS,
        ),
        fails("InvalidArgument", "unable to find data for input tensor 'R' for model 'm' in request."),
      );
      // Every failure gave its leases back: the region unregisters at once.
      shm.unregister("in");
      assert.deepEqual(shm.status(), []);
    });

    it("answers Triton's parameter errors", async () => {
      const shm = registry();
      const cases: [Record<string, InferParameter>, string][] = [
        [
          { shared_memory_region: int64(1), shared_memory_byte_size: int64(4) },
          "invalid value type for 'shared_memory_region' parameter for tensor 'X', expected string_param.",
        ],
        [
          { shared_memory_offset: int64(0) },
          "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor 'X'",
        ],
        [
          { shared_memory_byte_size: int64(4) },
          "'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter for tensor 'X'",
        ],
        [
          { shared_memory_region: string("r"), shared_memory_byte_size: string("4") },
          "invalid value type for 'shared_memory_byte_size' parameter for tensor 'X', expected int64_param.",
        ],
        [
          { shared_memory_region: string("r"), shared_memory_offset: string("0"), shared_memory_byte_size: int64(4) },
          "invalid value type for 'shared_memory_offset' parameter for tensor 'X', expected int64_param.",
        ],
        [
          { shared_memory_region: string("r") },
          "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor 'X'",
        ],
      ];
      for (const [parameters, message] of cases) {
        await assert.rejects(
          resolveSharedMemory(request({ inputs: [input("X", "FP32", [1], parameters)] }), shm, LIMITS),
          fails("InvalidArgument", message),
        );
        await assert.rejects(
          resolveSharedMemory(request({ outputs: [{ name: "X", parameters }] }), shm, LIMITS),
          fails("InvalidArgument", message),
        );
      }
      await assert.rejects(
        resolveSharedMemory(request({ inputs: [input("X", "FP32", [1], inRegion("none", 4))] }), shm, LIMITS),
        fails("NotFound", "Unable to find shared memory region: 'none'"),
      );
      // A classification is computed from the output, not stored in a region (Triton's gRPC check, before the lookup).
      await assert.rejects(
        resolveSharedMemory(
          request({ outputs: [{ name: "X", parameters: { ...inRegion("none", 4), classification: int64(2) } }] }),
          shm,
          LIMITS,
        ),
        fails("InvalidArgument", "output can't set both 'shared_memory_region' and 'classification'"),
      );
    });

    it("reads negative offsets and sizes as out of bounds, and bounds a request's region bytes by --max-message-size", async () => {
      const file = segment(64);
      const shm = registry();
      shm.register("r", file.key, 0, 64);
      const one = (parameters: Record<string, InferParameter>) =>
        resolveSharedMemory(request({ inputs: [input("X", "UINT8", [4], parameters)] }), shm, LIMITS);
      await assert.rejects(
        one(inRegion("r", 4, -1)),
        fails("InvalidArgument", "Invalid offset for shared memory region: 'r'"),
      );
      await assert.rejects(
        one(inRegion("r", -4)),
        fails("InvalidArgument", "Invalid offset + byte size for shared memory region: 'r'"),
      );
      await assert.rejects(
        resolveSharedMemory(
          request({
            inputs: [input("A", "UINT8", [40], inRegion("r", 40)), input("B", "UINT8", [40], inRegion("r", 40))],
          }),
          shm,
          { maxMessageSize: 64 },
        ),
        fails("InvalidArgument", /more than 64 bytes.*--max-message-size/),
      );
      shm.unregister("r");
      assert.deepEqual(shm.status(), [], "no lease was left out");
    });

    it("carries BYTES framed both ways: read as raw elements, written as the engine made them", async () => {
      const elements = [Buffer.from("héllo"), Buffer.alloc(0), Buffer.from("x")];
      const framed = joinBytesElements(elements);
      const file = segment(64);
      const out = segment(64);
      const shm = registry();
      shm.register("in", file.key, 0, 64);
      shm.register("out", out.key, 0, 64);
      const writing = shm.lease("in", 0, framed.length);
      await writing.write(framed, "S");
      writing.release();
      const resolved = await resolveSharedMemory(
        request({
          inputs: [input("S", "BYTES", [3], inRegion("in", framed.length))],
          outputs: [{ name: "S", parameters: inRegion("out", 64) }],
        }),
        shm,
        LIMITS,
      );
      try {
        const { tensors } = decodeInputs(resolved.request, { modelName: "m", inputs: undefined, maxBatchSize: 0 });
        assert.deepEqual(splitBytesElements(tensors[0]!.data).map(Buffer.from), elements);
        const response = await writeOutputs({ outputs: tensors, parameters: {} }, resolved.outputs);
        assert.equal(response.outputs[0]!.data.byteLength, 0, "the reply carries no bytes for an output in a region");
        assert.deepEqual(response.outputs[0]!.shape, [3]);
        assert.deepEqual(readFileSync(out.path).subarray(0, framed.length), Buffer.from(framed));
      } finally {
        resolved.release();
      }
      // A BYTES input whose framing does not match its shape is refused by the request's checks.
      const wrong = await resolveSharedMemory(
        request({ inputs: [input("S", "BYTES", [2], inRegion("in", framed.length))] }),
        shm,
        LIMITS,
      );
      try {
        assert.throws(
          () => decodeInputs(wrong.request, { modelName: "m", inputs: undefined, maxBatchSize: 0 }),
          fails("InvalidArgument", /needs 2 BYTES elements, raw data holds 3/),
        );
      } finally {
        wrong.release();
      }
    });

    it("leaves a request without shared-memory parameters as it is, and a response without outputs in regions", async () => {
      const shm = registry();
      const plain = request({ inputs: [input("A", "FP32", [1])], rawInputContents: [fp32(1)] });
      assert.equal(usesSharedMemory(plain), false);
      const resolved = await resolveSharedMemory(plain, shm, LIMITS);
      assert.equal(resolved.request, plain);
      const response = { outputs: [] };
      assert.equal(await writeOutputs(response, resolved.outputs), response);
      resolved.release();
    });
  });
});

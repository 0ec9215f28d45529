import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { IDENTITY_ALL_TYPES } from "../fixtures/repository.js";
import { useServer } from "../fixtures/serving.js";
import { assertNoSegmentsLeft, removeSegment, shmSegment, type ShmSegment } from "../fixtures/shm-segments.js";

/**
 * Triton's shared-memory extension on the HTTP front door, as a raw client sees it: the
 * register / unregister / status routes with their JSON bodies, inputs and outputs named by
 * region in an infer body (with JSON and binary inputs beside them), and every refusal with
 * Triton's status and words. The regions' rules themselves (keys, leases, bounds) are the
 * gRPC RPCs' too, tested there.
 */

const fp32 = (...values: number[]): Buffer => Buffer.from(Float32Array.from(values).buffer);

function serverUrl(port: () => number): {
  get: (path: string) => Promise<Response>;
  post: (path: string, body?: unknown, headers?: Record<string, string>) => Promise<Response>;
} {
  const url = (path: string): string => `http://127.0.0.1:${port()}${path}`;
  return {
    get: (path) => fetch(url(path)),
    post: (path, body, headers = {}) =>
      fetch(url(path), {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        ...(body === undefined ? {} : { body: Buffer.isBuffer(body) ? body : JSON.stringify(body) }),
      }),
  };
}

/** Asserts an error reply: its status and that its JSON `error` matches. */
async function assertError(response: Response, status: number, message: RegExp): Promise<void> {
  const text = await response.text();
  assert.equal(response.status, status, text);
  assert.match((JSON.parse(text) as { error: string }).error, message);
}

describe("system shared memory on the HTTP front door", function () {
  this.timeout(30_000);
  const segments: ShmSegment[] = [];
  const shmObject = (contents: Uint8Array): ShmSegment => {
    const made = shmSegment(contents);
    segments.push(made);
    return made;
  };
  afterEach(() => segments.splice(0).forEach(removeSegment));
  after(assertNoSegmentsLeft);

  describe("without --allow-client-shm (the default, as current Triton)", () => {
    const serving = useServer();
    const { get, post } = serverUrl(() => serving.server.httpPort);

    it("refuses register and unregister with 501 and how to enable them; status answers; an infer finds no region", async () => {
      const made = shmObject(Buffer.alloc(64));
      const disabled =
        /^Client shared memory is disabled\. Start the server with '--allow-client-shm=true' to enable\.$/;
      await assertError(
        await post("/v2/systemsharedmemory/region/r/register", { key: made.key, byte_size: 64 }),
        501,
        disabled,
      );
      await assertError(await post("/v2/systemsharedmemory/unregister"), 501, disabled);
      // Before the body is read, as Triton: a body it would refuse still gets the 501.
      await assertError(await post("/v2/systemsharedmemory/region/r/register", { byte_size: "x" }), 501, disabled);
      await assertError(await post("/v2/systemsharedmemory/register"), 501, disabled);
      await assertError(await post("/v2/cudasharedmemory/region/r/register"), 501, disabled);
      await assertError(await post("/v2/cudasharedmemory/region/r/unregister"), 501, disabled);
      const status = await get("/v2/systemsharedmemory/status");
      assert.equal(status.status, 200);
      assert.deepEqual(await status.json(), []);
      await assertError(
        await post("/v2/models/identity_fp32/infer", {
          inputs: [
            {
              name: "INPUT0",
              shape: [1, 4],
              datatype: "FP32",
              parameters: { shared_memory_region: "r", shared_memory_byte_size: 16 },
            },
          ],
        }),
        404,
        /Unable to find shared memory region: 'r'/,
      );
    });
  });

  describe("with --allow-client-shm", () => {
    const serving = useServer({ identity_all: IDENTITY_ALL_TYPES }, ["--allow-client-shm"]);
    const { get, post } = serverUrl(() => serving.server.httpPort);
    afterEach(async () => assert.equal((await post("/v2/systemsharedmemory/unregister")).status, 200));

    it("registers regions from a JSON body, shows them in status (all, or one by name) and unregisters one or all", async () => {
      const made = shmObject(Buffer.alloc(128));
      const registered = await post("/v2/systemsharedmemory/region/first/register", { key: made.key, byte_size: 64 });
      assert.equal(registered.status, 200, await registered.clone().text());
      await post("/v2/systemsharedmemory/region/second/register", { key: made.key, offset: 64, byte_size: 64 });
      const all = (await (await get("/v2/systemsharedmemory/status")).json()) as unknown[];
      assert.deepEqual(
        all.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
        [
          { name: "first", key: made.key, offset: 0, byte_size: 64 },
          { name: "second", key: made.key, offset: 64, byte_size: 64 },
        ],
      );
      assert.deepEqual(await (await get("/v2/systemsharedmemory/region/second/status")).json(), [
        { name: "second", key: made.key, offset: 64, byte_size: 64 },
      ]);
      assert.equal((await post("/v2/systemsharedmemory/region/first/unregister")).status, 200);
      // An unknown name is no error, as Triton.
      assert.equal((await post("/v2/systemsharedmemory/region/never/unregister")).status, 200);
      await assertError(
        await get("/v2/systemsharedmemory/region/first/status"),
        404,
        /Unable to find system shared memory region: 'first'/,
      );
      assert.equal((await post("/v2/systemsharedmemory/unregister")).status, 200);
      assert.deepEqual(await (await get("/v2/systemsharedmemory/status")).json(), []);
    });

    it("refuses bad register requests with Triton's statuses and words, naming the field", async () => {
      const made = shmObject(Buffer.alloc(64));
      const register = (name: string, body?: unknown) => post(`/v2/systemsharedmemory/region/${name}/register`, body);
      await assertError(
        await register("r", { byte_size: 8 }),
        400,
        /Shared memory register request has no 'key' field/,
      );
      await assertError(await register("r"), 400, /has no 'key' field/);
      await assertError(await register("r", { key: made.key }), 400, /has no 'byte_size' field/);
      await assertError(await register("r", { key: 7, byte_size: 8 }), 400, /'key' must be a string/);
      await assertError(
        await register("r", { key: made.key, offset: -1, byte_size: 8 }),
        400,
        /'offset' must be a whole number >= 0/,
      );
      await assertError(
        await register("r", { key: made.key, byte_size: 1.5 }),
        400,
        /'byte_size' must be a whole number >= 0/,
      );
      await assertError(
        await post("/v2/systemsharedmemory/register", { key: made.key, byte_size: 8 }),
        400,
        /'region name' is necessary to register system shared memory region/,
      );
      await assertError(
        await register("r", { key: made.key, offset: 32, byte_size: 64 }),
        400,
        /failed to register shared memory region 'r': invalid args/,
      );
      await assertError(
        await register("r", { key: "///", byte_size: 8 }),
        400,
        /cannot register shared memory region 'r' - invalid shm key '\/\/\/'/,
      );
      await assertError(
        await register("r", { key: "/dk-test-no-such-object", byte_size: 8 }),
        500,
        /Unable to open shared memory region: '\/dk-test-no-such-object'/,
      );
      assert.equal((await register("r", { key: made.key, byte_size: 8 })).status, 200);
      await assertError(
        await register("r", { key: made.key, byte_size: 8 }),
        400,
        /shared memory region 'r' already in manager/,
      );
    });

    it("reads inputs from regions and writes outputs into them; the reply says what each output is, without data", async () => {
      const input = shmObject(Buffer.concat([Buffer.alloc(8, 0xee), fp32(1, 2, 3, 4)]));
      const output = shmObject(Buffer.alloc(32, 0xff));
      await post("/v2/systemsharedmemory/region/in/register", { key: input.key, byte_size: 24 });
      await post("/v2/systemsharedmemory/region/out/register", { key: output.key, byte_size: 32 });
      const response = await post("/v2/models/identity_fp32/infer", {
        inputs: [
          {
            name: "INPUT0",
            shape: [1, 4],
            datatype: "FP32",
            parameters: { shared_memory_region: "in", shared_memory_offset: 8, shared_memory_byte_size: 16 },
          },
        ],
        // binary_data false beside a region is what tritonclient.http sends.
        outputs: [
          {
            name: "OUTPUT0",
            parameters: {
              shared_memory_region: "out",
              shared_memory_offset: 4,
              shared_memory_byte_size: 16,
              binary_data: false,
            },
          },
        ],
        parameters: { binary_data_output: true },
      });
      const text = await response.text();
      assert.equal(response.status, 200, text);
      assert.equal(response.headers.get("inference-header-content-length"), null);
      assert.deepEqual((JSON.parse(text) as { outputs: unknown }).outputs, [
        { name: "OUTPUT0", datatype: "FP32", shape: [1, 4] },
      ]);
      const written = readFileSync(output.path);
      assert.deepEqual(written.subarray(4, 20), fp32(1, 2, 3, 4));
      assert.deepEqual(written.subarray(0, 4), Buffer.alloc(4, 0xff), "nothing written before the offset");
      assert.deepEqual(written.subarray(20), Buffer.alloc(12, 0xff), "nothing written after the output");
    });

    it("indexes the binary part by the inputs not in shared memory (Triton's rule), beside JSON data and outputs sent back", async () => {
      const region = shmObject(Buffer.from(Int32Array.of(7, 8, 9).buffer));
      await post("/v2/systemsharedmemory/region/ints/register", { key: region.key, byte_size: 12 });
      const header = Buffer.from(
        JSON.stringify({
          inputs: [
            { name: "IN_FP32", shape: [2], datatype: "FP32", parameters: { binary_data_size: 8 } },
            {
              name: "IN_INT32",
              shape: [3],
              datatype: "INT32",
              parameters: { shared_memory_region: "ints", shared_memory_byte_size: 12 },
            },
            { name: "IN_INT64", shape: [1], datatype: "INT64", data: [5] },
            { name: "IN_UINT8", shape: [2], datatype: "UINT8", parameters: { binary_data_size: 2 } },
          ],
        }),
      );
      const response = await post(
        "/v2/models/identity_all/infer",
        Buffer.concat([header, fp32(0.5, 1.5), Buffer.from([3, 4])]),
        { "inference-header-content-length": String(header.length), "content-type": "application/octet-stream" },
      );
      const text = await response.text();
      assert.equal(response.status, 200, text);
      const outputs = Object.fromEntries(
        (JSON.parse(text) as { outputs: { name: string; data: number[] }[] }).outputs.map((o) => [o.name, o.data]),
      );
      assert.deepEqual(outputs, { OUT_FP32: [0.5, 1.5], OUT_INT32: [7, 8, 9], OUT_INT64: [5], OUT_UINT8: [3, 4] });
    });

    it("refuses tensors that name regions wrongly with Triton's statuses and words", async () => {
      const made = shmObject(Buffer.alloc(16));
      await post("/v2/systemsharedmemory/region/r/register", { key: made.key, byte_size: 16 });
      const infer = (input: Record<string, unknown>, outputs?: unknown[]) =>
        post("/v2/models/identity_fp32/infer", {
          inputs: [{ name: "INPUT0", shape: [1, 4], datatype: "FP32", ...input }],
          ...(outputs === undefined ? {} : { outputs }),
        });
      const inRegion = (parameters: Record<string, unknown>) => ({
        parameters: { shared_memory_region: "r", shared_memory_byte_size: 16, ...parameters },
      });
      await assertError(
        await infer({ ...inRegion({}), data: [1, 2, 3, 4] }),
        400,
        /inputs\[0\] 'INPUT0': Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'\. But set 'data' 'shared_memory_region'/,
      );
      await assertError(await infer({}), 400, /But no field is set/);
      await assertError(
        await infer(inRegion({ shared_memory_region: 3 })),
        400,
        /'inputs\[0\]\.parameters\.shared_memory_region' must be a string/,
      );
      await assertError(
        await infer(inRegion({ shared_memory_offset: -4 })),
        400,
        /'inputs\[0\]\.parameters\.shared_memory_offset' must be a whole number >= 0/,
      );
      await assertError(
        await infer(inRegion({ shared_memory_region: "nope" })),
        404,
        /Unable to find shared memory region: 'nope'/,
      );
      await assertError(
        await infer(inRegion({ shared_memory_offset: 16 })),
        400,
        /Invalid offset for shared memory region: 'r'/,
      );
      await assertError(
        await infer(inRegion({ shared_memory_byte_size: 32 })),
        400,
        /Invalid offset \+ byte size for shared memory region: 'r'/,
      );
      const data = { data: [1, 2, 3, 4] };
      await assertError(
        await infer(data, [
          {
            name: "OUTPUT0",
            parameters: { shared_memory_region: "r", shared_memory_byte_size: 16, binary_data: true },
          },
        ]),
        400,
        /Output can't set both 'shared_memory_region' and 'binary_data'/,
      );
      await assertError(
        await infer(data, [{ name: "OUTPUT0", parameters: { shared_memory_region: "r", shared_memory_byte_size: 8 } }]),
        500,
        /shared memory size specified with the request for output 'OUTPUT0' \(8 bytes\) should be at least 16 bytes to hold the results/,
      );
      // The server still serves after every refusal.
      assert.equal((await infer(data)).status, 200);
    });

    it("answers the CUDA routes as a server without GPUs does: register refused, status empty, unregister succeeds", async () => {
      await assertError(
        await post("/v2/cudasharedmemory/region/gpu/register", { raw_handle: { b64: "" }, device_id: 0, byte_size: 8 }),
        400,
        /failed to register CUDA shared memory region: 'gpu', GPUs not supported/,
      );
      assert.deepEqual(await (await get("/v2/cudasharedmemory/status")).json(), []);
      await assertError(
        await get("/v2/cudasharedmemory/region/gpu/status"),
        404,
        /Unable to find cuda shared memory region: 'gpu'/,
      );
      assert.equal((await post("/v2/cudasharedmemory/unregister")).status, 200);
      assert.equal((await post("/v2/cudasharedmemory/region/gpu/unregister")).status, 200);
    });

    it("counts the routes in the front door's metrics by their template, never by region name", async () => {
      await post("/v2/systemsharedmemory/region/metered/unregister");
      const samples = await scrape(`http://127.0.0.1:${serving.server.metricsPort}/metrics`);
      const route = { method: "POST", route: "/v2/systemsharedmemory/region/:region/unregister", status: "200" };
      assert.ok(valueOf(samples, "http_server_requests_total", route) >= 1);
      assert.ok(!samples.some((sample) => Object.values(sample.labels).includes("metered")));
    });
  });
});

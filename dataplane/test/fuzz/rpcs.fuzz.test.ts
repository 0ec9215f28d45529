import { status } from "@grpc/grpc-js";
import fc from "fast-check";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { ModelStreamInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { MAX_ERROR_DETAIL_BYTES } from "../../src/limits.js";
import { HealthTestClient } from "../fixtures/health.js";
import { scrape } from "../../../e2e/support/prometheus.js";
import { call, eventually, infer, inferRequest, type ServerProcess } from "../fixtures/server.js";
import { assertNoSegmentsLeft, removeSegment, type ShmSegment } from "../fixtures/shm-segments.js";
import { useServer } from "../fixtures/serving.js";
import { mutateBytes, mutateStructure, mutationPlan, type MutationPlan } from "./mutations.js";
import { RawClient, type RawOutcome } from "./raw-client.js";
import { FUZZED_METHODS, FUZZ_REGIONS, pickMethod, type FuzzedMethod } from "./seeds.js";

/**
 * The fuzz tier: valid requests of every RPC, mutated (fields made huge, negative or
 * overflowing; bit flips, truncation, enormous length prefixes) and sent to a real data
 * plane in batches. Each reply must carry a documented code with a detail a stock client
 * can read; after each batch the server must be alive and answer a correct request
 * correctly. Seeded and reproducible: FUZZ_SEED (default 15) and FUZZ_RUNS (batches,
 * default 600) set the run; `npm run fuzz` runs many more. Twice: with client shared memory
 * off (the default), and on (a quarter of the batches), its regions on this run's segments.
 */

const SEED = Number(process.env["FUZZ_SEED"] ?? 15);
const RUNS = Number(process.env["FUZZ_RUNS"] ?? 600);
const BATCH = 50;
/** Unary calls must answer well within this; streams may legitimately run longer (a long DELAY, many tokens). */
const UNARY_DEADLINE_MS = 10_000;
const STREAM_DEADLINE_MS = 1_000;

/** What any RPC may answer with, besides the cases below. */
const DOCUMENTED = new Set<status>([
  status.OK,
  status.INVALID_ARGUMENT,
  status.NOT_FOUND,
  status.UNAVAILABLE,
  status.UNIMPLEMENTED,
  status.FAILED_PRECONDITION,
  status.RESOURCE_EXHAUSTED,
]);

/**
 * With client shared memory on, what Triton answers INTERNAL: a key that names no segment
 * (register), an output larger than the part of the region a request gave it (infer).
 */
const SHARED_MEMORY_INTERNAL = [
  /^Unable to open shared memory region: /,
  /^shared memory size specified with the request for output .* to hold the results$/,
];

/** Why an outcome breaks the contract, or undefined if it keeps it. */
function violation(method: FuzzedMethod, outcome: RawOutcome, sharedMemory: boolean): string | undefined {
  const streaming = method.definition.responseStream;
  const detailBytes = Buffer.byteLength(outcome.details, "utf8");
  if (detailBytes > MAX_ERROR_DETAIL_BYTES) return `a ${detailBytes}-byte status detail`;
  if (outcome.code === status.INTERNAL) {
    if (sharedMemory && SHARED_MEMORY_INTERNAL.some((pattern) => pattern.test(outcome.details))) return undefined;
    // gRPC's status table: a request the server cannot parse is INTERNAL. Nothing else is.
    return outcome.details === "Error deserializing request" ? undefined : `INTERNAL: ${outcome.details}`;
  }
  // A region's name registered twice (Triton's code).
  if (outcome.code === status.ALREADY_EXISTS && sharedMemory && method.name === "systemSharedMemoryRegister") {
    return undefined;
  }
  if (outcome.code === status.DEADLINE_EXCEEDED && streaming) return undefined;
  if (!DOCUMENTED.has(outcome.code)) return `${status[outcome.code]}: ${outcome.details}`;
  for (const response of outcome.responses) {
    try {
      const decoded = method.definition.responseDeserialize(response);
      if (method.name === "modelStreamInfer") {
        const { errorMessage } = decoded as ModelStreamInferResponse;
        if (Buffer.byteLength(errorMessage, "utf8") > MAX_ERROR_DETAIL_BYTES) return "an unbounded error_message";
      }
    } catch (error) {
      return `a response that does not decode: ${String(error)}`;
    }
  }
  return undefined;
}

/** The message a plan makes of one of its method's seeds. */
function messageOf(method: FuzzedMethod, plan: MutationPlan): Buffer {
  const seed = method.seeds[plan.seed % method.seeds.length]!;
  let encoded: Buffer;
  try {
    encoded = method.definition.requestSerialize(mutateStructure(seed, plan.structural));
  } catch {
    // A value the encoder refuses (e.g. a negative uint64): the seed as it is.
    encoded = method.definition.requestSerialize(seed);
  }
  return mutateBytes(encoded, plan.bytes);
}

const tally = {
  messages: 0,
  calls: 0,
  byCode: new Map<string, number>(),
  byMethod: new Map<string, number>(),
};
const count = (map: Map<string, number>, key: string): void => void map.set(key, (map.get(key) ?? 0) + 1);

async function send(client: RawClient, plan: MutationPlan, sharedMemory: boolean): Promise<void> {
  const method = pickMethod(plan.method);
  const { path, requestStream, responseStream } = method.definition;
  const messages = [
    messageOf(method, plan),
    ...(requestStream ? plan.extra.map((extra) => messageOf(method, extra)) : []),
  ];
  const outcome =
    requestStream || responseStream
      ? await client.stream(path, messages, requestStream, STREAM_DEADLINE_MS)
      : await client.unary(path, messages[0]!, UNARY_DEADLINE_MS);
  tally.messages += messages.length;
  tally.calls++;
  count(tally.byCode, status[outcome.code] ?? String(outcome.code));
  count(tally.byMethod, method.name);
  const problem = violation(method, outcome, sharedMemory);
  if (problem !== undefined) throw new Error(`${method.name}: ${problem} (plan ${JSON.stringify(plan, bigints)})`);
}

const bigints = (_key: string, value: unknown): unknown => (typeof value === "bigint" ? `${value}n` : value);

/** The server is alive and serves: a correct request gets the correct answer, health and /metrics answer. */
async function assertServing(server: ServerProcess, health: HealthTestClient): Promise<void> {
  assert.equal(server.process.exitCode, null, "the data plane exited");
  const values = Float32Array.of(1, 2, 3, 4);
  const reply = await infer(
    server.client,
    inferRequest({
      modelName: "identity_fp32",
      inputs: [{ name: "INPUT0", datatype: "FP32", shape: [1n, 4n], parameters: {}, contents: undefined }],
      rawInputContents: [new Uint8Array(values.buffer)],
    }),
  );
  const raw = reply.rawOutputContents[0]!;
  assert.deepEqual([...new Float32Array(new Uint8Array(raw).buffer)], [...values]);
  assert.equal(await health.check(""), "SERVING");
  // Every call of the batch has ended: none is still counted in flight or left unhandled.
  await eventually(async () => {
    const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
    const total = (name: string, labels: Record<string, string> = {}): number =>
      samples
        .filter((sample) => sample.name === name)
        .filter((sample) => Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
        .reduce((sum, sample) => sum + sample.value, 0);
    assert.equal(total("dynamo_frontend_inflight_requests"), 0, "requests left in flight");
    for (const method of new Set(samples.map((sample) => sample.labels["grpc_method"]).filter(Boolean))) {
      const started = total("grpc_server_started_total", { grpc_method: method! });
      // The scrape itself is not a gRPC call; the correct request above has ended.
      assert.equal(
        total("grpc_server_handled_total", { grpc_method: method! }),
        started,
        `${method}: started ≠ handled`,
      );
    }
  }, 3000);
}

/**
 * Runs the batches against a data plane started with `args`. With client shared memory on,
 * the seeds' regions are registered (again) before each batch, on segments of this run's
 * test prefix, removed after.
 */
function fuzzSuite(title: string, args: readonly string[], runs: number, sharedMemory: boolean): void {
  describe(`fuzz: mutated requests for every RPC, ${title} (seed ${SEED}, ${runs} batches of ${BATCH})`, function () {
    this.timeout(Math.max(120_000, runs * 10_000));
    const serving = useServer({}, args);
    let server: ServerProcess;
    let client: RawClient;
    let health: HealthTestClient;
    const segments: ShmSegment[] = [];
    before(() => {
      ({ server } = serving);
      client = new RawClient(`127.0.0.1:${server.grpcPort}`);
      health = new HealthTestClient(`127.0.0.1:${server.grpcPort}`);
      if (sharedMemory) {
        for (const { key, byteSize } of Object.values(FUZZ_REGIONS)) {
          const path = `/dev/shm${key}`;
          writeFileSync(path, Buffer.from(Float32Array.from({ length: byteSize / 4 }, (_, i) => i).buffer));
          segments.push({ key, path });
        }
      }
    });
    after(() => {
      client?.close();
      health?.close();
      // (The server has stopped by now, its regions' files closed: useServer's hook ran first.)
      for (const segment of segments.splice(0)) removeSegment(segment);
      assertNoSegmentsLeft();
      const codes = [...tally.byCode].sort((a, b) => b[1] - a[1]).map(([code, n]) => `${code} ${n}`);
      console.log(
        `      fuzz: seed ${SEED}: ${tally.messages} messages in ${tally.calls} calls over ${tally.byMethod.size} RPCs; codes: ${codes.join(", ")}`,
      );
      tally.messages = tally.calls = 0;
      tally.byCode.clear();
      tally.byMethod.clear();
    });

    /** The seeds' regions, registered unless a batch left them so (or unregistered them). */
    const registerRegions = async (): Promise<void> => {
      for (const { name, key, byteSize } of Object.values(FUZZ_REGIONS)) {
        const registered = Object.keys((await call(server.client, "systemSharedMemoryStatus", { name: "" })).regions);
        if (!registered.includes(name)) {
          await call(server.client, "systemSharedMemoryRegister", {
            name,
            key,
            offset: 0n,
            byteSize: BigInt(byteSize),
          });
        }
      }
    };

    it("answers only documented codes with readable details, and keeps serving after every batch", async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(mutationPlan, { minLength: BATCH, maxLength: BATCH }), async (plans) => {
          if (sharedMemory) await registerRegions();
          await Promise.all(plans.map((plan) => send(client, plan, sharedMemory)));
          await assertServing(server, health);
        }),
        { seed: SEED, numRuns: runs, endOnFailure: true },
      );
      assert.equal(tally.byMethod.size, FUZZED_METHODS.length, "every RPC was fuzzed");
    });
  });
}

fuzzSuite("client shared memory off (the default)", [], RUNS, false);
// Shared memory's RPCs and tensors with regions to find: a quarter of the batches.
fuzzSuite("with --allow-client-shm", ["--allow-client-shm"], Math.ceil(RUNS / 4), true);

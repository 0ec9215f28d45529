import fc from "fast-check";
import assert from "node:assert/strict";
import { deflateSync, gzipSync } from "node:zlib";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { MAX_ERROR_DETAIL_BYTES } from "../../src/limits.js";
import { IDENTITY_ALL_TYPES } from "../fixtures/repository.js";
import { eventually, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";
import { mutateBytes, mutateStructure, mutationPlan, type MutationPlan } from "./mutations.js";

/**
 * The fuzz tier for the HTTP front door: valid bodies of every POST route (KServe v2 infer
 * with JSON and with binary tensor data, generate, generate_stream, OpenAI completions and
 * chat, streamed or not, repository and log settings), mutated as the gRPC fuzz mutates
 * messages, sent in batches. Each reply must have a documented status and, when it is an
 * error, a bounded message in the route's error shape; after each batch a correct request
 * is served and nothing stays in flight. Seeded: FUZZ_SEED, FUZZ_RUNS (batches; a quarter
 * of the gRPC tier's, HTTP requests being larger).
 */

const SEED = Number(process.env["FUZZ_SEED"] ?? 15);
const RUNS = Math.max(1, Math.floor(Number(process.env["FUZZ_RUNS"] ?? 600) / 4));
const BATCH = 40;
/** A request that runs longer (a mutated max_tokens of a million) is hung up on, as a client would. */
const HANG_UP_MS = 1_000;
const DOCUMENTED = new Set([200, 400, 404, 413, 415, 429, 501, 503]);
const MAX_BODY = 256 * 1024;

interface Seed {
  readonly path: string;
  readonly body: Record<string, unknown>;
  /** Binary tensor data after the JSON header (Inference-Header-Content-Length). */
  readonly binary?: Buffer;
}

const four = Buffer.from(Float32Array.of(1, 2, 3, 4).buffer);
const SEEDS: readonly Seed[] = [
  {
    path: "/v2/models/identity_fp32/infer",
    body: { id: "a", inputs: [{ name: "INPUT0", shape: [1, 4], datatype: "FP32", data: [1, 2, 3, 4] }] },
  },
  {
    path: "/v2/models/identity_all/versions/1/infer",
    body: {
      inputs: [
        { name: "IN_INT64", shape: [2], datatype: "INT64", data: [[1], [2]] },
        { name: "IN_BYTES", shape: [1], datatype: "BYTES", data: ["x"] },
        { name: "IN_BOOL", shape: [1], datatype: "BOOL", data: [true] },
      ],
      outputs: [{ name: "OUT_INT64", parameters: { binary_data: true } }],
    },
  },
  {
    path: "/v2/models/identity_fp32/infer",
    body: {
      inputs: [{ name: "INPUT0", shape: [1, 4], datatype: "FP32", parameters: { binary_data_size: 16 } }],
      parameters: { binary_data_output: true },
    },
    binary: four,
  },
  { path: "/v2/models/mock_llm/generate", body: { text_input: "hi", parameters: { max_tokens: 3 } } },
  { path: "/v2/models/mock_llm/generate_stream", body: { text_input: "hi", parameters: { max_tokens: 3 } } },
  { path: "/v1/completions", body: { model: "mock_llm", prompt: "hi", max_tokens: 3, seed: 1 } },
  {
    path: "/v1/chat/completions",
    body: {
      model: "mock_llm",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    },
  },
  { path: "/v2/repository/index", body: { ready: true } },
  { path: "/v2/repository/models/identity_fp32/load", body: { parameters: { config: "{}" } } },
  { path: "/v2/logging", body: { log_info: true, log_verbose_level: 0 } },
];

/** JSON with bigints written as digits (a mutation may put one anywhere). */
const jsonOf = (value: unknown): string =>
  JSON.stringify(value, (_key, item: unknown) => (typeof item === "bigint" ? `§${item}§` : item)).replace(
    /"§(-?\d+)§"/g,
    "$1",
  );

function requestOf(plan: MutationPlan): { seed: Seed; body: Buffer; headers: Record<string, string> } {
  const seed = SEEDS[plan.seed % SEEDS.length]!;
  const header = Buffer.from(jsonOf(mutateStructure(seed.body, plan.structural)));
  const whole = seed.binary === undefined ? header : Buffer.concat([header, seed.binary]);
  const body = mutateBytes(whole, plan.bytes);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (seed.binary !== undefined) headers["inference-header-content-length"] = String(header.length);
  return { seed, body, headers };
}

const tally = { requests: 0, byStatus: new Map<number, number>() };

async function send(base: string, plan: MutationPlan): Promise<void> {
  const { seed, body, headers } = requestOf(plan);
  const signal = AbortSignal.timeout(HANG_UP_MS);
  let status: number;
  let text: string;
  try {
    const reply = await fetch(`${base}${seed.path}`, { method: "POST", body, headers, signal });
    status = reply.status;
    text = await reply.text();
  } catch (error) {
    if (signal.aborted) return; // hung up on a long answer: the server must stop it (checked below)
    throw new Error(`${seed.path}: ${String(error)}`);
  }
  tally.requests++;
  tally.byStatus.set(status, (tally.byStatus.get(status) ?? 0) + 1);
  const where = `${seed.path} (plan ${jsonOf(plan)})`;
  if (!DOCUMENTED.has(status)) throw new Error(`${where}: HTTP ${status}: ${text.slice(0, 500)}`);
  if (status === 200) return;
  const parsed = JSON.parse(text) as { error: string | { message: string } };
  const message = typeof parsed.error === "string" ? parsed.error : parsed.error.message;
  assert.equal(typeof message, "string", `${where}: no error message: ${text.slice(0, 200)}`);
  assert.ok(Buffer.byteLength(message) <= MAX_ERROR_DETAIL_BYTES, `${where}: a ${message.length}-character message`);
}

/** A correct request is served, and every request of the batch has ended (none in flight). */
async function assertServing(server: ServerProcess, base: string): Promise<void> {
  assert.equal(server.process.exitCode, null, "the data plane exited");
  const reply = await fetch(`${base}${SEEDS[0]!.path}`, { method: "POST", body: JSON.stringify(SEEDS[0]!.body) });
  assert.equal(reply.status, 200);
  assert.deepEqual(((await reply.json()) as { outputs: { data: number[] }[] }).outputs[0]?.data, [1, 2, 3, 4]);
  await eventually(async () => {
    const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
    const inflight = samples
      .filter((sample) => sample.name === "dynamo_frontend_inflight_requests")
      .reduce((sum, sample) => sum + sample.value, 0);
    assert.equal(inflight, 0, "requests left in flight");
    assert.equal(valueOf(samples, "http_server_requests_total", { status: "500" }), 0, "a 500 was answered");
  }, 5000);
}

describe(`fuzz: mutated bodies for every HTTP route (seed ${SEED}, ${RUNS} batches of ${BATCH})`, function () {
  this.timeout(Math.max(120_000, RUNS * 10_000));
  const serving = useServer({ identity_all: IDENTITY_ALL_TYPES }, ["--max-message-size", String(MAX_BODY)]);

  after(() => {
    const statuses = [...tally.byStatus].sort((a, b) => b[1] - a[1]).map(([status, n]) => `${status} ${n}`);
    console.log(
      `      fuzz: seed ${SEED}: ${tally.requests} HTTP requests over ${SEEDS.length} routes; ${statuses.join(", ")}`,
    );
  });

  it("answers only documented statuses with bounded messages, and keeps serving after every batch", async () => {
    const base = `http://127.0.0.1:${serving.server.httpPort}`;
    await fc.assert(
      fc.asyncProperty(fc.array(mutationPlan, { minLength: BATCH, maxLength: BATCH }), async (plans) => {
        await Promise.all(plans.map((plan) => send(base, plan)));
        await assertServing(serving.server, base);
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
    assert.ok((tally.byStatus.get(200) ?? 0) > 0 && (tally.byStatus.get(400) ?? 0) > 0, "both served and refused");
  });
});

/** Compressed JSON bombs: small bodies that inflate to JSON nested deep or arrays wide, below and far above the limit. */
const bombPlan = fc.record({
  path: fc.constantFrom(...new Set(SEEDS.map((seed) => seed.path))),
  encoding: fc.constantFrom("gzip", "deflate"),
  shape: fc.constantFrom("nested", "wide"),
  /** Inflated size, as a share of the body limit. */
  scale: fc.constantFrom(0.25, 0.9, 4, 64),
});
type BombPlan = typeof bombPlan extends fc.Arbitrary<infer T> ? T : never;

function bombOf({ encoding, shape, scale }: BombPlan): { body: Buffer; inflated: number } {
  const size = Math.floor(scale * MAX_BODY);
  const head = '{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"FP32","data":';
  const tail = "}]}";
  const room = Math.max(2, size - head.length - tail.length);
  const depth = Math.floor((room - 1) / 2);
  const payload = shape === "nested" ? `${"[".repeat(depth)}1${"]".repeat(depth)}` : `[0${",0".repeat(depth - 1)}]`;
  const text = Buffer.from(`${head}${payload}${tail}`);
  return { body: encoding === "gzip" ? gzipSync(text) : deflateSync(text), inflated: text.length };
}

describe(`fuzz: compressed JSON bombs on every HTTP route (seed ${SEED})`, function () {
  this.timeout(180_000);
  const serving = useServer({ identity_all: IDENTITY_ALL_TYPES }, ["--max-message-size", String(MAX_BODY)]);

  it("answers 413 past the limit, 400 for deep nesting, a documented status otherwise, and keeps serving", async () => {
    const base = `http://127.0.0.1:${serving.server.httpPort}`;
    await fc.assert(
      fc.asyncProperty(fc.array(bombPlan, { minLength: 8, maxLength: 8 }), async (plans) => {
        await Promise.all(
          plans.map(async (plan) => {
            const { body, inflated } = bombOf(plan);
            const reply = await fetch(`${base}${plan.path}`, {
              method: "POST",
              body,
              headers: { "content-type": "application/json", "content-encoding": plan.encoding },
            });
            const text = await reply.text();
            const where = `${plan.path} (${jsonOf(plan)}, ${body.length} bytes inflating to ${inflated})`;
            // Past the limit: 413 (naming it); nested: 400 (naming the nesting) before any
            // route reads it; a wide array within the limit: whatever the route answers it.
            const expected = inflated > MAX_BODY ? 413 : plan.shape === "nested" ? 400 : undefined;
            if (expected === undefined) assert.ok(DOCUMENTED.has(reply.status), `${where}: ${text.slice(0, 300)}`);
            else assert.equal(reply.status, expected, `${where}: ${text.slice(0, 300)}`);
            if (reply.status === 200) return;
            const parsed = JSON.parse(text) as { error: string | { message: string } };
            const message = typeof parsed.error === "string" ? parsed.error : parsed.error.message;
            if (expected === 413) assert.match(message, new RegExp(`limit of ${MAX_BODY} bytes`), where);
            if (expected === 400) assert.match(message, /nests arrays and objects deeper than/, where);
          }),
        );
        await assertServing(serving.server, base);
      }),
      { seed: SEED, numRuns: Math.max(4, Math.floor(RUNS / 10)), endOnFailure: true },
    );
  });
});

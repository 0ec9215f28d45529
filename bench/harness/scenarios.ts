import type { Payload } from "./requests.js";
import { SERVER_IDS, type ServerId } from "./servers.js";

/** One load shape, driven against each of its servers with the same encoded request. */
export interface Scenario {
  readonly id: string;
  readonly title: string;
  readonly payload: Payload;
  readonly concurrency: number;
  readonly connections: number;
  readonly servers: readonly ServerId[];
  /** What the scenario is about: requests per second, tensor bytes per second, or streamed responses per second. */
  readonly unit: "requests/s" | "bytes/s" | "responses/s";
  /** ModelStreamInfer instead of ModelInfer: this many streams, each request answered with `tokens` responses. */
  readonly streams?: { readonly count: number; readonly tokens: number; readonly model: string };
  /** Over HTTP instead of gRPC: KServe v2 REST infer (JSON or binary tensors), or OpenAI SSE streams. */
  readonly http?: { readonly form: "json" | "binary" } | { readonly form: "openai-sse" };
  /** What the forwarders (FORWARDERS) send to, started before each of them: Triton unless named. */
  readonly upstream?: UpstreamId;
  /** Where its processes run (run.ts `pinning`): "shared" unless named. */
  readonly layout?: Layout;
}

/** The servers a forwarder may be put in front of: Triton, or the bare grpc-js server. */
export type UpstreamId = Extract<ServerId, "triton" | "grpc-js-ceiling">;

/**
 * "shared": the server on core 0 with the upstream it forwards to, the load on the other
 * cores (the main rows: forwarding's cost shows as the upstream's loss). "own-core": a
 * forwarder alone on core 0, its upstream (or the server called directly) and the load on
 * the other cores, as a forwarder in a pod of its own would run.
 */
export type Layout = "shared" | "own-core";

const KIB_FP32: Payload = { kind: "fp32", elements: 256 };
const MIB_FP32: Payload = { kind: "fp32", elements: 256 * 1024 };
const MIB16_FP32: Payload = { kind: "fp32", elements: 4 * 1024 * 1024 };

/**
 * The forwarding scenarios' servers: Triton called directly, through the two proxies that
 * are forwarding's ceilings on Node, and through each kind of forwarding config.
 */
const FORWARDING: readonly ServerId[] = [
  "triton-direct",
  "h2-proxy",
  "grpcjs-proxy",
  "dataplane-forward",
  "dataplane-pass-through",
];
/** The same in front of the bare grpc-js server (the shape of issue 39's table): no Triton, no checked configs. */
const FORWARDING_BARE: readonly ServerId[] = ["upstream-direct", "h2-proxy", "grpcjs-proxy", "dataplane-pass-through"];

/** The Python-backend scenarios' servers: the same model.py in Triton's Python backend and in our python engine. */
const PYTHON_MODEL: readonly ServerId[] = ["triton", "dataplane-python"];

/** Every server that answers ModelInfer itself with its own identity (not the forwarding or python ones). */
const EVERY_UNARY_SERVER: readonly ServerId[] = SERVER_IDS.filter(
  (id) => !FORWARDING.includes(id) && !FORWARDING_BARE.includes(id) && id !== "dataplane-python",
);

/** FP32 element counts the ceilings answer for: every FP32 payload above. */
export const CEILING_SIZES = [KIB_FP32, MIB_FP32, MIB16_FP32].map((payload) => payload.elements);

/** Forwarding against calling the upstream directly, beside the proxies (each also run with the forwarder on its own core). */
const FORWARDING_SCENARIOS: readonly Scenario[] = [
  ...[
    { id: "forward-1KiB-c1", size: "1 KiB", payload: KIB_FP32, concurrency: 1, connections: 1 },
    { id: "forward-1KiB-c64", size: "1 KiB", payload: KIB_FP32, concurrency: 64, connections: 8 },
    { id: "forward-1MiB-c16", size: "1 MiB", payload: MIB_FP32, concurrency: 16, connections: 4 },
  ].map(({ id, size, payload, concurrency, connections }): Scenario => ({
    id,
    title: `forwarding to Triton vs calling Triton, FP32 ${size}, concurrency ${concurrency}${concurrency === 1 ? " (added latency)" : ""}`,
    payload,
    concurrency,
    connections,
    servers: FORWARDING,
    unit: payload === MIB_FP32 ? "bytes/s" : "requests/s",
    upstream: "triton",
  })),
  ...[1, 64].map((concurrency): Scenario => ({
    id: `forward-bare-1KiB-c${concurrency}`,
    title: `forwarding to the bare grpc-js server vs calling it, FP32 1 KiB, concurrency ${concurrency}${concurrency === 1 ? " (added latency)" : ""}`,
    payload: KIB_FP32,
    concurrency,
    connections: Math.min(concurrency, 8),
    servers: FORWARDING_BARE,
    unit: "requests/s",
    upstream: "grpc-js-ceiling",
  })),
];

export const SCENARIOS: readonly Scenario[] = [
  ...[1, 16, 64, 256].map((concurrency): Scenario => ({
    id: `identity-1KiB-c${concurrency}`,
    title: `identity FP32 1 KiB, concurrency ${concurrency}`,
    payload: KIB_FP32,
    concurrency,
    connections: Math.min(concurrency, 8),
    servers: EVERY_UNARY_SERVER,
    unit: "requests/s",
  })),
  ...[16, 64].map((concurrency): Scenario => ({
    id: `python-1KiB-c${concurrency}`,
    title: `Python-backend identity model.py, FP32 1 KiB, concurrency ${concurrency}`,
    payload: KIB_FP32,
    concurrency,
    connections: Math.min(concurrency, 8),
    servers: PYTHON_MODEL,
    unit: "requests/s",
  })),
  {
    id: "python-1MiB-c16",
    title: "Python-backend identity model.py, FP32 1 MiB, concurrency 16",
    payload: MIB_FP32,
    concurrency: 16,
    connections: 4,
    servers: PYTHON_MODEL,
    unit: "bytes/s",
  },
  {
    id: "raw-1MiB-c16",
    title: "identity FP32 1 MiB, concurrency 16",
    payload: MIB_FP32,
    concurrency: 16,
    connections: 4,
    servers: ["dataplane", "grpc-js-ceiling", "go-ceiling", "triton", "kserve", "mlserver", "dynamo"],
    unit: "bytes/s",
  },
  {
    id: "raw-16MiB-c4",
    title: "identity FP32 16 MiB, concurrency 4",
    payload: MIB16_FP32,
    concurrency: 4,
    connections: 4,
    servers: ["dataplane", "grpc-js-ceiling", "go-ceiling", "triton", "dynamo"],
    unit: "bytes/s",
  },
  {
    id: "bytes-64x16B-c64",
    title: "identity BYTES 64 × 16 B, concurrency 64",
    payload: { kind: "bytes", elements: 64, elementBytes: 16 },
    concurrency: 64,
    connections: 8,
    servers: ["dataplane", "triton", "kserve", "mlserver", "dynamo"],
    unit: "requests/s",
  },
  ...FORWARDING_SCENARIOS.flatMap((scenario) => [
    scenario,
    {
      ...scenario,
      id: `${scenario.id}-own-core`,
      title: `${scenario.title}; the forwarder on a core of its own`,
      layout: "own-core" as const,
    },
  ]),
  {
    id: "forward-rest-1KiB-c64",
    title:
      "forwarding: KServe v2 REST in (binary tensors), gRPC out to Triton, vs Triton's HTTP endpoint, FP32 1 KiB, concurrency 64",
    payload: KIB_FP32,
    concurrency: 64,
    connections: 64,
    servers: ["triton-direct", "dataplane-forward"],
    unit: "requests/s",
    http: { form: "binary" },
    upstream: "triton",
  },
  ...(["json", "binary"] as const).map((form): Scenario => ({
    id: `rest-${form}-1KiB-c64`,
    title: `KServe v2 REST identity FP32 1 KiB (${form === "json" ? "JSON data" : "binary tensor data"}), concurrency 64`,
    payload: KIB_FP32,
    concurrency: 64,
    connections: 64,
    servers: ["dataplane", "triton"],
    unit: "requests/s",
    http: { form },
  })),
  {
    id: "openai-stream-mocker-1000",
    title: "OpenAI chat completions streamed (SSE), simulated LLM (a token every 10 ms), 1000 concurrent streams",
    payload: { kind: "bytes", elements: 1, elementBytes: 5 },
    concurrency: 1000,
    connections: 1000,
    servers: ["dataplane"],
    unit: "responses/s",
    streams: { count: 1000, tokens: 64, model: "mock_llm" },
    http: { form: "openai-sse" },
  },
  ...[100, 1000].map((count): Scenario => ({
    id: `stream-mocker-${count}`,
    title: `ModelStreamInfer, simulated LLM (a token every 10 ms), ${count} concurrent streams`,
    payload: { kind: "bytes", elements: 1, elementBytes: 5 },
    concurrency: count,
    connections: 8,
    servers: ["dataplane", "dataplane-all-cores"],
    unit: "responses/s",
    streams: { count, tokens: 64, model: "mock_llm" },
  })),
];

/** The one scenario of the smoke run in `npm test`: seconds, the data plane and its ceiling. */
export const SMOKE_SCENARIO: Scenario = {
  ...SCENARIOS[1]!,
  id: "smoke-identity-1KiB-c16",
  servers: ["dataplane", "grpc-js-ceiling"],
};

import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  credentials,
  Metadata,
  makeGenericClientConstructor,
  Server,
  ServerCredentials,
  status,
  type Client,
  type ServerInterceptor,
  type ServiceDefinition,
  type ServiceError,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { DataPlaneError, invalidArgument, unimplemented } from "../../../lib/errors.js";
import { createMetrics, type DataPlaneMetrics } from "../../src/metrics/index.js";
import type { ModelRegistry } from "../../src/models/registry.js";
import { VersionStatistics } from "../../src/models/statistics.js";
import { BearerTokens } from "../../../lib/auth/bearer-tokens.js";
import { callInterceptor } from "../../src/server/call-interceptor.js";
import { REPO_ROOT } from "../fixtures/paths.js";

/**
 * /metrics as Prometheus reads it, after a fixed load, byte for byte: family names, help,
 * label order, bucket edges, sums, series order. How the families count (prom-client's own
 * series or slots of our own) must never show in the exposition. Every clock the metrics
 * read is one fake clock here, stepped by exact binary fractions of a millisecond, so the
 * values are the same on every run; the process's own families (process_*, nodejs_*) vary
 * and are left out.
 */

const GOLDEN = join(REPO_ROOT, "dataplane", "test", "unit", "metrics-exposition.golden.prom");

/** One clock behind performance.now, process.hrtime and process.hrtime.bigint, moved only by the test. */
class FakeClock {
  private ms = 1_000;
  private readonly saved = { now: performance.now, hrtime: process.hrtime };

  install(): void {
    performance.now = () => this.ms;
    const hrtime = (previous?: [number, number]): [number, number] => {
      const ns = BigInt(this.ms * 1e6);
      const seconds = Number(ns / 1_000_000_000n);
      const nanos = Number(ns % 1_000_000_000n);
      if (previous === undefined) return [seconds, nanos];
      const diff = (seconds - previous[0]) * 1e9 + (nanos - previous[1]);
      return [Math.floor(diff / 1e9), diff % 1e9];
    };
    hrtime.bigint = () => BigInt(this.ms * 1e6);
    process.hrtime = hrtime;
  }

  restore(): void {
    performance.now = this.saved.now;
    process.hrtime = this.saved.hrtime;
  }

  advance(ms: number): void {
    this.ms += ms;
  }
}

const alpha = { name: "alpha", backend: "identity" };
const beta = { name: "beta", backend: "python" };

/** The data plane's registry as the metrics read it: three served models (gamma never asked for), statistics, queues, loads. */
function servedModels(): ModelRegistry {
  const statistics = new VersionStatistics();
  const timings = { queueNs: 1_500n, computeInputNs: 2_000n, computeInferNs: 250_000n, computeOutputNs: 4_000n };
  statistics.recordExecution(1, timings);
  statistics.recordSuccess(300_000n, 1, timings);
  statistics.recordExecution(4, timings);
  statistics.recordSuccess(1_250_000n, 4, timings);
  statistics.recordFailure(7_000n);
  const idle = new VersionStatistics();
  const models = {
    statistics: () => [
      { name: "alpha", version: "1", statistics },
      { name: "beta", version: "2", statistics: idle },
      { name: "gamma", version: "1", statistics: idle },
    ],
    pendingRequests: () => [{ name: "alpha", version: "1", pending: 2 }],
    loads: () => [
      { name: "alpha", load: { waiting: 1, running: 3 } },
      { name: "beta", load: { waiting: 0, running: 0, kvCacheUsage: 0.25 } },
    ],
  };
  return models as unknown as ModelRegistry;
}

/** The inference requests' observations, as the pipeline reports them. */
function inferenceLoad(metrics: DataPlaneMetrics, clock: FakeClock): void {
  const { frontend } = metrics;
  const served = frontend.start(alpha, "ModelInfer", "unary");
  clock.advance(0.5);
  served.received(1024);
  clock.advance(1.5);
  served.response(1024);
  clock.advance(0.25);
  served.end(undefined);

  // Exactly on bucket edges: 5 ms (frontend and component), 1 ms to the first token.
  const onEdge = frontend.start(alpha, "ModelInfer", "unary");
  onEdge.received(16);
  clock.advance(5);
  onEdge.response(16);
  onEdge.end(undefined);

  const invalid = frontend.start(alpha, "ModelInfer", "unary");
  clock.advance(0.125);
  invalid.end(invalidArgument("model 'alpha': bad input"));

  const stream = frontend.start(beta, "ModelStreamInfer", "stream");
  stream.received(8);
  clock.advance(1);
  stream.response(4);
  clock.advance(2.5);
  stream.response(4);
  clock.advance(64);
  stream.response(4);
  stream.end(undefined);

  const cancelled = frontend.start(beta, "ModelStreamInfer", "stream");
  clock.advance(3);
  cancelled.end(new DataPlaneError("Cancelled", "request cancelled"));

  frontend.refused(alpha, "ModelInfer", "unary", unimplemented("model 'alpha' is decoupled"));

  const late = frontend.start(beta, "infer", "unary");
  clock.advance(1_500);
  late.end(new DataPlaneError("DeadlineExceeded", "the request's deadline passed"));

  const broken = frontend.start(beta, "bls", "unary");
  broken.received(0);
  broken.end(new Error("boom"));

  const long = frontend.start(alpha, "generate", "unary");
  clock.advance(700_000);
  long.response(2);
  long.end(undefined);

  // Still running when /metrics is read.
  frontend.start(alpha, "ModelInfer", "unary").received(4);

  metrics.http.observe("POST", "/v2/models/:model/infer", 200, 0.0015);
  metrics.http.observe("POST", "/v2/models/:model/infer", 200, 0.25);
  metrics.http.observe("GET", "/v2/health/ready", 503, 0.00025);
}

const bytes = { requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b };
const replies = { responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b };
const ECHO: ServiceDefinition = {
  unary: { path: "/golden.Echo/Unary", requestStream: false, responseStream: false, ...bytes, ...replies },
  fail: { path: "/golden.Echo/Fail", requestStream: false, responseStream: false, ...bytes, ...replies },
  watch: { path: "/golden.Echo/Watch", requestStream: false, responseStream: true, ...bytes, ...replies },
  chat: { path: "/golden.Echo/Chat", requestStream: true, responseStream: true, ...bytes, ...replies },
};

/** The gRPC server's interceptors, as the data plane puts them together (a refusal by tokens is counted). */
function serverInterceptors(metrics: DataPlaneMetrics, tokens: BearerTokens): ServerInterceptor[] {
  return [callInterceptor(metrics.grpc, { inference: tokens, modelControl: undefined })];
}

async function grpcLoad(metrics: DataPlaneMetrics, clock: FakeClock): Promise<void> {
  const tokens = new BearerTokens();
  tokens.load("golden-token\n", "test tokens");
  const server = new Server({ "grpc.enable_channelz": 0, interceptors: serverInterceptors(metrics, tokens) });
  const implementation: UntypedServiceImplementation = {
    unary: (call: { request: Buffer }, callback: (error: null, reply: Buffer) => void) => {
      clock.advance(1.5);
      callback(null, call.request);
    },
    fail: (_call: unknown, callback: (error: Partial<ServiceError>) => void) =>
      callback({ code: status.INVALID_ARGUMENT, details: "x".repeat(10_000) }),
    watch: (call: { write(b: Buffer): void; end(): void }) => {
      for (let i = 0; i < 3; i++) call.write(Buffer.from([i]));
      call.end();
    },
    chat: (call: { on(event: string, listener: (b?: Buffer) => void): void; write(b: Buffer): void; end(): void }) => {
      call.on("data", (message) => call.write(message!));
      call.on("end", () => call.end());
    },
  };
  server.addService(ECHO, implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  const Echo = makeGenericClientConstructor(ECHO, "Echo");
  const client = new Echo(`127.0.0.1:${port}`, credentials.createInsecure()) as Client &
    Record<string, (...args: unknown[]) => unknown>;
  const signed = new Metadata();
  signed.set("authorization", "Bearer golden-token");
  const unary = (method: string, metadata: Metadata) =>
    new Promise<number>((resolve) =>
      client[method]!(Buffer.from("hi"), metadata, (error: ServiceError | null) => resolve(error?.code ?? status.OK)),
    );
  try {
    assert.equal(await unary("unary", signed), status.OK);
    assert.equal(await unary("unary", signed), status.OK);
    assert.equal(await unary("fail", signed), status.INVALID_ARGUMENT);
    assert.equal(await unary("unary", new Metadata()), status.UNAUTHENTICATED);
    const watched = client["watch"]!(Buffer.from("w"), signed) as NodeJS.ReadableStream;
    let messages = 0;
    for await (const _ of watched) messages++;
    assert.equal(messages, 3);
    const chat = client["chat"]!(signed) as NodeJS.ReadWriteStream;
    chat.write(Buffer.from("a"));
    chat.write(Buffer.from("b"));
    chat.end();
    let echoed = 0;
    for await (const _ of chat) echoed++;
    assert.equal(echoed, 2);
  } finally {
    client.close();
    server.forceShutdown();
  }
}

/** The exposition without the process's own families, which vary from run to run. */
async function exposition(metrics: DataPlaneMetrics): Promise<string> {
  const text = await metrics.register.metrics();
  return text
    .split("\n\n")
    .filter((family) => !/^# HELP (process_|nodejs_)/.test(family))
    .join("\n\n");
}

describe("/metrics after a fixed load (golden exposition)", () => {
  it("is byte for byte the golden file: names, help, label order, bucket edges, values", async () => {
    const clock = new FakeClock();
    clock.install();
    try {
      const metrics = createMetrics(servedModels(), "golden-server");
      inferenceLoad(metrics, clock);
      await grpcLoad(metrics, clock);
      const text = await exposition(metrics);
      // WRITE_GOLDEN=1 writes the file anew, for a change of the exposition that is meant (review its diff).
      if (process.env["WRITE_GOLDEN"] === "1") writeFileSync(GOLDEN, text);
      assert.equal(text, readFileSync(GOLDEN, "utf8"));
    } finally {
      clock.restore();
    }
  });
});

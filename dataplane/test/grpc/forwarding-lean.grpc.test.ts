import { credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import {
  ModelInferResponse,
  type ModelInferRequest,
  type ModelStatistics,
} from "../../../proto/gen/ts/grpc_service.js";
import { InferenceExtensionsClient } from "../../../proto/gen/ts/extensions.js";
import { scrape, type Sample } from "../../../e2e/support/prometheus.js";
import { H2_CODE } from "../../../lib/grpc/frames.js";
import { forwardedConfig, useScriptedForwarding } from "../fixtures/forwarding.js";
import {
  scriptedRequest,
  type ReceivedStream,
  type Script,
  type ScriptedUpstream,
} from "../fixtures/scripted-upstream.js";
import { assertNoSegmentsLeft, removeSegment, shmSegment } from "../fixtures/shm-segments.js";
import { call, eventually, type ServerProcess } from "../fixtures/server.js";

/**
 * The lean forwarding path's behaviour against a scripted grpc-js upstream (fixtures/
 * scripted-upstream.ts, which records what HTTP/2 carried to it): the deadline and a client's
 * cancel reach the upstream, the client's metadata goes on without its credentials, requests
 * naming shared memory are resolved here, and a forwarded request is counted in the metrics
 * and statistics exactly as a checked one (the pipeline's path) is.
 */

/** The same upstream model with its tensors declared: the pipeline decodes and checks its requests. */
const CHECKED_TENSORS = `
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`;

/** grpc-timeout as milliseconds (PROTOCOL-HTTP2.md: an integer of at most 8 digits and a unit). */
function timeoutMs(header: string): number {
  const units: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };
  return Number(header.slice(0, -1)) * units[header.slice(-1)]!;
}

/** One inference stream a silent upstream received: its headers, and how it ended. */
interface SilentStream {
  readonly headers: IncomingHttpHeaders;
  resetCode: number | undefined;
}

/**
 * An HTTP/2 upstream that takes inference streams and never answers them, nor enforces their
 * grpc-timeout (a grpc-js peer ends a call at its own deadline, which races the data plane's
 * reset of it: the upstream's timer starts after ours and may still fire first on a loaded
 * machine). What ends such a stream is then the data plane alone. Other methods (ServerLive
 * probes) are answered UNIMPLEMENTED at once.
 */
async function startSilentUpstream(): Promise<{ address: string; streams: SilentStream[]; close(): Promise<void> }> {
  const streams: SilentStream[] = [];
  const server = createServer();
  const sessions = new Set<ServerHttp2Session>();
  server.on("session", (session: ServerHttp2Session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    if (!String(headers[":path"]).endsWith("Infer")) {
      stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "12" }, { endStream: true });
      return;
    }
    const record: SilentStream = { headers, resetCode: undefined };
    streams.push(record);
    stream.on("data", () => undefined);
    stream.on("close", () => (record.resetCode = stream.rstCode));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    streams,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const session of sessions) session.destroy();
      }),
  };
}

describe("the lean forwarding path against a scripted upstream", function () {
  this.timeout(60_000);
  // Registered before the forwarding fixture's hooks: its models' configs name this address.
  let silent: Awaited<ReturnType<typeof startSilentUpstream>>;
  before(async () => (silent = await startSilentUpstream()));
  after(() => silent.close());
  const forwarding = useScriptedForwarding(
    (upstream) => ({
      lean: forwardedConfig("lean", upstream),
      silent: forwardedConfig("silent", silent.address),
      lean_stream: forwardedConfig("lean_stream", upstream, "model_transaction_policy { decoupled: true }"),
      // Served only by the counting test: the same load on each, one forwarded, one checked.
      counted: forwardedConfig("counted", upstream),
      checked: forwardedConfig("checked", upstream, CHECKED_TENSORS),
    }),
    ["--allow-client-shm"],
  );
  let upstream: ScriptedUpstream;
  let server: ServerProcess;
  before(() => ({ upstream, server } = forwarding));
  after(() => assertNoSegmentsLeft());

  const infer = (
    request: ModelInferRequest,
    options: { metadata?: Metadata; deadline?: number; cancelAfterMs?: number } = {},
  ): Promise<{ reply?: ModelInferResponse; error?: ServiceError }> =>
    new Promise((resolve) => {
      const pending = server.client.modelInfer(
        request,
        options.metadata ?? new Metadata(),
        options.deadline === undefined ? {} : { deadline: options.deadline },
        (error, reply) => resolve(error ? { error } : { reply }),
      );
      if (options.cancelAfterMs !== undefined) setTimeout(() => pending.cancel(), options.cancelAfterMs);
    });

  /** The upstream's record of the stream that carried the request `id`, found by its arrival order. */
  const streamOf = async (id: string): Promise<ReceivedStream> => {
    await eventually(() =>
      assert.ok(
        upstream.requests.some((request) => request.id === id),
        `${id} upstream`,
      ),
    );
    const inferStreams = upstream.streams.filter((stream) => stream.path.endsWith("Infer"));
    const index = upstream.requests.findIndex((request) => request.id === id);
    return inferStreams[index]!;
  };

  it("sends the deadline as grpc-timeout no longer than the client's; the client gets DEADLINE_EXCEEDED and the upstream a reset", async () => {
    const given = 800;
    const { error } = await infer(scriptedRequest("silent", {}, { id: "deadline" }), {
      deadline: Date.now() + given,
    });
    assert.equal(error?.code, status.DEADLINE_EXCEEDED);
    await eventually(() => assert.equal(silent.streams.length, 1, "one stream upstream"));
    const stream = silent.streams[0]!;
    const sent = timeoutMs(String(stream.headers["grpc-timeout"]));
    assert.ok(sent > 0 && sent <= given, `grpc-timeout ${String(stream.headers["grpc-timeout"])} within ${given} ms`);
    await eventually(() => assert.equal(stream.resetCode, H2_CODE.CANCEL, "the upstream's stream was reset (CANCEL)"));
  });

  it("passes a client's cancel on to the upstream (RST_STREAM CANCEL)", async () => {
    const { error } = await infer(scriptedRequest("lean", { hang: true }, { id: "cancel" }), { cancelAfterMs: 200 });
    assert.equal(error?.code, status.CANCELLED);
    const stream = await streamOf("cancel");
    await eventually(() => assert.equal(stream.resetCode, H2_CODE.CANCEL));
  });

  it("sends the client's custom metadata upstream, never its authorization nor reserved names", async () => {
    const metadata = new Metadata();
    metadata.set("authorization", "Bearer not-for-upstreams");
    metadata.set("x-tenant", "blue");
    metadata.set("x-blob-bin", Buffer.from([1, 2, 3]));
    metadata.set("grpc-previous-rpc-attempts", "3");
    metadata.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    const { error } = await infer(scriptedRequest("lean", {}, { id: "metadata" }), { metadata });
    assert.equal(error, undefined);
    const { headers } = await streamOf("metadata");
    assert.equal(headers["authorization"], undefined);
    assert.equal(headers["grpc-previous-rpc-attempts"], undefined);
    assert.equal(headers["x-tenant"], "blue");
    assert.equal(headers["x-blob-bin"], Buffer.from([1, 2, 3]).toString("base64").replace(/=+$/, ""));
    assert.equal(
      headers["traceparent"],
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      "tracing off: the client's trace context as it came",
    );
  });

  it("resolves a request naming shared memory here: the upstream gets the region's bytes", async () => {
    const values = Float32Array.of(4, 5, 6);
    const segment = shmSegment(new Uint8Array(values.buffer));
    try {
      await call(server.client, "systemSharedMemoryRegister", {
        name: "in",
        key: segment.key,
        offset: 0n,
        byteSize: 12n,
      });
      const request = scriptedRequest("lean", {}, { id: "shm" });
      const { reply, error } = await infer({
        ...request,
        inputs: [
          {
            ...request.inputs[0]!,
            parameters: {
              shared_memory_region: { parameterChoice: { $case: "stringParam", value: "in" } },
              shared_memory_byte_size: { parameterChoice: { $case: "int64Param", value: 12n } },
            },
          },
        ],
        rawInputContents: [],
      });
      assert.equal(error, undefined);
      const sent = upstream.requests.find((one) => one.id === "shm")!;
      assert.equal(sent.inputs[0]!.parameters["shared_memory_region"], undefined, "no region named upstream");
      assert.deepEqual([...new Float32Array(Uint8Array.from(sent.rawInputContents[0]!).buffer)], [4, 5, 6]);
      assert.deepEqual([...new Float32Array(Uint8Array.from(reply!.rawOutputContents[0]!).buffer)], [4, 5, 6]);
    } finally {
      await call(server.client, "systemSharedMemoryUnregister", { name: "" });
      removeSegment(segment);
    }
  });

  it("ModelInferStream: the responses of a decoupled model's upstream stream; an error_message reply ends the call INTERNAL with its text", async () => {
    const extensions = new InferenceExtensionsClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
    const run = (script: Script): Promise<{ replies: ModelInferResponse[]; error?: ServiceError }> =>
      new Promise((resolve) => {
        const replies: ModelInferResponse[] = [];
        const stream = extensions.modelInferStream(scriptedRequest("lean_stream", script, { id: "ext" }));
        stream.on("data", (reply: ModelInferResponse) => replies.push(reply));
        stream.on("error", (error: ServiceError) => resolve({ replies, error }));
        stream.on("end", () => resolve({ replies }));
      });
    try {
      const ok = await run({ streamReplies: [null, null] });
      assert.equal(ok.error, undefined);
      assert.deepEqual(
        ok.replies.map((reply) => reply.id),
        ["ext", "ext"],
      );
      const failed = await run({ streamReplies: [null, "it broke"] });
      assert.equal(failed.replies.length, 1);
      assert.equal(failed.error?.code, status.INTERNAL);
      assert.equal(failed.error?.details, "it broke");
    } finally {
      extensions.close();
    }
  });

  it("ModelInferStream: an error_message reply ends the call at once and cancels the upstream's stream", async () => {
    const extensions = new InferenceExtensionsClient(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
    try {
      const script: Script = { streamReplies: [null, "it broke", null], hang: true };
      const failed = await new Promise<{ replies: number; error?: ServiceError }>((resolve) => {
        let replies = 0;
        const stream = extensions.modelInferStream(scriptedRequest("lean_stream", script, { id: "broken" }), {
          deadline: Date.now() + 10_000,
        });
        stream.on("data", () => replies++);
        stream.on("error", (error: ServiceError) => resolve({ replies, error }));
        stream.on("end", () => resolve({ replies }));
      });
      assert.equal(failed.error?.code, status.INTERNAL, failed.error?.details);
      assert.equal(failed.error?.details, "it broke");
      assert.equal(failed.replies, 1);
      const upstreamStream = await streamOf("broken");
      await eventually(() => assert.equal(upstreamStream.resetCode, H2_CODE.CANCEL));
      // Recorded as the failure the client got, not as the cancel that ended the upstream's stream.
      const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
      const errors = samples.filter(
        ({ name, labels }) => name === "dynamo_component_errors_total" && labels["model"] === "lean_stream",
      );
      assert.deepEqual(
        errors.map(({ labels, value }) => [labels["error_type"], value]),
        [["internal", 2]],
      );
    } finally {
      extensions.close();
    }
  });

  it("counts forwarded requests in the metrics and the statistics as the pipeline counts checked ones", async () => {
    const load = async (model: string): Promise<void> => {
      for (let index = 0; index < 3; index++) assert.equal((await infer(scriptedRequest(model, {}))).error, undefined);
      const failed = await infer(scriptedRequest(model, { status: status.NOT_FOUND, details: "gone" }));
      assert.equal(failed.error?.code, status.NOT_FOUND);
      const refused = await infer(scriptedRequest(model, {}, { modelVersion: "9" }));
      assert.equal(refused.error?.code, status.NOT_FOUND);
    };
    await load("counted");
    await load("checked");
    const samples = await scrape(`http://127.0.0.1:${server.metricsPort}/metrics`);
    assert.deepEqual(seriesOf(samples, "counted"), seriesOf(samples, "checked"));
    const statistics = async (name: string) =>
      countsOf((await call(server.client, "modelStatistics", { name, version: "" })).modelStats[0]!);
    assert.deepEqual(await statistics("counted"), await statistics("checked"));
  });
});

/**
 * A model's series, keyed without its name: counts by value; histogram sums and buckets, and
 * byte counters, by presence only (times differ, and a forwarded request counts its message's
 * bytes where a checked one counts its tensors').
 */
function seriesOf(samples: readonly Sample[], model: string): Record<string, number | "present"> {
  const series: Record<string, number | "present"> = {};
  for (const { name, labels, value } of samples) {
    if (labels["model"] !== model) continue;
    const others = Object.entries(labels)
      .filter(([key]) => key !== "model" && key !== "dynamo_component")
      .map(([key, label]) => `${key}=${label}`)
      .join(",");
    const byPresence = /_(sum|bucket)$/.test(name) || /bytes|seconds|duration/.test(name);
    series[`${name}{${others}}`] = byPresence && !name.endsWith("_count") ? "present" : value;
  }
  return series;
}

function countsOf(statistics: ModelStatistics): Record<string, bigint | undefined> {
  const stats = statistics.inferenceStats!;
  return {
    inferences: statistics.inferenceCount,
    executions: statistics.executionCount,
    success: stats.success?.count,
    fail: stats.fail?.count,
    queue: stats.queue?.count,
    computeInput: stats.computeInput?.count,
    computeInfer: stats.computeInfer?.count,
    computeOutput: stats.computeOutput?.count,
  };
}

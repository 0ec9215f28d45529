import { Client, credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { pino } from "pino";
import {
  ModelInferRequest,
  ModelInferResponse,
  ModelStreamInferResponse,
  RepositoryModelLoadRequest,
  type InferParameter,
} from "../../../proto/gen/ts/grpc_service.js";
import { parsedDataPlaneArguments } from "../../../cli/dataplane.js";
import type { ForwardOptions, ForwardRequest, ForwardSink, ForwardStatus } from "../../src/engines/engine.js";
import { KserveGrpcEngine } from "../../src/engines/kserve-grpc/kserve-grpc.js";
import { startDataPlane, type RunningDataPlane } from "../../src/dataplane.js";
import { dataPlaneOptions } from "../../src/main.js";
import { forwardedMetadata } from "../../src/inference/forward.js";
import type { InferenceContext } from "../../src/inference/pipeline.js";
import { modelStreamInferHandler } from "../../src/services/model-stream-infer.js";
import { modelInferStreamHandlers } from "../../src/services/model-infer-stream.js";
import { inferRequestDecoder, PassThroughRequest } from "../../src/server/request-decoding.js";
import type { VersionStatistics } from "../../src/models/statistics.js";
import { TestRepository } from "../fixtures/repository.js";
import { eventually, inferRequest } from "../fixtures/server.js";

/**
 * The lean forwarding path through the server (inference/forward.ts), against a double of
 * Engine.forward standing in for the kserve-grpc engine's transport: which requests take it,
 * what reaches the engine (the client's bytes as they came, its metadata without the reserved
 * names, the deadline, the cancel), and what the client gets back (the upstream's metadata,
 * message bytes, status and trailers as the engine gave them).
 */

/** What the double saw of one forwarded call. */
interface Seen {
  readonly request: ForwardRequest;
  readonly options: ForwardOptions;
}

const UNKNOWN_FIELD = Buffer.from([0x9a, 0x06, 3, 0x61, 0x62, 0x63]); // field 99, "abc": survives only undecoded

const reply = (id: string, version: string): Buffer =>
  Buffer.concat([
    ModelInferResponse.encode({
      modelName: "lean",
      modelVersion: version,
      id,
      parameters: {},
      outputs: [],
      rawOutputContents: [],
    }).finish(),
    UNKNOWN_FIELD,
  ]);

const streamReply = (errorMessage: string, inner: Buffer): Buffer => {
  const head = ModelStreamInferResponse.encode({ errorMessage, inferResponse: undefined }).finish();
  return Buffer.concat([head, Buffer.from([0x12, inner.length]), inner]);
};

const BIN = Uint8Array.of(0, 1, 2, 255);
const TRAILERS: ForwardStatus["metadata"] = [
  ["x-trailer", "t1"],
  ["x-detail-bin", BIN],
];

/**
 * Answers by the request's id: "ok" (metadata, one message, OK with trailers), "fail" (a
 * status with trailers), "hang" (until cancelled), "two" (two messages), "stream" (stream
 * replies, an error_message among them), "stream-fail" (a status after one message).
 */
function doubleForward(seen: Seen[]) {
  return function forward(request: ForwardRequest, options: ForwardOptions, sink: ForwardSink) {
    seen.push({ request, options });
    const { id } = request;
    const later = (work: () => void): void => void setImmediate(work);
    later(() => {
      if (id === "hang") {
        const end = (): void => sink.end({ code: status.CANCELLED, details: "cancelled", metadata: [] });
        if (options.signal.aborted) end();
        else options.signal.addEventListener("abort", end, { once: true });
        return;
      }
      sink.metadata([["x-upstream", "up"]]);
      if (id === "fail") {
        sink.end({ code: status.NOT_FOUND, details: "no such thing: 100% ✓", metadata: TRAILERS });
      } else if (id === "two") {
        sink.message(reply(id, "1"));
        sink.message(reply(id, "1"));
        sink.end({ code: status.OK, details: "", metadata: [] });
      } else if (id === "stream" || id === "stream-fail") {
        sink.message(streamReply("", reply(id, "1")));
        if (id === "stream-fail") {
          sink.end({ code: status.UNAVAILABLE, details: "upstream went away", metadata: [] });
          return;
        }
        sink.message(streamReply("upstream says no", reply(id, "1")));
        sink.message(streamReply("", reply(id, "1")));
        sink.end({ code: status.OK, details: "", metadata: TRAILERS });
      } else {
        sink.message(reply(id, request.modelVersion));
        sink.end({ code: status.OK, details: "", metadata: TRAILERS });
      }
    });
    return { pause: () => undefined, resume: () => undefined };
  };
}

const kserveGrpc = (name: string, extra = ""): string => `
name: "${name}"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "127.0.0.1:9" } }
${extra}
`;

const asIs = (bytes: Buffer): Buffer => bytes;
const PATH = "/inference.GRPCInferenceService/";

const requestBytes = (modelName: string, id: string, parameters: Record<string, InferParameter> = {}): Buffer =>
  Buffer.concat([
    ModelInferRequest.encode(
      inferRequest({
        modelName,
        id,
        parameters,
        inputs: [{ name: "IN", datatype: "INT32", shape: [1n], parameters: {}, contents: undefined }],
        rawInputContents: [new Uint8Array(Int32Array.of(7).buffer)],
      }),
    ).finish(),
    UNKNOWN_FIELD,
  ]);

/**
 * Mocha hooks: the kserve-grpc engine's `forward` replaced by the double, and a data plane in
 * this process serving `models` (name -> config) with `args`; both undone after the suite.
 */
function withDoubleForward(models: Record<string, string>, args: readonly string[] = []) {
  const original = Object.getOwnPropertyDescriptor(KserveGrpcEngine.prototype, "forward");
  const served = {
    seen: [] as Seen[],
    repository: undefined as unknown as TestRepository,
    dataPlane: undefined as unknown as RunningDataPlane,
    client: undefined as unknown as Client,
  };
  before(async () => {
    Object.defineProperty(KserveGrpcEngine.prototype, "forward", {
      value: doubleForward(served.seen),
      configurable: true,
      writable: true,
    });
    served.repository = new TestRepository(models);
    const ports = ["--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"];
    const parsed = await parsedDataPlaneArguments([...ports, ...args, "--model-repository", served.repository.dir]);
    const options = { ...dataPlaneOptions(parsed, pino({ level: "silent" })), drainDelaySeconds: 0 };
    served.dataPlane = await startDataPlane(options);
    served.client = new Client(`127.0.0.1:${served.dataPlane.grpcPort}`, credentials.createInsecure());
  });
  after(async () => {
    served.client?.close();
    await served.dataPlane?.stop();
    served.repository?.remove();
    if (original === undefined) delete (KserveGrpcEngine.prototype as { forward?: unknown }).forward;
    else Object.defineProperty(KserveGrpcEngine.prototype, "forward", original);
  });
  return served;
}

describe("the lean forwarding path (against a double of Engine.forward)", function () {
  this.timeout(30_000);
  const served = withDoubleForward({
    lean: kserveGrpc("lean"),
    lean_stream: kserveGrpc("lean_stream", "model_transaction_policy { decoupled: true }"),
    checked: kserveGrpc("checked", `input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]`),
  });
  const { seen } = served;
  let dataPlane: RunningDataPlane;
  let client: Client;
  before(() => ({ dataPlane, client } = served));

  beforeEach(() => (seen.length = 0));

  interface Answer {
    readonly error: ServiceError | null;
    readonly reply: Buffer | undefined;
    readonly headers: Metadata | undefined;
    readonly trailers: Metadata | undefined;
  }

  const unary = (
    bytes: Buffer,
    metadata = new Metadata(),
    deadline?: number,
    cancelAfterMs?: number,
  ): Promise<Answer> =>
    new Promise((resolve) => {
      let headers: Metadata | undefined;
      let trailers: Metadata | undefined;
      let settled: { error: ServiceError | null; reply: Buffer | undefined } | undefined;
      const done = (): void => {
        if (settled !== undefined && trailers !== undefined) resolve({ ...settled, headers, trailers });
      };
      const call = client.makeUnaryRequest(
        `${PATH}ModelInfer`,
        asIs,
        asIs,
        bytes,
        metadata,
        deadline === undefined ? {} : { deadline },
        (error, reply) => {
          settled = { error, reply };
          done();
        },
      );
      call.on("metadata", (received: Metadata) => (headers = received));
      call.on("status", (received: { metadata: Metadata }) => {
        trailers = received.metadata;
        done();
      });
      if (cancelAfterMs !== undefined) setTimeout(() => call.cancel(), cancelAfterMs);
    });

  it("ModelInfer: the client's bytes reach the engine as they came; the upstream's message, metadata and trailers come back as they were given", async () => {
    const sent = requestBytes("lean", "ok", { custom: { parameterChoice: { $case: "stringParam", value: "v" } } });
    const { error, reply: received, headers, trailers } = await unary(sent);
    assert.equal(error, null);
    assert.equal(seen.length, 1);
    const [{ request, options }] = seen as [Seen];
    assert.ok(Buffer.from(request.bytes).equals(sent), "the request's bytes as the client sent them");
    assert.equal(request.modelName, "lean");
    assert.equal(request.modelVersion, "1", "the version it resolved to");
    assert.equal(request.id, "ok");
    assert.deepEqual(request.parameters, { custom: { parameterChoice: { $case: "stringParam", value: "v" } } });
    assert.equal(options.stream, false);
    assert.ok(received!.equals(reply("ok", "1")), "the upstream's message as it came (its unknown field kept)");
    assert.deepEqual(headers!.get("x-upstream"), ["up"]);
    assert.deepEqual(trailers!.get("x-trailer"), ["t1"]);
    assert.deepEqual(trailers!.get("x-detail-bin"), [Buffer.from(BIN)]);
  });

  it("ModelInfer: the upstream's status comes back with its text and trailers", async () => {
    const { error, trailers } = await unary(requestBytes("lean", "fail"));
    assert.equal(error?.code, status.NOT_FOUND);
    assert.equal(error?.details, "no such thing: 100% ✓");
    assert.deepEqual(trailers!.get("x-trailer"), ["t1"]);
    assert.deepEqual(trailers!.get("x-detail-bin"), [Buffer.from(BIN)]);
  });

  it("ModelInfer: an upstream that sends two messages for a unary call fails the call (INTERNAL)", async () => {
    const { error } = await unary(requestBytes("lean", "two"));
    assert.equal(error?.code, status.INTERNAL);
    assert.match(error!.details, /more than one response/);
  });

  it("sends the client's custom metadata upstream, never authorization, grpc-* or the hop's headers", async () => {
    const metadata = new Metadata();
    metadata.set("authorization", "Bearer secret");
    metadata.set("x-tenant", "a");
    metadata.add("x-tenant", "b");
    metadata.set("x-blob-bin", Buffer.from(BIN));
    metadata.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    metadata.set("grpc-trace-bin", Buffer.from([0, 1]));
    metadata.set("grpc-custom", "x");
    metadata.set("user-agent", "mine");
    await unary(requestBytes("lean", "ok"), metadata);
    const entries = seen[0]!.request.metadata.map(([name, value]) => [
      name,
      typeof value === "string" ? value : [...value],
    ]);
    assert.deepEqual(
      entries.filter(([name]) => !["traceparent", "grpc-trace-bin"].includes(name as string)),
      // grpc-js's server joins a repeated text entry into one value, as HTTP headers join.
      [
        ["x-tenant", "a, b"],
        ["x-blob-bin", [...BIN]],
      ],
    );
    const names = entries.map(([name]) => name);
    assert.ok(
      names.includes("traceparent") && names.includes("grpc-trace-bin"),
      "tracing off: the client's trace context as it came",
    );
  });

  it("with tracing on, the span's trace context replaces the client's", () => {
    const metadata = new Metadata();
    metadata.set("traceparent", "theirs");
    metadata.set("tracestate", "theirs");
    metadata.set("grpc-trace-bin", Buffer.from([0]));
    metadata.set("x-kept", "yes");
    assert.deepEqual(forwardedMetadata(metadata, true), [["x-kept", "yes"]]);
  });

  it("hands the client's deadline to the engine, and the client's cancel aborts its signal", async () => {
    const deadline = Date.now() + 60_000;
    const answer = await unary(requestBytes("lean", "hang"), new Metadata(), deadline, 200);
    assert.equal(answer.error?.code, status.CANCELLED);
    const { options } = seen[0]!;
    assert.ok(Math.abs(options.deadline - deadline) < 1_000, `deadline ${options.deadline} vs ${deadline}`);
    await eventually(() => assert.equal(options.signal.aborted, true, "the engine's signal aborted"));
  });

  it("a deadline that passes ends the call DEADLINE_EXCEEDED and aborts the engine's signal", async () => {
    const answer = await unary(requestBytes("lean", "hang"), new Metadata(), Date.now() + 300);
    assert.equal(answer.error?.code, status.DEADLINE_EXCEEDED);
    await eventually(() => assert.equal(seen[0]!.options.signal.aborted, true));
  });

  it("resolves a request naming shared memory here: the engine is not called", async () => {
    const request = inferRequest({
      modelName: "lean",
      id: "ok",
      inputs: [
        {
          name: "IN",
          datatype: "INT32",
          shape: [1n],
          parameters: { shared_memory_region: { parameterChoice: { $case: "stringParam", value: "nowhere" } } },
          contents: undefined,
        },
      ],
    });
    const { error } = await unary(Buffer.from(ModelInferRequest.encode(request).finish()));
    assert.equal(seen.length, 0, "not forwarded");
    assert.equal(error?.code, status.INVALID_ARGUMENT, "checked here, as the pipeline checks shared-memory tensors");
    assert.match(error.details, /shared_memory/);
  });

  it("decodes and checks requests to a model with declared tensors (the engine's forward is not used)", async () => {
    const { error } = await unary(requestBytes("checked", "ok"));
    assert.equal(seen.length, 0);
    assert.notEqual(error, null, "the upstream at 127.0.0.1:9 is not there: the pipeline's engine call fails");
  });

  it("refuses an unknown version at admission: the engine is not called", async () => {
    const bytes = Buffer.from(
      ModelInferRequest.encode(inferRequest({ modelName: "lean", modelVersion: "9" })).finish(),
    );
    const { error } = await unary(bytes);
    assert.equal(error?.code, status.NOT_FOUND);
    assert.equal(seen.length, 0);
  });

  const bidi = (requests: Buffer[]): Promise<{ replies: Buffer[]; error: ServiceError | undefined }> =>
    new Promise((resolve) => {
      const replies: Buffer[] = [];
      const call = client.makeBidiStreamRequest(`${PATH}ModelStreamInfer`, asIs, asIs);
      call.on("data", (bytes: Buffer) => replies.push(bytes));
      call.on("error", (error: ServiceError) => resolve({ replies, error }));
      call.on("end", () => resolve({ replies, error: undefined }));
      for (const request of requests) call.write(request);
      call.end();
    });

  it("ModelStreamInfer: a decoupled model's upstream replies are written as they came, error_message ones too; a failed status becomes an error_message reply", async () => {
    const { replies, error } = await bidi([
      requestBytes("lean_stream", "stream"),
      requestBytes("lean_stream", "stream-fail"),
    ]);
    assert.equal(error, undefined);
    assert.equal(seen.length, 2);
    assert.equal(seen[0]!.options.stream, true);
    const expected = [
      streamReply("", reply("stream", "1")),
      streamReply("upstream says no", reply("stream", "1")),
      streamReply("", reply("stream", "1")),
    ];
    for (const bytes of expected)
      assert.ok(
        replies.some((got) => got.equals(bytes)),
        "an upstream reply as it came",
      );
    const failures = replies
      .map((bytes) => ModelStreamInferResponse.decode(bytes))
      .filter((r) => r.errorMessage !== "");
    assert.deepEqual(
      failures.map((r) => [r.errorMessage, r.inferResponse?.id]),
      [
        ["upstream says no", "stream"],
        ["upstream went away", "stream-fail"],
      ],
    );
    assert.equal(replies.length, 5);
  });

  const serverStream = (bytes: Buffer): Promise<{ replies: Buffer[]; error: ServiceError | undefined }> =>
    new Promise((resolve) => {
      const replies: Buffer[] = [];
      const call = client.makeServerStreamRequest(
        `/inference.GRPCInferenceService/ModelInferStream`,
        asIs,
        asIs,
        bytes,
      );
      call.on("data", (reply: Buffer) => replies.push(reply));
      call.on("error", (error: ServiceError) => resolve({ replies, error }));
      call.on("end", () => resolve({ replies, error: undefined }));
    });

  it("ModelInferStream: the responses inside the upstream's replies are written as they came; an error_message reply ends the call INTERNAL with its text", async () => {
    const { replies, error } = await serverStream(requestBytes("lean_stream", "stream"));
    assert.equal(replies.length, 1);
    assert.ok(replies[0]!.equals(reply("stream", "1")));
    assert.equal(error?.code, status.INTERNAL);
    assert.equal(error?.details, "upstream says no");
  });

  it("counts forwarded requests in the model's statistics, successes and failures", async () => {
    const counts = (): ReturnType<typeof countsOf> =>
      countsOf(dataPlane.registry.statistics("lean", "1")[0]!.statistics);
    const before = counts();
    await unary(requestBytes("lean", "ok"));
    await unary(requestBytes("lean", "fail"));
    const after = counts();
    assert.deepEqual(
      [after.success - before.success, after.fail - before.fail, after.executions - before.executions],
      [1, 1, 1],
      "one success (one execution of its own, as a forwarded request counts), one failure",
    );
  });

  it("a request read as passing through, whose model stopped passing through before admission, is decoded and takes the pipeline", async () => {
    const decode = inferRequestDecoder(new Set(["checked"]));
    const read = decode(requestBytes("checked", "ok"));
    assert.ok(read instanceof PassThroughRequest);
    assert.equal(read.decoded().inputs[0]?.name, "IN");
  });
});

describe("the lean forwarding path while its model is reloaded back and forth (double of Engine.forward)", function () {
  this.timeout(60_000);
  const served = withDoubleForward({ flip: kserveGrpc("flip") }, [
    ...["--model-control-mode", "explicit", "--load-model", "flip"],
  ]);
  const { seen } = served;
  let repository: TestRepository;
  let client: Client;
  before(() => ({ repository, client } = served));

  /** Writes the model's config in the repository and loads it (a load request may not change the backend). */
  const load = (config: string): Promise<unknown> =>
    new Promise((resolve, reject) => {
      repository.writeModel("flip", config);
      const request = RepositoryModelLoadRequest.encode({
        repositoryName: "",
        modelName: "flip",
        parameters: {},
      }).finish();
      client.makeUnaryRequest(`${PATH}RepositoryModelLoad`, asIs, asIs, Buffer.from(request), (error) =>
        error ? reject(error) : resolve(undefined),
      );
    });

  const infer = (id: string): Promise<ServiceError | null> =>
    new Promise((resolve) =>
      client.makeUnaryRequest(`${PATH}ModelInfer`, asIs, asIs, requestBytes("flip", id), (error) => resolve(error)),
    );

  it("answers every request, forwarded or run here, while the model flips between a forwarded and a local config", async () => {
    const forwarded = kserveGrpc("flip");
    const local = `name: "flip"\nbackend: "identity"\n`;
    let flipping = true;
    const flips = (async () => {
      try {
        for (let cycle = 0; cycle < 10; cycle++) {
          await load(cycle % 2 === 0 ? local : forwarded);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        flipping = false;
      }
    })();
    const failures: ServiceError[] = [];
    let served = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (flipping) {
          const error = await infer("ok");
          if (error === null) served++;
          else failures.push(error);
        }
      }),
    );
    await flips;
    assert.deepEqual(
      failures.map((failure) => `${failure.code} ${failure.details}`),
      [],
    );
    assert.ok(seen.length > 0 && served > seen.length, `${served} served, ${seen.length} of them forwarded`);
  });
});

function countsOf(statistics: VersionStatistics): { success: number; fail: number; executions: number } {
  const proto = statistics.toProto("", "");
  const { success, fail } = proto.inferenceStats!;
  return { success: Number(success!.count), fail: Number(fail!.count), executions: Number(proto.executionCount) };
}

describe("a request read as passing through whose model is reloaded as a checked one before its turn", function () {
  /** ModelInferRequest bytes: model_name "m", then one input whose message is cut (its tag's varint never ends). */
  const cutTensor = Uint8Array.of(0x0a, 0x01, 0x6d, 0x2a, 0x01, 0xff);
  /** The registry after the reload: nothing passes through any more. */
  const reloaded = { registry: { passThroughNames: () => new Set<string>() } } as unknown as InferenceContext;

  /** Collects the process's unhandled rejections while `run` runs (one would end a data plane). */
  async function unhandledDuring(run: () => Promise<void>): Promise<unknown[]> {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown): void => void unhandled.push(reason);
    process.prependListener("unhandledRejection", listener);
    try {
      await run();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.removeListener("unhandledRejection", listener);
    }
    return unhandled;
  }

  /** A grpc-js call as the services use it: no deadline, no metadata, what is written kept. */
  class FakeCall extends EventEmitter {
    readonly metadata = new Metadata();
    readonly written: unknown[] = [];
    ended = false;
    readonly request: unknown;
    constructor(request?: unknown) {
      super();
      this.request = request;
    }
    getDeadline = (): number => Infinity;
    write(reply: unknown): boolean {
      this.written.push(reply);
      return true;
    }
    pause = (): void => undefined;
    resume = (): void => undefined;
    end(): void {
      this.ended = true;
    }
  }

  it("ModelStreamInfer: a request that no longer decodes is answered with error_message on the open stream", async () => {
    const read = inferRequestDecoder(new Set(["m"]))(cutTensor);
    assert.ok(read instanceof PassThroughRequest, "read as passing through (its tensors are not read)");
    const call = new FakeCall();
    const unhandled = await unhandledDuring(async () => {
      modelStreamInferHandler(reloaded)(call as never);
      call.emit("data", read);
      call.emit("end");
      await eventually(() => assert.ok(call.ended, "the stream ended"));
    });
    assert.deepEqual(unhandled, []);
    const [reply] = call.written as { errorMessage: string; inferResponse: { modelName: string } }[];
    assert.match(reply?.errorMessage ?? "", /could not be decoded/);
    assert.equal(reply?.inferResponse.modelName, "m");
  });

  it("ModelInferStream: a request that no longer decodes ends the call INVALID_ARGUMENT", async () => {
    const read = inferRequestDecoder(new Set(["m"]))(cutTensor);
    const call = new FakeCall(read);
    const errors: { code: number; details: string }[] = [];
    call.on("error", (error: { code: number; details: string }) => errors.push(error));
    const unhandled = await unhandledDuring(async () => {
      modelInferStreamHandlers(reloaded).modelInferStream(call as never);
      await eventually(() => assert.equal(errors.length, 1));
    });
    assert.deepEqual(unhandled, []);
    assert.equal(errors[0]?.code, status.INVALID_ARGUMENT);
    assert.match(errors[0]?.details ?? "", /could not be decoded/);
  });
});

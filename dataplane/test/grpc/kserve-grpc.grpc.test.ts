import { credentials, Metadata, Server, ServerCredentials, status, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import {
  GRPCInferenceServiceClient,
  GRPCInferenceServiceService,
  type GRPCInferenceServiceServer,
  type ModelInferRequest,
  type ModelInferResponse,
  type ModelMetadataResponse,
  type ModelStreamInferResponse,
} from "../../../proto/gen/ts/grpc_service.js";
import { splitBytesElements } from "../../src/tensors/bytes.js";
import { emptyContents } from "../../src/tensors/typed.js";
import { TestRepository } from "../fixtures/repository.js";
import {
  call,
  callError,
  eventually,
  infer,
  inferRequest,
  startServer,
  type ServerProcess,
} from "../fixtures/server.js";
import { requireTritonPeers, startTritonPeer, type Peer } from "../fixtures/peers.js";
import { identityRequest } from "../fixtures/requests.js";
import { freePort } from "../../../e2e/support/ports.js";

const whoamiConfig = (name: string, upstream: string, extra = "") => `
name: "${name}"
backend: "python"
max_batch_size: 8
parameters { key: "engine" value { string_value: "kserve-grpc" } }
parameters { key: "upstream" value { string_value: "${upstream}" } }
parameters { key: "upstream_model" value { string_value: "whoami" } }
${extra}
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "SERVER" data_type: TYPE_STRING dims: [ 1 ] } ]
`;

/** Only how to reach the model: its tensors, batching and readiness are the upstream's. */
const openConfig = (name: string, upstream: string, upstreamModel = "whoami") => `
name: "${name}"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${upstream}" } }
parameters { key: "upstream_model" value { string_value: "${upstreamModel}" } }
`;

const streamConfig = (upstream: string) => `
name: "stream_int32"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
parameters { key: "engine" value { string_value: "kserve-grpc" } }
parameters { key: "upstream" value { string_value: "${upstream}" } }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "DELAY_MS" data_type: TYPE_INT32 dims: [ 1 ] optional: true } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
`;

const whoamiRequest = (model: string, parameters: ModelInferRequest["parameters"] = {}) =>
  inferRequest({
    modelName: model,
    parameters,
    inputs: [{ name: "INPUT0", datatype: "FP32", shape: [1n, 3n], parameters: {}, contents: undefined }],
    rawInputContents: [new Uint8Array(Float32Array.of(1, 2, 3).buffer)],
  });

const serverOf = (reply: ModelInferResponse): string => {
  const index = reply.outputs.findIndex((output) => output.name === "SERVER");
  return new TextDecoder().decode(splitBytesElements(reply.rawOutputContents[index]!)[0]);
};

const streamRequest = (values: number[], delayMs: number) =>
  inferRequest({
    modelName: "stream_int32",
    id: "s",
    inputs: [
      { name: "IN", datatype: "INT32", shape: [BigInt(values.length)], parameters: {}, contents: undefined },
      { name: "DELAY_MS", datatype: "INT32", shape: [1n], parameters: {}, contents: undefined },
    ],
    rawInputContents: [new Uint8Array(Int32Array.from(values).buffer), new Uint8Array(Int32Array.of(delayMs).buffer)],
  });

const outOf = (reply: ModelStreamInferResponse): number => {
  const raw = reply.inferResponse!.rawOutputContents[0]!;
  return new DataView(raw.buffer, raw.byteOffset).getInt32(0, true);
};

/**
 * A KServe v2 upstream whose stream replies every 50 ms until it is cancelled (it never ends
 * on its own), recording when it was cancelled and the deadline each stream came with.
 */
async function slowGrpcUpstream(): Promise<{
  server: Server;
  address: string;
  cancelledAt: number[];
  deadlines: number[];
}> {
  const cancelledAt: number[] = [];
  const deadlines: number[] = [];
  const server = new Server();
  const implementation: Partial<GRPCInferenceServiceServer> = {
    serverLive: (_call, callback) => callback(null, { live: true }),
    modelStreamInfer: (call) => {
      deadlines.push(Number(call.getDeadline()));
      call.on("data", (request: ModelInferRequest) => {
        const timer = setInterval(() => {
          call.write({
            errorMessage: "",
            inferResponse: {
              modelName: request.modelName,
              modelVersion: "1",
              id: request.id,
              parameters: {},
              outputs: [{ name: "OUT", datatype: "INT32", shape: [1n], parameters: {}, contents: undefined }],
              rawOutputContents: [new Uint8Array(Int32Array.of(1).buffer)],
            },
          });
        }, 50);
        call.on("cancelled", () => {
          clearInterval(timer);
          cancelledAt.push(Date.now());
        });
      });
    },
  };
  server.addService(GRPCInferenceServiceService, implementation as GRPCInferenceServiceServer);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return { server, address: `127.0.0.1:${port}`, cancelledAt, deadlines };
}

describe("kserve-grpc engine against real Triton servers (nvidia-pytriton)", function () {
  // Starting (and restarting) Triton takes seconds, more on a busy 2-core machine.
  this.timeout(240_000);
  let peerA: Peer;
  let peerB: Peer;
  let slow: Awaited<ReturnType<typeof slowGrpcUpstream>>;
  let repository: TestRepository;
  let server: ServerProcess;

  before(async function () {
    requireTritonPeers(this);
    [peerA, peerB, slow] = await Promise.all([startTritonPeer("A"), startTritonPeer("B"), slowGrpcUpstream()]);
    repository = new TestRepository({
      whoami: whoamiConfig("whoami", `${peerA.address},${peerB.address}`),
      whoami_least: whoamiConfig(
        "whoami_least",
        `${peerA.address},${peerB.address}`,
        'parameters { key: "routing" value { string_value: "least_outstanding" } }',
      ),
      whoami_missing: whoamiConfig("whoami_missing", peerA.address).replace(
        'string_value: "whoami" }',
        'string_value: "no_such_model" }',
      ),
      stream_int32: streamConfig(peerA.address),
      slow_stream: streamConfig(slow.address).replace('name: "stream_int32"', 'name: "slow_stream"'),
      dead: whoamiConfig("dead", "127.0.0.1:1"),
      whoami_open: openConfig("whoami_open", peerA.address),
      whoami_open_missing: openConfig("whoami_open_missing", peerA.address, "no_such_model"),
      // A DNS name, as a headless Service gives: resolved to its addresses, one channel each.
      whoami_dns: openConfig("whoami_dns", peerB.address.replace("127.0.0.1", "localhost")),
    });
    server = await startServer(["--model-repository", repository.dir]);
  });

  after(async () => {
    await server?.stop();
    repository?.remove();
    slow?.server.forceShutdown();
    await Promise.all([peerA?.kill(), peerB?.kill()]);
  });

  it("forwards ModelInfer and spreads requests round-robin over the upstreams", async () => {
    const servers: string[] = [];
    for (let i = 0; i < 4; i++) {
      const reply = await infer(server.client, whoamiRequest("whoami"));
      assert.deepEqual([...new Float32Array(new Uint8Array(reply.rawOutputContents[0]!).buffer)], [1, 2, 3]);
      assert.equal(reply.modelName, "whoami");
      servers.push(serverOf(reply));
    }
    assert.deepEqual(servers.filter((name) => name === "A").length, 2, servers.join(","));
    assert.notEqual(servers[0], servers[1]);
    const least = await infer(server.client, whoamiRequest("whoami_least"));
    assert.ok(["A", "B"].includes(serverOf(least)));
  });

  it("--forward-unsupported --forward-python: a Triton Python model goes to that Triton, the rest runs here", async () => {
    const triton = new TestRepository({
      // Straight from a Triton repository: a Python model, no engine parameters.
      whoami: whoamiConfig("whoami", "unused")
        .split("\n")
        .filter((line) => !line.includes("parameters"))
        .join("\n"),
    });
    const forwarding = await startServer([
      ...["--model-repository", triton.dir, "--forward-unsupported", peerA.address, "--forward-python"],
    ]);
    try {
      assert.equal(serverOf(await infer(forwarding.client, whoamiRequest("whoami"))), "A");
      // ModelConfig of a forwarded model is Triton's own.
      const { config } = await call(forwarding.client, "modelConfig", { name: "whoami", version: "" });
      assert.equal(config?.backend, "python");
      const local = await infer(forwarding.client, identityRequest());
      assert.equal(local.modelName, "identity_fp32", "identity still runs here");
    } finally {
      await forwarding.stop();
      triton.remove();
    }
  });
  it("keeps a sequence on one upstream", async () => {
    const sequence = { sequence_id: { parameterChoice: { $case: "int64Param" as const, value: 42n } } };
    const servers = new Set<string>();
    for (let i = 0; i < 5; i++) servers.add(serverOf(await infer(server.client, whoamiRequest("whoami", sequence))));
    assert.equal(servers.size, 1);
  });

  it("passes the upstream's status code back unchanged", async () => {
    const viaUs = await callError(server.client, "modelInfer", whoamiRequest("whoami_missing"));
    const direct = new GRPCInferenceServiceClient(peerA.address, credentials.createInsecure());
    const fromTriton = await new Promise<ServiceError>((resolve) =>
      direct.modelInfer({ ...whoamiRequest("no_such_model") }, new Metadata(), (error) => resolve(error!)),
    );
    direct.close();
    assert.equal(viaUs.code, fromTriton.code);
    assert.equal(viaUs.details, fromTriton.details);
  });

  it("passes requests through unchecked when the config declares no tensors", async () => {
    const reply = await infer(server.client, whoamiRequest("whoami_open"));
    assert.equal(reply.modelName, "whoami_open");
    assert.deepEqual([...new Float32Array(new Uint8Array(reply.rawOutputContents[0]!).buffer)], [1, 2, 3]);
    // Typed contents pass too, as they came; the reply is Triton's own (raw bytes).
    const typed = inferRequest({
      modelName: "whoami_open",
      inputs: [
        {
          name: "INPUT0",
          datatype: "FP32",
          shape: [1n, 2n],
          parameters: {},
          contents: { ...emptyContents(), fp32Contents: [7, 8] },
        },
      ],
    });
    const typedReply = await infer(server.client, typed);
    assert.deepEqual([...new Float32Array(new Uint8Array(typedReply.rawOutputContents[0]!).buffer)], [7, 8]);
    // The upstream judges what it receives, and its status comes back unchanged.
    const wrong = await callError(server.client, "modelInfer", {
      ...whoamiRequest("whoami_open"),
      inputs: [{ ...whoamiRequest("x").inputs[0]!, name: "NOPE" }],
    });
    assert.equal(wrong.code, status.INVALID_ARGUMENT);
    assert.match(wrong.details, /NOPE/);
  });

  it("asks the upstream for ModelMetadata, ModelConfig and ModelReady, under this data plane's name", async () => {
    const direct = new GRPCInferenceServiceClient(peerA.address, credentials.createInsecure());
    const ask = <T>(method: "modelMetadata" | "modelConfig", name: string) =>
      new Promise<T>((resolve, reject) =>
        (direct[method] as CallableFunction)({ name, version: "" }, (error: ServiceError | null, reply: T) =>
          error ? reject(error) : resolve(reply),
        ),
      );
    try {
      const upstreamMetadata = await ask<ModelMetadataResponse>("modelMetadata", "whoami");
      const metadata = await call(server.client, "modelMetadata", { name: "whoami_open", version: "" });
      assert.equal(metadata.name, "whoami_open");
      assert.equal(metadata.platform, upstreamMetadata.platform);
      assert.deepEqual(metadata.inputs, upstreamMetadata.inputs);
      assert.deepEqual(metadata.outputs, upstreamMetadata.outputs);
      const upstreamConfig = await ask<{ config: { maxBatchSize: number; backend: string } }>("modelConfig", "whoami");
      const { config } = await call(server.client, "modelConfig", { name: "whoami_open", version: "" });
      assert.equal(config?.name, "whoami_open");
      assert.equal(config?.maxBatchSize, upstreamConfig.config.maxBatchSize);
      assert.equal(config?.backend, upstreamConfig.config.backend);
    } finally {
      direct.close();
    }
    assert.equal((await call(server.client, "modelReady", { name: "whoami_open", version: "" })).ready, true);
    assert.equal((await call(server.client, "modelReady", { name: "whoami_open_missing", version: "" })).ready, false);
    const missing = await callError(server.client, "modelMetadata", { name: "whoami_open_missing", version: "" });
    assert.notEqual(missing.code, status.OK);
    assert.match(missing.details, /no_such_model/);
  });

  it("reaches an upstream named by DNS", async () => {
    const reply = await infer(server.client, whoamiRequest("whoami_dns"));
    assert.equal(serverOf(reply), "B");
  });

  it("streams a decoupled upstream model through ModelStreamInfer", async () => {
    const stream = server.client.modelStreamInfer();
    const replies: ModelStreamInferResponse[] = [];
    await new Promise<void>((resolve, reject) => {
      stream.on("data", (reply: ModelStreamInferResponse) => replies.push(reply));
      stream.on("end", resolve);
      stream.on("error", reject);
      stream.write(streamRequest([5, 6, 7], 0));
      stream.end();
    });
    assert.deepEqual(
      replies.map((reply) => reply.errorMessage),
      ["", "", ""],
    );
    assert.deepEqual(replies.map(outOf), [5, 6, 7]);
    assert.ok(replies.every((reply) => reply.inferResponse?.id === "s"));
  });

  it("answers UNAVAILABLE naming the upstream when none is reachable, and reports the model not ready", async () => {
    const error = await callError(server.client, "modelInfer", whoamiRequest("dead"));
    assert.equal(error.code, status.UNAVAILABLE);
    assert.match(error.details, /model 'dead'.*127\.0\.0\.1:1/);
    await eventually(async () =>
      assert.equal((await call(server.client, "modelReady", { name: "dead", version: "" })).ready, false),
    );
  });

  it("cancels the upstream stream when the client cancels", async () => {
    const stream = server.client.modelStreamInfer();
    stream.on("error", () => undefined);
    await new Promise<void>((resolve) => {
      stream.on("data", () => resolve());
      stream.write({ ...streamRequest([1], 0), modelName: "slow_stream" });
    });
    const before = slow.cancelledAt.length;
    const cancelledAt = Date.now();
    stream.cancel();
    // The upstream streams until cancelled: a cancel it sees at all came from the client's.
    await eventually(() => assert.ok(slow.cancelledAt.length > before), 10_000, 5);
    console.log(`      client cancel -> upstream cancelled: ${slow.cancelledAt[before]! - cancelledAt} ms`);
  });

  it("answers DEADLINE_EXCEEDED when the client's deadline passes; the upstream stream carried that deadline and stops", async () => {
    const before = slow.cancelledAt.length;
    const deadline = Date.now() + 500;
    const stream = server.client.modelStreamInfer({ deadline });
    const ended = new Promise<ServiceError>((resolve) => stream.on("error", resolve));
    stream.on("data", () => undefined);
    stream.write({ ...streamRequest([1], 0), modelName: "slow_stream" });
    const error = await ended;
    assert.equal(error.code, status.DEADLINE_EXCEEDED);
    await eventually(() => assert.ok(slow.cancelledAt.length > before), 10_000, 5);
    console.log(`      deadline -> upstream cancelled: ${slow.cancelledAt[before]! - deadline} ms`);
    // The deadline went upstream with the request: gRPC sends it as time left, so each hop's
    // transit moves it later (never earlier than the client's; without it, none: Infinity).
    const upstreamDeadline = slow.deadlines.at(-1)!;
    assert.ok(
      upstreamDeadline >= deadline - 5 && upstreamDeadline < deadline + 1000,
      `upstream deadline ${upstreamDeadline - deadline} ms after the client's`,
    );
  });

  it("fails fast when the upstream dies mid-stream, and recovers when it is back", async () => {
    const stream = server.client.modelStreamInfer();
    const replies: ModelStreamInferResponse[] = [];
    let killedAt = 0;
    const failed = new Promise<number>((resolve, reject) => {
      stream.on("data", (reply: ModelStreamInferResponse) => {
        replies.push(reply);
        if (reply.errorMessage !== "") resolve(Date.now());
        else if (replies.length === 2) {
          killedAt = Date.now();
          void peerA.kill();
        }
      });
      stream.on("error", reject);
      setTimeout(() => reject(new Error(`no error ${Date.now() - killedAt} ms after the kill`)), 30_000).unref();
    });
    stream.write(streamRequest([1, 2, 3, 4, 5, 6, 7, 8], 300));
    const failedAt = await failed;
    stream.end();
    const last = replies.at(-1)!;
    assert.match(last.errorMessage, /upstream 127\.0\.0\.1:\d+ is unavailable/);
    assert.ok(failedAt - killedAt < 5000, `error after ${failedAt - killedAt} ms`);
    await peerA.restart();
    await eventually(
      async () => {
        const replies2: ModelStreamInferResponse[] = [];
        const again = server.client.modelStreamInfer();
        await new Promise<void>((resolve, reject) => {
          again.on("data", (reply: ModelStreamInferResponse) => replies2.push(reply));
          again.on("end", resolve);
          again.on("error", reject);
          again.write(streamRequest([9], 0));
          again.end();
        });
        assert.deepEqual(replies2.map(outOf), [9]);
      },
      60_000,
      500,
    );
  });

  it("fails over to the healthy upstream when one dies, and uses it again when it is back", async () => {
    await peerB.kill();
    for (let i = 0; i < 4; i++) assert.equal(serverOf(await infer(server.client, whoamiRequest("whoami"))), "A");
    await peerB.restart();
    await eventually(
      async () => {
        const seen = new Set<string>();
        for (let i = 0; i < 4; i++) seen.add(serverOf(await infer(server.client, whoamiRequest("whoami"))));
        assert.deepEqual([...seen].sort(), ["A", "B"]);
      },
      60_000,
      500,
    );
  });
});

describe("kserve-grpc engine: an upstream that goes away and comes back", function () {
  // An outage of 20 s, two data plane starts, and the recovery itself.
  this.timeout(120_000);
  let upstreamPort: number;
  let upstream: ServerProcess;
  let repository: TestRepository;
  let server: ServerProcess;

  /** A data plane serving the bundled examples, as the forwarded model's upstream, always on the same port. */
  const startUpstream = (): Promise<ServerProcess> => startServer(["--grpc-port", String(upstreamPort)]);

  before(async () => {
    upstreamPort = await freePort();
    upstream = await startUpstream();
    repository = new TestRepository({
      forwarded: openConfig("forwarded", `127.0.0.1:${upstreamPort}`, "identity_fp32"),
    });
    server = await startServer(["--model-repository", repository.dir]);
  });

  after(async () => {
    await server?.stop();
    await upstream?.stop();
    repository?.remove();
  });

  it("is ready again within seconds of its upstream's restart after a 20 s outage", async () => {
    const ready = async (): Promise<boolean> =>
      (await call(server.client, "modelReady", { name: "forwarded", version: "" })).ready;
    await infer(server.client, identityRequest({ model: "forwarded" }));
    await upstream.stop("SIGKILL");
    // Clients keep asking through the outage, as they do during a roll-out: each failure is seen.
    const outageEnds = Date.now() + 20_000;
    while (Date.now() < outageEnds) {
      await callError(server.client, "modelInfer", identityRequest({ model: "forwarded" }));
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.equal(await ready(), false, "the model is not ready while its upstream is down");
    upstream = await startUpstream();
    // Its readiness comes back by itself (ModelReady of a model known down does not ask the upstream).
    const restartedAt = Date.now();
    await eventually(async () => assert.equal(await ready(), true), 90_000, 100);
    const readyAfter = Date.now() - restartedAt;
    console.log(`      upstream restarted -> model ready: ${readyAfter} ms`);
    assert.ok(readyAfter < 5000, `ready ${readyAfter} ms after the upstream was back`);
    await infer(server.client, identityRequest({ model: "forwarded" }));
  });
});

/** Replies an upstream may lie with, chosen by the request's id: each is wrong for its own datatype and shape, or for the declared output. */
const LIES: Readonly<Record<string, (request: ModelInferRequest) => ModelInferResponse>> = {
  "short-raw": (request) => ({
    ...replyTo(request),
    outputs: [{ name: "OUT", datatype: "FP32", shape: [1000n], parameters: {}, contents: undefined }],
    rawOutputContents: [new Uint8Array(4)],
  }),
  "short-typed": (request) => ({
    ...replyTo(request),
    outputs: [
      {
        name: "OUT",
        datatype: "FP32",
        shape: [1000n],
        parameters: {},
        contents: { ...emptyContents(), fp32Contents: [1] },
      },
    ],
  }),
  "not-declared-datatype": (request) => ({
    ...replyTo(request),
    outputs: [{ name: "OUT", datatype: "FP64", shape: [1n], parameters: {}, contents: undefined }],
    rawOutputContents: [new Uint8Array(8)],
  }),
};

const replyTo = (request: ModelInferRequest): ModelInferResponse => ({
  modelName: request.modelName,
  modelVersion: "1",
  id: request.id,
  parameters: {},
  outputs: [],
  rawOutputContents: [],
});

/** A KServe v2 upstream that answers every ModelInfer with the lie its id names. */
async function lyingUpstream(): Promise<{ server: Server; address: string }> {
  const server = new Server();
  const implementation: Partial<GRPCInferenceServiceServer> = {
    serverLive: (_call, callback) => callback(null, { live: true }),
    modelInfer: (call, callback) => callback(null, LIES[call.request.id]!(call.request)),
  };
  server.addService(GRPCInferenceServiceService, implementation as GRPCInferenceServiceServer);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return { server, address: `127.0.0.1:${port}` };
}

describe("kserve-grpc engine: an upstream whose replies are wrong", function () {
  this.timeout(30_000);
  let liar: Awaited<ReturnType<typeof lyingUpstream>>;
  let repository: TestRepository;
  let server: ServerProcess;

  before(async () => {
    liar = await lyingUpstream();
    repository = new TestRepository({
      liar: `
name: "liar"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${liar.address}" } }
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
`,
    });
    server = await startServer(["--model-repository", repository.dir]);
  });

  after(async () => {
    await server?.stop();
    liar?.server.forceShutdown();
    repository?.remove();
  });

  const request = (id: string): ModelInferRequest =>
    inferRequest({
      modelName: "liar",
      id,
      inputs: [{ name: "IN", datatype: "FP32", shape: [1n], parameters: {}, contents: undefined }],
      rawInputContents: [new Uint8Array(4)],
    });

  for (const lie of Object.keys(LIES)) {
    it(`answers a server-side error naming the output and the upstream: ${lie}`, async () => {
      const error = await callError(server.client, "modelInfer", request(lie));
      assert.equal(status[error.code], "INTERNAL", error.details);
      assert.match(error.details, /'OUT'/);
      assert.ok(error.details.includes(liar.address), error.details);
      const http = await fetch(`http://127.0.0.1:${server.httpPort}/v2/models/liar/infer`, {
        method: "POST",
        body: JSON.stringify({ id: lie, inputs: [{ name: "IN", datatype: "FP32", shape: [1], data: [0] }] }),
      });
      const body = (await http.json()) as { error: string };
      assert.equal(http.status, 500, body.error);
      assert.match(body.error, /'OUT'/);
    });
  }
});

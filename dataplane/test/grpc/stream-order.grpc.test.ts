import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { InferParameter, ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import type { SequenceId } from "../../src/tensors/parameters.js";
import { REPO_ROOT } from "../fixtures/paths.js";
import {
  MODELS_PYTHON,
  requireTritonPeers,
  requireTritonServer,
  startTritonServer,
  type Peer,
} from "../fixtures/peers.js";
import { inferRequest, startServer, streamTimed, type ServerProcess } from "../fixtures/server.js";

/**
 * Sequence order on ModelStreamInfer (Triton reads a stream in order and runs one request of
 * a sequence at a time): the requests of one sequence on a stream reach the model, and are
 * answered, in the order they were sent, while different sequences run at the same time.
 * The models (dataplane/test/python-order/) sleep a random 0-20 ms and say when each request
 * arrived. Locally, order_probe has three instances and no sequence batching: only the
 * stream's order keeps a sequence in line. Forwarded, Triton's sequence batcher refuses a
 * request that overtakes its sequence's START ("must specify the START flag").
 */

const PYTHON_ORDER = join(REPO_ROOT, "dataplane", "test", "python-order");
const REQUESTS_PER_SEQUENCE = 50;

const idParameter = (id: SequenceId): InferParameter => ({
  parameterChoice:
    id.kind === "uint" ? { $case: "int64Param", value: id.value } : { $case: "stringParam", value: id.value },
});
const flag = (value: boolean): InferParameter => ({ parameterChoice: { $case: "boolParam", value } });

/**
 * Three sequences, new IDs each run: the integer n, the string "n" (a different sequence) and
 * the integer n + 1. Interleaved on the stream as a client of three sessions sends them.
 */
function interleavedSequences(model: string, run: number): { requests: ModelInferRequest[]; labels: string[] } {
  const base = BigInt(Date.now()) * 100n + BigInt(run) * 2n;
  const ids: SequenceId[] = [
    { kind: "uint", value: base },
    { kind: "string", value: String(base) },
    { kind: "uint", value: base + 1n },
  ];
  const labels = ids.map((id) => `${id.kind}:${id.value}`);
  const requests: ModelInferRequest[] = [];
  for (let index = 0; index < REQUESTS_PER_SEQUENCE; index++) {
    for (const [sequence, id] of ids.entries()) {
      const parameters: Record<string, InferParameter> = { sequence_id: idParameter(id) };
      if (index === 0) parameters["sequence_start"] = flag(true);
      if (index === REQUESTS_PER_SEQUENCE - 1) parameters["sequence_end"] = flag(true);
      const raw = Buffer.alloc(4);
      raw.writeInt32LE(index);
      requests.push(
        inferRequest({
          modelName: model,
          id: `${labels[sequence]}/${index}`,
          parameters,
          inputs: [{ name: "INDEX", datatype: "INT32", shape: [1n], parameters: {}, contents: undefined }],
          rawInputContents: [raw],
        }),
      );
    }
  }
  return { requests, labels };
}

/** What the model said of one request. */
interface Seen {
  readonly index: number;
  readonly arrival: number;
  readonly arrivedNs: bigint;
}

function seenIn(response: ModelInferResponse): Seen {
  const raw = (name: string): Buffer => {
    const position = response.outputs.findIndex((output) => output.name === name);
    assert.ok(position >= 0, `output ${name} in ${JSON.stringify(response.outputs.map(({ name }) => name))}`);
    return Buffer.from(response.rawOutputContents[position]!);
  };
  return {
    index: raw("INDEX_OUT").readInt32LE(0),
    arrival: raw("ARRIVAL").readInt32LE(0),
    arrivedNs: raw("ARRIVED_NS").readBigInt64LE(0),
  };
}

/**
 * Sends the three sequences on one stream and checks, per sequence: no error, responses in
 * the order sent, arrivals at the model in the order sent (by time, and by count where one
 * instance holds the sequence); and that the sequences overlapped in time at the model.
 */
async function checkOrder(server: ServerProcess, model: string, run: number, countsArrivals: boolean): Promise<void> {
  const { requests, labels } = interleavedSequences(model, run);
  const replies = await streamTimed(server.client, requests);
  const errors = replies.filter(({ reply }) => reply.errorMessage !== "").map(({ reply }) => reply.errorMessage);
  assert.deepEqual(errors, [], `run ${run}: no request refused`);
  assert.equal(replies.length, requests.length);
  const spans: { first: bigint; last: bigint }[] = [];
  for (const label of labels) {
    const answered = replies
      .map(({ reply }) => reply.inferResponse!)
      .filter((response) => response.id.startsWith(`${label}/`))
      .map((response) => ({ id: response.id, ...seenIn(response) }));
    const sent = Array.from({ length: REQUESTS_PER_SEQUENCE }, (_, index) => index);
    assert.deepEqual(
      answered.map(({ index }) => index),
      sent,
      `run ${run}, sequence ${label}: responses in the order sent`,
    );
    assert.deepEqual(
      answered.map(({ id }) => id),
      sent.map((index) => `${label}/${index}`),
    );
    const byArrival = [...answered].sort((a, b) =>
      a.arrivedNs < b.arrivedNs ? -1 : a.arrivedNs > b.arrivedNs ? 1 : 0,
    );
    assert.deepEqual(
      byArrival.map(({ index }) => index),
      sent,
      `run ${run}, sequence ${label}: requests reached the model in the order sent`,
    );
    if (countsArrivals) {
      assert.deepEqual(
        answered.map(({ arrival }) => arrival),
        sent.map((index) => index + 1),
        `run ${run}, sequence ${label}: the model counted its requests in order`,
      );
    }
    spans.push({ first: byArrival[0]!.arrivedNs, last: byArrival.at(-1)!.arrivedNs });
  }
  // Concurrent, not one sequence after another: every sequence started before any ended.
  const latestFirst = spans.reduce((latest, { first }) => (first > latest ? first : latest), 0n);
  const earliestLast = spans.reduce((earliest, { last }) => (last < earliest ? last : earliest), spans[0]!.last);
  assert.ok(
    latestFirst < earliestLast,
    `run ${run}: the sequences overlapped in time (${JSON.stringify(spans.map(({ first, last }) => [String(first), String(last)]))})`,
  );
}

describe("sequence order on a ModelStreamInfer stream", function () {
  this.timeout(300_000);

  describe("local Python models (three instances each)", () => {
    let server: ServerProcess;

    before(async function () {
      requireTritonPeers(this); // the interpreter with numpy that runs Python models
      server = await startServer([
        ...["--model-repository", PYTHON_ORDER, "--python", MODELS_PYTHON],
        ...["--model-control-mode", "explicit", "--load-model", "order_probe", "--load-model", "order_sequence"],
      ]);
    });
    after(async () => {
      await server?.stop();
    });

    it("without sequence batching: 3 sequences x 50 requests each in order, reaching the model and answered, while they overlap", async () => {
      for (let run = 0; run < 3; run++) await checkOrder(server, "order_probe", run, false);
    });

    it("with sequence batching: the same, each sequence counted in order on its slot's instance, never refused for a missing START", async () => {
      for (let run = 0; run < 5; run++) await checkOrder(server, "order_sequence", run, true);
    });

    it("answers a request with malformed sequence parameters with Triton's error, and serves the next", async () => {
      const [good] = interleavedSequences("order_probe", 99).requests;
      const malformed = {
        ...good!,
        id: "malformed",
        parameters: { sequence_start: { parameterChoice: { $case: "int64Param" as const, value: 1n } } },
      };
      const replies = await streamTimed(server.client, [malformed, good!]);
      assert.deepEqual(
        replies.map(({ reply }) => [reply.inferResponse?.id, reply.errorMessage]),
        [
          ["malformed", "invalid value type for 'sequence_start' parameter, expected bool_param."],
          [good!.id, ""],
        ],
      );
    });
  });

  describe("forwarded (kserve-grpc) to Triton's sequence batcher", () => {
    let triton: Peer | undefined;
    let server: ServerProcess | undefined;
    let forwarding: string | undefined;

    before(async function () {
      requireTritonPeers(this);
      requireTritonServer(this);
      triton = await startTritonServer([PYTHON_ORDER], {}, [
        ...["--model-control-mode", "explicit", "--load-model", "order_sequence"],
      ]);
      forwarding = mkdtempSync(join(tmpdir(), "dynamo-kserve-order-"));
      mkdirSync(join(forwarding, "order_forwarded", "1"), { recursive: true });
      writeFileSync(
        join(forwarding, "order_forwarded", "config.pbtxt"),
        `name: "order_forwarded"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${triton.address}" } }
parameters { key: "upstream_model" value { string_value: "order_sequence" } }
`,
      );
      server = await startServer(["--model-repository", forwarding]);
    });
    after(async () => {
      await server?.stop();
      await triton?.kill();
      if (forwarding !== undefined) rmSync(forwarding, { recursive: true, force: true });
    });

    it("20 runs of 3 sequences x 50 requests: in order, never refused for a missing START", async () => {
      for (let run = 0; run < 20; run++) await checkOrder(server!, "order_forwarded", run, true);
    });
  });
});

import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import fc from "fast-check";
import assert from "node:assert/strict";
import type { ModelInferRequest } from "../../../proto/gen/ts/grpc_service.js";
import { HealthTestClient } from "../fixtures/health.js";
import { MODELS_PYTHON, requireTritonPeers } from "../fixtures/peers.js";
import { misbehave, PYTHON_MODELS } from "../fixtures/python-models.js";
import { addSubRequest } from "../fixtures/requests.js";
import { call, eventually, infer, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * The fuzz tier's Python models that misbehave: batches of requests that make
 * dataplane/test/python-models/misbehaves answer badly at random (parameters JSON cannot
 * carry, a numpy scalar parameter, outputs its config does not declare, a frame the data
 * plane cannot read, printing in a loop, raising, exiting), sent beside requests of a
 * well-behaved model (add_sub). Each bad answer must be that request's error (INTERNAL, or
 * UNAVAILABLE while the instance restarts); the data plane must stay up, and every add_sub
 * request be answered correctly. Seeded: FUZZ_SEED (default 15), FUZZ_RUNS (batches,
 * default 600, of which a fortieth here: each batch may restart a process).
 */

const SEED = Number(process.env["FUZZ_SEED"] ?? 15);
const RUNS = Math.max(5, Math.ceil(Number(process.env["FUZZ_RUNS"] ?? 600) / 40));

/** What misbehaves does when asked (its model.py), and the codes it may be answered with. */
const BEHAVIOURS: readonly { how: fc.Arbitrary<string>; codes: readonly status[]; weight: number }[] = [
  {
    how: fc.constantFrom("nan", "inf", "nan_late", "np_int", "bls_nan", "nan_large", "large_then_bad"),
    codes: [status.INTERNAL],
    weight: 4,
  },
  { how: fc.constantFrom("wrong_name", "wrong_datatype", "wrong_shape", "raise"), codes: [status.INTERNAL], weight: 4 },
  // Rarer: each takes the process down, and its restarts back off (1 s, 2 s, 4 s, ...).
  { how: fc.constantFrom("garbage", "exit"), codes: [status.UNAVAILABLE], weight: 1 },
  {
    how: fc.double({ min: 0.05, max: 0.5, noNaN: true }).map((seconds) => `print ${seconds}`),
    codes: [status.OK],
    weight: 2,
  },
  { how: fc.constant("pid"), codes: [status.OK], weight: 2 },
];
const hostile = fc.oneof(
  ...BEHAVIOURS.map(({ how, codes, weight }) => ({
    arbitrary: how.map((text) => ({ how: text, codes: [...codes, status.UNAVAILABLE] })),
    weight,
  })),
);

/** add_sub (the Python model) of [4] elements: INPUT0 = 0, 1, 2, 3 and INPUT1 = ones. */
const ADD_SUB = addSubRequest("add_sub", [4n]);

/** The code a request is answered with. */
function codeOf(server: ServerProcess, message: ModelInferRequest): Promise<ServiceError | undefined> {
  return new Promise((resolve) =>
    server.client.modelInfer(message, new Metadata(), { deadline: Date.now() + 30_000 }, (error) =>
      resolve(error ?? undefined),
    ),
  );
}

/** add_sub answers correctly: [1, 2, 3, 4] and [-1, 0, 1, 2]. */
async function assertAddSub(server: ServerProcess): Promise<void> {
  const reply = await infer(server.client, ADD_SUB);
  const [sum, difference] = reply.rawOutputContents.map((raw) => [...new Float32Array(new Uint8Array(raw).buffer)]);
  assert.deepEqual(sum, [1, 2, 3, 4]);
  assert.deepEqual(difference, [-1, 0, 1, 2]);
}

describe(`fuzz: Python models that misbehave (seed ${SEED}, ${RUNS} batches)`, function () {
  this.timeout(Math.max(180_000, RUNS * 20_000));
  let server: ServerProcess;
  let health: HealthTestClient;
  const tally = new Map<string, number>();
  before(async function () {
    requireTritonPeers(this);
    server = await startServer([
      ...["--model-repository", PYTHON_MODELS, "--python", MODELS_PYTHON, "--model-control-mode", "explicit"],
      ...["--load-model", "misbehaves", "--load-model", "add_sub", "--python-stub-timeout-secs", "2"],
    ]);
    health = new HealthTestClient(`127.0.0.1:${server.grpcPort}`);
  });
  after(async () => {
    health?.close();
    await server?.stop();
    const codes = [...tally].sort((a, b) => b[1] - a[1]).map(([code, n]) => `${code} ${n}`);
    console.log(`      fuzz: seed ${SEED}: misbehaves answered ${codes.join(", ")}`);
  });

  it("answers each bad answer as that request's error, stays up, and keeps answering another model's clients", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(hostile, { minLength: 1, maxLength: 6 }), async (batch) => {
        // A batch after a crash finds the model back (else it would only ever meet UNAVAILABLE).
        await eventually(async () => {
          assert.ok((await call(server.client, "modelReady", { name: "misbehaves", version: "" })).ready);
        }, 40_000);
        const [outcomes] = await Promise.all([
          Promise.all(batch.map(({ how }) => codeOf(server, misbehave(how)))),
          Promise.all([1, 2, 3, 4].map(() => assertAddSub(server))),
        ]);
        outcomes.forEach((error, index) => {
          const { how, codes } = batch[index]!;
          const code = error?.code ?? status.OK;
          tally.set(status[code], (tally.get(status[code]) ?? 0) + 1);
          assert.ok(codes.includes(code), `'${how}' answered ${status[code]}: ${error?.details ?? ""}`);
        });
        assert.equal(server.process.exitCode, null, "the data plane exited");
        assert.equal(await health.check(""), "SERVING");
        await assertAddSub(server);
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });
});

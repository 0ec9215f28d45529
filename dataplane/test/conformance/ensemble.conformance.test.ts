import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { requireProgram, TOOLS_PYTHON } from "../../../e2e/support/prerequisites.js";
import { ENSEMBLE_FAILING, ENSEMBLE_PYTHON, ensemblePythonOutputs, ensembleRepository } from "../fixtures/ensembles.js";
import { clientChecks } from "../fixtures/client-checks.js";
import {
  MODELS_PYTHON,
  requireTritonPeers,
  requireTritonServer,
  startTritonServer,
  type Peer,
} from "../fixtures/peers.js";
import { PYTHON_MODELS } from "../fixtures/python-models.js";
import { startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * The same ensembles of Python steps (the same config.pbtxt and model.py files) served by a
 * real Triton (its ensemble scheduler and Python backend) and by this data plane:
 * tritonclient must see the same outputs and errors.
 */

const checks = (grpc: string, http: string): Promise<unknown> => clientChecks("ensemble_checks.py", grpc, http);

describe("ensembles beside a real Triton running the same configs", function () {
  this.timeout(180_000);
  let ours: ServerProcess | undefined;
  let triton: (Peer & { readonly httpAddress: string }) | undefined;
  let repository: string | undefined;

  before(async function () {
    requireProgram(this, TOOLS_PYTHON, "the tritonclient venv", "run scripts/setup-python.sh");
    requireTritonPeers(this);
    requireTritonServer(this);
    repository = ensembleRepository({ ensemble_python: ENSEMBLE_PYTHON, ensemble_failing: ENSEMBLE_FAILING });
    [ours, triton] = await Promise.all([
      startServer(["--model-repository", repository, "--model-repository", PYTHON_MODELS, "--python", MODELS_PYTHON]),
      startTritonServer([repository, PYTHON_MODELS]),
    ]);
  });
  after(async () => {
    await ours?.stop();
    await triton?.kill();
    if (repository !== undefined) rmSync(repository, { recursive: true, force: true });
  });

  it("gives tritonclient (gRPC and HTTP) the same outputs and error codes as Triton", async () => {
    const [mine, theirs] = await Promise.all([
      checks(`127.0.0.1:${ours!.grpcPort}`, `127.0.0.1:${ours!.httpPort}`),
      checks(triton!.address, triton!.httpAddress),
    ]);
    assert.deepEqual(mine, theirs);
    // And they are what the graph computes (not two servers failing alike).
    const results = mine as Record<string, { outputs?: Record<string, number[]>; error?: string }>;
    assert.deepEqual(
      results["grpc ensemble_python"]?.outputs,
      ensemblePythonOutputs([1.5, -2, 3, 4], [10, 20, -30, 0.25]),
    );
    assert.deepEqual(Object.keys(results["http ensemble_python DIFF only"]?.outputs ?? {}), ["DIFF"]);
    assert.ok(results["grpc ensemble_failing"]?.error, "the failing step fails the request");
  });
});

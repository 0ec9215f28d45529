import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SEQUENCE_WORKERS_REASON } from "../../../lib/model-repository/sequence-batching.js";
import { splitBytesElements } from "../../src/tensors/bytes.js";
import {
  MODELS_PYTHON,
  requireTritonPeers,
  requireTritonServer,
  startTritonServer,
  type Peer,
} from "../fixtures/peers.js";
import { call, eventually, infer, inferRequest, startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * --forward-unsupported in front of a real Triton: a Python model with a feature the python
 * engine lacks (implicit sequence state) goes to the Triton, and the log says why, once; a
 * Python sequence model without it stays here.
 */

/** A Python sequence model (with `state` or without) that answers INPUT and the names of the inputs it was given. */
const sequenceModel = (name: string, state: string): string => `
name: "${name}"
backend: "python"
max_batch_size: 2
sequence_batching {
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]
  ${state}
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "INPUTS" data_type: TYPE_STRING dims: [ 1 ] } ]
`;

const STATE = 'state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]';

const MODEL_PY = `import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            names = ",".join(sorted(tensor.name() for tensor in request.inputs()))
            inputs = np.array([[names.encode()]] * value.shape[0], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", value), pb_utils.Tensor("INPUTS", inputs)]))
        return responses
`;

const STATE_REASON =
  "sequence_batching.state: Triton's Python backend does not support implicit state (Triton's docs: the onnxruntime, TensorRT and PyTorch backends only); keep the state in the model, keyed by request.correlation_id()";

/** A model repository holding `models` (name -> config), each with the model.py above. */
function repositoryOf(models: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "dynamo-kserve-forwarding-"));
  for (const [name, config] of Object.entries(models)) {
    mkdirSync(join(root, name, "1"), { recursive: true });
    writeFileSync(join(root, name, "config.pbtxt"), config);
    writeFileSync(join(root, name, "1", "model.py"), MODEL_PY);
  }
  return root;
}

/** A sequence's first request: INPUT 7, sequence 5, START. */
const startRequest = (model: string) =>
  inferRequest({
    modelName: model,
    parameters: {
      sequence_id: { parameterChoice: { $case: "int64Param", value: 5n } },
      sequence_start: { parameterChoice: { $case: "boolParam", value: true } },
    },
    inputs: [{ name: "INPUT", datatype: "INT32", shape: [1n, 1n], parameters: {}, contents: undefined }],
    rawInputContents: [new Uint8Array(Int32Array.of(7).buffer)],
  });

/**
 * Mocha hooks: a Triton serving `tritonModels` (name -> config), and a data plane over `models`
 * started with `args` that forwards to it (--forward-unsupported); both gone after the suite.
 */
function forwardingToTriton(
  tritonModels: Record<string, string>,
  models: Record<string, string>,
  args: readonly string[] = [],
): { readonly triton: Peer; readonly server: ServerProcess } {
  const roots: string[] = [];
  let triton: Peer | undefined;
  let server: ServerProcess | undefined;
  before(async function () {
    requireTritonServer(this);
    requireTritonPeers(this);
    roots.push(repositoryOf(tritonModels), repositoryOf(models));
    triton = await startTritonServer([roots[0]!]);
    server = await startServer([
      ...args,
      ...["--model-repository", roots[1]!, "--python", MODELS_PYTHON],
      ...["--forward-unsupported", triton.address],
    ]);
  });
  after(async () => {
    await server?.stop();
    await triton?.kill();
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });
  return {
    get triton() {
      return triton!;
    },
    get server() {
      return server!;
    },
  };
}

describe("--forward-unsupported: what is forwarded to Triton, and why", function () {
  this.timeout(120_000);
  // Triton serves only the stateful model: a forwarded `sequences` could not be ready.
  const serving = forwardingToTriton(
    { stateful: sequenceModel("stateful", STATE) },
    { stateful: sequenceModel("stateful", STATE), sequences: sequenceModel("sequences", "") },
  );

  const forwardingLines = (): string[] =>
    serving.server.logs.map((line) => String(line["msg"])).filter((message) => / forwarded to /.test(message));

  it("forwards a Python model with implicit state, and logs why once", async () => {
    const ready = async (): Promise<void> => {
      const { ready } = await call(serving.server.client, "modelReady", { name: "stateful", version: "" });
      assert.ok(ready, "stateful is ready");
    };
    await eventually(ready);
    assert.deepEqual(forwardingLines(), [`model 'stateful' forwarded to ${serving.triton.address}: ${STATE_REASON}`]);
    const line = serving.server.logs.find((entry) => String(entry["msg"]).startsWith("model 'stateful' forwarded"));
    assert.equal(line?.["reason"], STATE_REASON);
    assert.equal(line?.["upstream"], serving.triton.address);
    // Triton ran it: its sequence batcher gave the model the state input as well as the control.
    const reply = await infer(serving.server.client, startRequest("stateful"));
    const inputs = reply.outputs.findIndex((output) => output.name === "INPUTS");
    assert.equal(
      Buffer.from(splitBytesElements(reply.rawOutputContents[inputs]!)[0]!).toString(),
      "INPUT,START,STATE_IN",
    );
  });

  it("keeps a Python sequence model without state here (ready, though the Triton has no such model)", async () => {
    // Only that it is not forwarded: it runs in this data plane's python engine, whose
    // sequence scheduler is another task's (requests are not sent to it here).
    await eventually(async () => {
      const { ready } = await call(serving.server.client, "modelReady", { name: "sequences", version: "" });
      assert.ok(ready, "sequences is ready");
    });
    assert.ok(!forwardingLines().some((message) => message.includes("'sequences'")), forwardingLines().join("\n"));
  });
});

describe("--forward-unsupported with --grpc-workers 2: a sequence model is forwarded, saying why", function () {
  this.timeout(120_000);
  const serving = forwardingToTriton(
    { sequences: sequenceModel("sequences", "") },
    { sequences: sequenceModel("sequences", "") },
    ["--grpc-workers", "2"],
  );

  it("sends it to the Triton, which keeps each sequence in one place, and logs the reason", async () => {
    await eventually(async () => {
      const { ready } = await call(serving.server.client, "modelReady", { name: "sequences", version: "" });
      assert.ok(ready, "sequences is ready");
    });
    const reply = await infer(serving.server.client, startRequest("sequences"));
    const inputs = reply.outputs.findIndex((output) => output.name === "INPUTS");
    assert.equal(Buffer.from(splitBytesElements(reply.rawOutputContents[inputs]!)[0]!).toString(), "INPUT,START");
    const line = serving.server.logs.find((entry) => String(entry["msg"]).startsWith("model 'sequences' forwarded"));
    assert.equal(line?.["reason"], SEQUENCE_WORKERS_REASON);
  });
});

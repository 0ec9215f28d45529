import assert from "node:assert/strict";
import { join } from "node:path";
import { CACHE_DIR, requireProgram } from "../../../e2e/support/prerequisites.js";
import { REPO_ROOT } from "../fixtures/paths.js";
import { runProgram } from "../fixtures/programs.js";
import { TestRepository } from "../fixtures/repository.js";
import { startServer, type ServerProcess } from "../fixtures/server.js";

const PYTHON = join(process.env["DYNAMO_KSERVE_VENV"] ?? join(CACHE_DIR, "venv"), "bin", "python");
const CLIENT = join(REPO_ROOT, "dataplane", "test", "clients", "max_client.py");

/** A mock LLM that answers in one response (MAX's unary ModelInfer), beside the bundled examples. */
const WHOLE_ANSWER_LLM = `
name: "whole_llm"
backend: "mocker"
parameters { key: "ttft_ms" value { string_value: "0" } }
parameters { key: "itl_ms" value { string_value: "0" } }
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]
`;

interface Unary {
  readonly call: "ModelInfer";
  readonly name: string;
  readonly datatype: string;
  readonly text: string;
}
interface Streamed {
  readonly call: "ModelInferStream";
  readonly responses: number;
  readonly text: string;
  readonly datatypes: string[];
}

describe("Modular MAX's KServe gRPC clients (prompt as character codes, ModelInferStream in the standard service)", function () {
  this.timeout(120_000);
  let server: ServerProcess;
  let repository: TestRepository;

  before(async function () {
    requireProgram(this, PYTHON, "the tritonclient venv", "run scripts/setup-python.sh");
    repository = new TestRepository({ whole_llm: WHOLE_ANSWER_LLM });
    server = await startServer(["--model-repository", repository.dir]);
  });
  after(async () => {
    await server?.stop();
    repository?.remove();
  });

  /** MAX's client: ModelInfer on whole_llm, ModelInferStream on `streamModel`; what each got. */
  const maxClient = async (streamModel: string): Promise<[Unary, Streamed]> => {
    const { code, output } = await runProgram(PYTHON, [
      CLIENT,
      `127.0.0.1:${server.grpcPort}`,
      "whole_llm",
      streamModel,
    ]);
    assert.equal(code, 0, output);
    return output
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Unary | Streamed) as [Unary, Streamed];
  };

  it('answers ModelInfer and ModelInferStream in character codes, model_version "0" naming the served version', async () => {
    const [unary, streamed] = await maxClient("mock_llm");
    assert.deepEqual([unary.name, unary.datatype], ["text_output", "INT32"]);
    assert.equal(unary.text.trim().split(/\s+/).length, 4, unary.text);
    // The decoupled mock: one response per token, max_tokens read from the string parameter.
    assert.equal(streamed.responses, 5);
    assert.deepEqual(streamed.datatypes, ["INT32"]);
    assert.equal(streamed.text.trim().split(/\s+/).length, 5, streamed.text);
  });

  it("answers ModelInferStream on TensorRT-LLM's layout (mock_llm_trtllm): max_tokens, a required input, from the parameter", async () => {
    const [, streamed] = await maxClient("mock_llm_trtllm");
    // The layout without `stream`: one whole answer, the prompt first (no exclude_input_in_output).
    assert.equal(streamed.responses, 1);
    assert.match(streamed.text, /^What is life\? /);
    assert.equal(streamed.text.slice("What is life? ".length).split(/\s+/).length, 5, streamed.text);
  });
});

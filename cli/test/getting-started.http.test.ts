import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { codeBlocks, shellCommands } from "../../e2e/support/docs.js";
import { requireProgram } from "../../e2e/support/prerequisites.js";
import { EXAMPLES, REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import { startServer, type ServerProcess } from "../../dataplane/test/fixtures/server.js";

/**
 * The first five minutes, as printed: the commands of the local getting-started page and of
 * the README's "Five minutes", run by a shell against a data plane of the bundled repository
 * (what `npm start` serves), on free ports instead of 8000/8001/8002. Each list below is the
 * page's, in order, with what its command must print; a command added to a page without a
 * line here fails, and so does a command that no longer works.
 */

const CURL = "/usr/bin/curl";

interface Call {
  readonly command: string;
  /** What its output must show. */
  readonly prints: RegExp;
}

/** `values` of the CLI's JSON reply (pretty-printed), e.g. `[1, 2, 3, 4]`. */
const values = (...numbers: number[]): RegExp => new RegExp(`"values": \\[\\s*${numbers.join(",\\s*")}\\s*\\]`);

const IDENTITY_FP32_INFER = "node dist/cli/main.js infer identity_fp32 --input INPUT0:FP32:1x4=1,2,3,4";
const IDENTITY_FP32_REST =
  'curl -s localhost:8000/v2/models/identity_fp32/infer -d \'{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}\'';

/** docs/getting-started/local.md, "Call it". */
const LOCAL_CALLS: Call[] = [
  { command: IDENTITY_FP32_INFER, prints: values(1, 2, 3, 4) },
  {
    command: "node dist/cli/main.js infer identity_bytes --input INPUT0:BYTES:1x2=hello,world --id my-request",
    prints: /"id": "my-request"[\s\S]*"values": \[\s*"hello",\s*"world"\s*\]/,
  },
  {
    command: "node dist/cli/main.js infer add_sub_onnx --input INPUT0:FP32:1x4=1,2,3,4 --input INPUT1:FP32:1x4=1,1,1,1",
    prints: new RegExp(
      `"OUTPUT0"[\\s\\S]*${values(2, 3, 4, 5).source}[\\s\\S]*"OUTPUT1"[\\s\\S]*${values(0, 1, 2, 3).source}`,
    ),
  },
  {
    command: "node dist/cli/main.js infer repeat_int32 --stream --input IN:INT32:3=1,2,3",
    // One line of JSON per response, in order.
    prints:
      /^(\{"model_name":"repeat_int32".*"name":"OUT","datatype":"INT32","shape":\[1\],"values":\[[123]\]\}.*\n){3}$/,
  },
  {
    command: IDENTITY_FP32_REST,
    prints: /"outputs":\[\{"name":"OUTPUT0","datatype":"FP32","shape":\[1,4\],"data":\[1,2,3,4\]\}\]/,
  },
  {
    command:
      'curl -s localhost:8000/v2/models/mock_llm/generate -d \'{"text_input":"hi","parameters":{"max_tokens":4}}\'',
    prints: /^\{"model_name":"mock_llm","model_version":"1","text_output":"\S+( \S+){3}","finish_reason":"length"\}$/,
  },
  {
    command:
      'curl -sN localhost:8000/v1/chat/completions -d \'{"model":"mock_llm","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}\'',
    prints: /^data: \{"id":"chatcmpl-[\s\S]*"finish_reason":"length"[\s\S]*\n\ndata: \[DONE\]\n\n$/,
  },
  { command: "curl -s localhost:8000/v2/health/ready", prints: /^\{"ready":true\}$/ },
  {
    command: "curl -s localhost:8002/metrics | grep '^nv_inference_request_success'",
    // Both calls of identity_fp32 above (the CLI's and REST's) counted.
    prints: /^nv_inference_request_success\{model="identity_fp32",version="1"\} 2$/m,
  },
];

/** README.md, "Five minutes" (its first block; the second is the cluster's, run by the e2e tier). */
const README_CALLS: Call[] = [
  { command: IDENTITY_FP32_INFER, prints: values(1, 2, 3, 4) },
  { command: IDENTITY_FP32_REST, prints: /"data":\[1,2,3,4\]/ },
  {
    command:
      'curl -s localhost:8000/v1/chat/completions -d \'{"model":"mock_llm","messages":[{"role":"user","content":"hi"}],"max_tokens":4}\'',
    prints: /"object":"chat.completion"[\s\S]*"content":"\S+( \S+){3}"[\s\S]*"finish_reason":"length"/,
  },
];

const commandsOf = (page: string, heading: string, blocks: "all" | "first"): string[] => {
  const found = codeBlocks(page, { heading, language: "sh" });
  return (blocks === "all" ? found : found.slice(0, 1)).flatMap(shellCommands);
};

describe("getting started: the pages' commands against a real data plane of the bundled models", function () {
  this.timeout(60_000);
  let server: ServerProcess | undefined;

  before(async function () {
    requireProgram(this, CURL, "curl", "apt-get install curl");
    server = await startServer(["--model-repository", EXAMPLES]);
  });
  after(() => server?.stop());

  /** Runs a page's command in a shell from the repository root, on the test server's ports. */
  const run = async (command: string): Promise<string> => {
    const { grpcPort, httpPort, metricsPort } = server!;
    const onTestPorts = command
      .replaceAll("localhost:8000", `localhost:${httpPort}`)
      .replaceAll("localhost:8001", `localhost:${grpcPort}`)
      .replaceAll("localhost:8002", `localhost:${metricsPort}`);
    const { stdout } = await promisify(execFile)("sh", ["-c", onTestPorts], {
      cwd: REPO_ROOT,
      // The CLI's infer goes to localhost:8001 unless told otherwise: here, the test's port.
      env: { ...process.env, DYNAMO_INFER_URL: `localhost:${grpcPort}` },
    });
    return stdout;
  };

  const runsAsPrinted = (page: string, heading: string, blocks: "all" | "first", calls: Call[]) => {
    it(`${page} ("${heading}") shows exactly the commands this test runs`, () => {
      assert.deepEqual(
        commandsOf(page, heading, blocks),
        calls.map((call) => call.command),
      );
    });
    for (const { command, prints } of calls) {
      it(`${page}: ${command.slice(0, 90)}`, async () => {
        assert.match(await run(command), prints);
      });
    }
  };

  runsAsPrinted("docs/getting-started/local.md", "Call it", "all", LOCAL_CALLS);
  runsAsPrinted("README.md", "Five minutes", "first", README_CALLS);
});

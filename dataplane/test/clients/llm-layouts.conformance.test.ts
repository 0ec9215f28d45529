import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { CACHE_DIR, perfAnalyzerBinary, requireProgram } from "../../../e2e/support/prerequisites.js";
import { EXAMPLE_TOKENIZER, REPO_ROOT } from "../fixtures/paths.js";
import { runProgram } from "../fixtures/programs.js";
import { startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * Triton's LLM benchmarks, unchanged, against the bundled example models: genai-perf with
 * the vLLM backend's tensors (mock_llm_vllm) and TensorRT-LLM's (mock_llm_trtllm), streamed
 * and not, through perf_analyzer over gRPC; and perf_analyzer alone on identity_fp32 and on
 * the decoupled mock_llm with --streaming.
 */

const GENAI_PERF = join(process.env["DYNAMO_KSERVE_GENAI_PERF_VENV"] ?? join(CACHE_DIR, "venv-genai-perf"), "bin");
const OUTPUT_TOKENS = 8;
const REQUESTS = 20;

/** The statistics genai-perf writes to profile_export_genai_perf.json (those read here). */
interface GenaiPerfExport {
  readonly request_count: { readonly avg: number };
  readonly output_sequence_length: { readonly min: number; readonly max: number };
}

/** perf_analyzer's CSV (-f): one row per concurrency, by column name. */
function csvRows(file: string): Record<string, number>[] {
  const [header, ...rows] = readFileSync(file, "utf8").trim().split("\n");
  const columns = header!.split(",");
  return rows.map((row) => Object.fromEntries(row.split(",").map((value, index) => [columns[index], Number(value)])));
}

describe("Triton's LLM benchmarks, unchanged (genai-perf, perf_analyzer)", function () {
  this.timeout(600_000);
  let server: ServerProcess;
  let dir: string;
  let env: NodeJS.ProcessEnv;

  before(async function () {
    requireProgram(this, join(GENAI_PERF, "genai-perf"), "genai-perf", "run scripts/setup-python.sh");
    requireProgram(this, perfAnalyzerBinary(), "perf_analyzer", "run bash e2e/tools/build.sh");
    server = await startServer(["--model-repository", join(REPO_ROOT, "examples", "model_repository")]);
    dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-genai-perf-"));
    // genai-perf finds perf_analyzer on PATH; no Hugging Face Hub here: the example word tokenizer.
    env = {
      ...process.env,
      PATH: `${dirname(perfAnalyzerBinary())}${delimiter}${process.env["PATH"] ?? ""}`,
      HF_HUB_OFFLINE: "1",
    };
  });

  after(async () => {
    await server?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  for (const [model, backend] of [
    ["mock_llm_vllm", "vllm"],
    ["mock_llm_trtllm", "tensorrtllm"],
  ] as const) {
    for (const streaming of [false, true]) {
      it(`genai-perf --backend ${backend}${streaming ? " --streaming" : ""}: ${REQUESTS} requests, each ${OUTPUT_TOKENS} tokens as asked`, async () => {
        const artifacts = join(dir, `${backend}-${streaming}`);
        const { code, output } = await runProgram(
          join(GENAI_PERF, "genai-perf"),
          [
            "profile",
            ...["-m", model, "--endpoint-type", "kserve", "--backend", backend],
            ...(streaming ? ["--streaming"] : []),
            ...["-u", `127.0.0.1:${server.grpcPort}`, "--tokenizer", EXAMPLE_TOKENIZER],
            ...["--output-tokens-mean", String(OUTPUT_TOKENS), "--output-tokens-mean-deterministic"],
            ...["--synthetic-input-tokens-mean", "16", "--request-count", String(REQUESTS), "--concurrency", "2"],
            ...["--artifact-dir", artifacts],
          ],
          env,
        );
        assert.equal(code, 0, output);
        const [run] = readdirSync(artifacts);
        const stats = JSON.parse(
          readFileSync(join(artifacts, run!, "profile_export_genai_perf.json"), "utf8"),
        ) as GenaiPerfExport;
        assert.equal(stats.request_count.avg, REQUESTS);
        // Its tokenizer counts the mock's words: what came back is what was asked for (the
        // layout's max_tokens: sampling_parameters JSON for vLLM, an INT32 input for TensorRT-LLM).
        assert.deepEqual(
          [stats.output_sequence_length.min, stats.output_sequence_length.max],
          [OUTPUT_TOKENS, OUTPUT_TOKENS],
        );
      });
    }
  }

  /** perf_analyzer with count windows that always count as stable (a loaded CI machine is noisy). */
  const perfAnalyzer = async (model: string, args: readonly string[]): Promise<Record<string, number>> => {
    const csv = join(dir, `${model}.csv`);
    const { code, output } = await runProgram(perfAnalyzerBinary(), [
      ...["-m", model, "-u", `127.0.0.1:${server.grpcPort}`, "-i", "grpc", "--concurrency-range", "2"],
      ...["--measurement-mode", "count_windows", "--measurement-request-count", "20", "-s", "1000"],
      ...["-f", csv, ...args],
    ]);
    assert.equal(code, 0, output);
    const [row] = csvRows(csv);
    return row!;
  };

  it("perf_analyzer on identity_fp32 over gRPC", async () => {
    const row = await perfAnalyzer("identity_fp32", ["--shape", "INPUT0:16"]);
    assert.ok(row["Inferences/Second"]! > 0, JSON.stringify(row));
  });

  it("perf_analyzer --streaming on the decoupled mock_llm: 16 responses (tokens) per request", async () => {
    const input = join(dir, "mock_llm.json");
    writeFileSync(input, JSON.stringify({ data: [{ text_input: ["hello"] }] }));
    const row = await perfAnalyzer("mock_llm", ["--streaming", "--input-data", input]);
    const perRequest = row["Response Throughput"]! / row["Inferences/Second"]!;
    assert.ok(Math.abs(perRequest - 16) < 1, `${perRequest} responses per request: ${JSON.stringify(row)}`);
  });
});

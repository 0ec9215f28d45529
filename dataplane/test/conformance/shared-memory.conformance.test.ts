import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { perfAnalyzerBinary, requireProgram, TOOLS_PYTHON } from "../../../e2e/support/prerequisites.js";
import { REPO_ROOT, TRITON_EXAMPLES } from "../fixtures/paths.js";
import { MODELS_PYTHON, requireTritonPeers, requireTritonServer, startTritonServer } from "../fixtures/peers.js";
import { startServer } from "../fixtures/server.js";
import { SHM_DIRECTORY } from "../../src/shared-memory/keys.js";
import { assertNoSegmentsLeft } from "../fixtures/shm-segments.js";

/**
 * System shared memory as tritonclient users and perf_analyzer see it, on this data plane
 * (with --allow-client-shm) and on a real Triton serving the same Python-backend `simple` and
 * `simple_string` models (its 2.5x build allows client shared memory without a flag):
 * shm_checks.py does what Triton's simple_{grpc,http}_shm{,_string}_client.py programs do and
 * drives the errors both servers agree on; the two must see the same.
 */

const run = promisify(execFile);
const here = join(REPO_ROOT, "dataplane", "test", "conformance");
const MODELS = TRITON_EXAMPLES;
/** Of Triton's example models, the two the shared-memory programs call. */
const SIMPLE_ONLY = ["--model-control-mode", "explicit", "--load-model", "simple", "--load-model", "simple_string"];
/** This data plane's flags: those models, run by the peers' Python, client shared memory allowed. */
const OURS = ["--model-repository", MODELS, "--python", MODELS_PYTHON, "--allow-client-shm", ...SIMPLE_ONLY];

/** The keys Triton's example programs use (and shm_checks.py with them): left behind only by a failed run. */
const PROGRAM_KEYS = [
  "input_simple",
  "output_simple",
  "input0_simple",
  "input1_simple",
  "output0_simple",
  "output1_simple",
];
const removeProgramKeys = (): void => PROGRAM_KEYS.forEach((key) => rmSync(join(SHM_DIRECTORY, key), { force: true }));

/** shm_checks.py against one server: what tritonclient saw, as the JSON it printed. */
async function shmChecks(grpc: string, http: string): Promise<Record<string, unknown>> {
  // Its keys carry this process's prefix, so the after hook sees any it leaves.
  const env = { ...process.env, DK_TEST_SHM_PREFIX: `/dk-test-${process.pid}-py` };
  const { stdout } = await run(TOOLS_PYTHON, [join(here, "shm_checks.py"), grpc, http], { timeout: 120_000, env });
  return JSON.parse(stdout) as Record<string, unknown>;
}

/** perf_analyzer on `simple` with its inputs and outputs in system shared memory: its exit status and last lines. */
async function perfAnalyzerShm(grpc: string): Promise<{ code: number; said: string }> {
  const args = [
    ...["-m", "simple", "-u", grpc, "-i", "grpc", "--shared-memory", "system", "--output-shared-memory-size", "64"],
    ...["--concurrency-range", "2", "--measurement-interval", "300", "-s", "1000", "--max-trials", "3"],
  ];
  try {
    const { stdout } = await run(perfAnalyzerBinary(), args, { timeout: 60_000 });
    return { code: 0, said: stdout.trim().split("\n").slice(-3).join("\n") };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? 1, said: `${failed.stdout ?? ""}${failed.stderr ?? ""}`.trim().slice(-800) };
  }
}

/** perf_analyzer names its regions after the tensors (INPUT0_0_0, OUTPUT0): a killed one leaves them. */
const perfAnalyzerRegions = (): string[] =>
  readdirSync(SHM_DIRECTORY).filter((name) => /^(INPUT|OUTPUT)[01]/.test(name));

describe("system shared memory: tritonclient.utils.shared_memory users and perf_analyzer, against Triton", function () {
  this.timeout(240_000);
  let mine: Record<string, unknown>;
  let theirs: Record<string, unknown>;

  before(async function () {
    requireProgram(this, TOOLS_PYTHON, "the tritonclient venv", "run scripts/setup-python.sh");
    requireTritonPeers(this);
    requireTritonServer(this);
    requireProgram(this, perfAnalyzerBinary(), "perf_analyzer", "run bash e2e/tools/build.sh");
    removeProgramKeys();
  });
  after(removeProgramKeys);
  after(assertNoSegmentsLeft);

  it("gives the example programs' scenarios and the shared errors the same results on both servers", async () => {
    // One server at a time: the programs' fixed keys would collide.
    const triton = await startTritonServer([MODELS], {}, SIMPLE_ONLY);
    try {
      theirs = await shmChecks(triton.address, triton.httpAddress);
    } finally {
      await triton.kill();
    }
    const ours = await startServer(OURS);
    try {
      mine = await shmChecks(`127.0.0.1:${ours.grpcPort}`, `127.0.0.1:${ours.httpPort}`);
    } finally {
      await ours.stop();
    }
    assert.deepEqual(mine, theirs);
  });

  it("passes every example program's scenario and finds Triton's words in every refusal (not two servers failing alike)", () => {
    for (const protocol of ["grpc", "http"]) {
      for (const program of ["simple shm program", "simple_string shm program"]) {
        const result = mine[`${protocol} ${program}`] as { ok?: { after: unknown[] }; message?: string };
        assert.ok(result.ok !== undefined, `${protocol} ${program}: ${JSON.stringify(result)}`);
        assert.deepEqual(result.ok.after, []);
      }
    }
    for (const [name, result] of Object.entries(mine)) {
      if (typeof result === "object" && result !== null && "says" in result) {
        assert.equal((result as { says: boolean }).says, true, `${name}: ${JSON.stringify(result)}`);
      }
    }
    assert.deepEqual(mine["grpc infer with a byte size past the region"], {
      status: "StatusCode.INVALID_ARGUMENT",
      says: true,
    });
    assert.deepEqual(mine["http register a name taken"], { status: "400", says: true });
  });

  it("serves perf_analyzer --shared-memory system as Triton does, and perf_analyzer cleans its regions up", async () => {
    const before = perfAnalyzerRegions();
    const triton = await startTritonServer([MODELS], {}, SIMPLE_ONLY);
    let onTriton: { code: number; said: string };
    try {
      onTriton = await perfAnalyzerShm(triton.address);
    } finally {
      await triton.kill();
    }
    const ours = await startServer(OURS);
    let onOurs: { code: number; said: string };
    try {
      onOurs = await perfAnalyzerShm(`127.0.0.1:${ours.grpcPort}`);
    } finally {
      await ours.stop();
    }
    assert.equal(onTriton.code, 0, onTriton.said);
    assert.equal(onOurs.code, 0, onOurs.said);
    assert.match(onOurs.said, /throughput: [\d.]+ infer\/sec/);
    assert.deepEqual(perfAnalyzerRegions(), before);
  });
});

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { CACHE_DIR, requireProgram } from "../../../e2e/support/prerequisites.js";
import { REPO_ROOT } from "../fixtures/paths.js";
import { IDENTITY_ALL_TYPES } from "../fixtures/repository.js";
import { useServer } from "../fixtures/serving.js";

const run = promisify(execFile);
const python = join(process.env["DYNAMO_KSERVE_VENV"] ?? join(CACHE_DIR, "venv"), "bin", "python");
const here = join(REPO_ROOT, "dataplane", "test", "conformance");

/** Runs a Python script; resolves with its output whether it passed or not. */
async function runPython(args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(python, args, { timeout: 120_000 });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? 1, output: `${failed.stdout ?? ""}${failed.stderr ?? ""}` };
  }
}

describe("conformance with the real tritonclient (gRPC and HTTP)", function () {
  this.timeout(120_000);

  before(function () {
    requireProgram(this, python, "the tritonclient venv", "run scripts/setup-python.sh");
  });

  it("describes the same protocol as tritonclient (every message, field number, enum and RPC)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dynamo-kserve-desc-"));
    try {
      const image = join(dir, "proto.binpb");
      await run(join(REPO_ROOT, "node_modules", ".bin", "buf"), ["build", "proto", "-o", image], { cwd: REPO_ROOT });
      const { code, output } = await runPython([join(here, "compare_descriptors.py"), image]);
      assert.equal(code, 0, output);
      assert.match(output, /^[1-9]\d* passed, 0 failed$/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("against a running data plane", () => {
    const serving = useServer({ identity_all: IDENTITY_ALL_TYPES }, [
      "--model-control-mode",
      "explicit",
      "--load-model",
      "*",
    ]);

    it("passes every tritonclient check (health, metadata, config, index, infer per datatype, stream, stats, load/unload)", async () => {
      const { code, output } = await runPython([
        join(here, "tritonclient_conformance.py"),
        `127.0.0.1:${serving.server.grpcPort}`,
      ]);
      assert.equal(code, 0, output);
      assert.match(output, /^2\d passed, 0 failed$/m);
    });

    it("passes every tritonclient.http check (binary and JSON per datatype, compression, async, errors, statistics, logging, model control)", async () => {
      const { code, output } = await runPython([
        join(here, "tritonclient_http_conformance.py"),
        `127.0.0.1:${serving.server.httpPort}`,
      ]);
      assert.equal(code, 0, output);
      assert.match(output, /^[3-9]\d passed, 0 failed$/m);
    });
  });
});

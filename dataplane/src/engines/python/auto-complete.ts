import { spawn } from "node:child_process";
import { basename, join } from "node:path";
import type { Readable, Writable } from "node:stream";
import type { Logger } from "pino";
import type { ModelConfig } from "../../../../proto/gen/ts/model_config.js";
import type { PythonEngineArguments } from "../../../../lib/contract/dataplane.js";
import { selectedEngine } from "../../../../lib/engines/catalog.js";
import { pythonModelFileName } from "../../../../lib/engines/python.js";
import { ConfigError, parseJson, tritonConfigJson } from "../../../../lib/model-repository/config.js";
import type { ModelFiles } from "../../../../lib/model-repository/sources.js";
import { PYTHON_STUB, stubEnvironment } from "./instance.js";
import { logOutput } from "./printed.js";

/**
 * Triton's auto-complete for Python models: when a model is loaded (unless
 * --disable-auto-complete-config), a TritonPythonModel with a static
 * `auto_complete_config(auto_complete_model_config)` fills in its own config: inputs,
 * outputs, max_batch_size, dynamic batching, the decoupled transaction policy. It runs in
 * a short-lived Python process (the stub's `complete` mode) before the config is checked,
 * so the engine, ModelConfig, ModelMetadata and initialize's `args["model_config"]` all see
 * the completed config; a model whose auto_complete_config fails is not loaded, and the
 * error names it.
 */

/** The interpreter, and the stub timeout: a process that has not finished in that long is killed. */
export interface PythonCompletion extends Pick<PythonEngineArguments, "python" | "pythonStubTimeoutSecs"> {
  readonly logger: Logger;
}

/** Lines of the process's stderr kept for the error of a failed completion. */
const STDERR_LINES_KEPT = 12;
/** Bytes of its stderr kept meanwhile, the latest (a model printing in a loop must not fill memory). */
const STDERR_BYTES_KEPT = 64 * 1024;

export async function completePythonConfig(
  config: ModelConfig,
  files: ModelFiles,
  { python, pythonStubTimeoutSecs, logger }: PythonCompletion,
): Promise<ModelConfig> {
  const timeoutMs = pythonStubTimeoutSecs * 1000;
  const latest = files.versions[files.versions.length - 1];
  if (selectedEngine(config) !== "python" || latest === undefined) return config;
  const name = config.name || basename(files.folder);
  const file = join(files.folder, String(latest), pythonModelFileName(config));
  const child = spawn(python, [PYTHON_STUB, "complete", file], {
    stdio: ["pipe", "pipe", "pipe", "pipe"],
    env: stubEnvironment(),
  });
  logOutput(child, logger.child({ model: name, stage: "auto_complete_config" }));
  let stderr = Buffer.alloc(0);
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = Buffer.concat([stderr, chunk]);
    if (stderr.length > STDERR_BYTES_KEPT) stderr = stderr.subarray(stderr.length - STDERR_BYTES_KEPT);
  });
  const result: Buffer[] = [];
  (child.stdio[3] as Readable).on("data", (chunk: Buffer) => result.push(chunk));
  const stdin = child.stdin as Writable;
  stdin.on("error", () => undefined); // a process that exits early is reported by its exit
  stdin.end(JSON.stringify(tritonConfigJson({ ...config, name })));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const outcome = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>(
    (resolve) => {
      child.once("error", (error) => resolve({ code: null, signal: null, error }));
      child.once("close", (code, signal) => resolve({ code, signal }));
    },
  ).finally(() => clearTimeout(timer));
  if (outcome.error !== undefined) {
    throw new ConfigError(file, `auto_complete_config: cannot start ${python}: ${outcome.error.message}`);
  }
  if (outcome.code !== 0) {
    const why =
      outcome.signal === "SIGKILL"
        ? `did not finish within ${pythonStubTimeoutSecs} s`
        : outcome.code === 1
          ? "failed"
          : `failed (${outcome.signal ?? `exit code ${outcome.code}`})`;
    const trace = stderr.toString("utf8").trim().split("\n").slice(-STDERR_LINES_KEPT).join("\n");
    throw new ConfigError(file, `auto_complete_config ${why}${trace ? `: ${trace}` : ""}`);
  }
  const completed = parseJson(Buffer.concat(result).toString("utf8"), file);
  // The name was filled in for the model to read; a config without one still takes its folder's.
  return { ...completed, name: config.name };
}

import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import type { LoadRun } from "./ghz.js";

export interface StreamLoadOptions {
  readonly address: string;
  readonly model: string;
  readonly streams: number;
  /** Responses per request (the mocker's max_tokens). */
  readonly tokens: number;
  readonly connections: number;
  readonly warmupSeconds: number;
  readonly durationSeconds: number;
  /** Cores for the generator (taskset); undefined leaves it unpinned. */
  readonly cpus?: string;
}

/**
 * Runs stream-load.ts (our ModelStreamInfer generator; ghz cannot report responses per
 * second over long-lived streams) as its own process; `rps` is responses per second and
 * the latencies are the gaps between a stream's consecutive responses.
 */
export async function runStreamLoad(options: StreamLoadOptions, over: "grpc" | "sse" = "grpc"): Promise<LoadRun> {
  // sse-load.ts: the same measures over POST /v1/chat/completions with stream: true.
  const script = join(REPO_ROOT, "dist", "bench", "harness", over === "grpc" ? "stream-load.js" : "sse-load.js");
  const args = [
    script,
    options.address,
    options.model,
    String(options.streams),
    String(options.tokens),
    String(options.warmupSeconds),
    String(options.durationSeconds),
    String(options.connections),
  ];
  const [program, programArgs] =
    options.cpus === undefined
      ? [process.execPath, args]
      : ["taskset", ["-c", options.cpus, process.execPath, ...args]];
  const { stdout } = await promisify(execFile)(program, programArgs, { maxBuffer: 1024 * 1024 });
  const result = JSON.parse(stdout) as { responses: number; errors: number; p50Ms: number; p99Ms: number };
  return {
    ok: result.responses,
    errors: result.errors,
    rps: result.responses / options.durationSeconds,
    p50Ms: result.p50Ms,
    p99Ms: result.p99Ms,
  };
}

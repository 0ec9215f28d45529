import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { promisify } from "node:util";
import type { LoadRun } from "./ghz.js";
import type { HttpRequest } from "./requests.js";

export interface HttpLoadOptions {
  readonly vegeta: string;
  /** host:port of the REST endpoint. */
  readonly address: string;
  readonly request: HttpRequest;
  readonly concurrency: number;
  readonly durationSeconds: number;
  /** Cores the load generator may use (taskset); undefined leaves it unpinned. */
  readonly cpus?: string;
}

interface VegetaReport {
  latencies: { "50th": number; "99th": number };
  requests: number;
  throughput: number;
  success: number;
  errors: string[] | null;
}

const NS_PER_MS = 1e6;

/**
 * Drives a REST endpoint with vegeta (built from its Go module) as a closed loop: `concurrency`
 * workers, each sending the next request when its reply is in (rate 0), over keep-alive
 * HTTP/1.1 connections, as ghz does for gRPC.
 */
export async function runHttpLoad(options: HttpLoadOptions): Promise<LoadRun> {
  const { request } = options;
  const targets = `${request.bodyFile}.targets`;
  writeFileSync(
    targets,
    [
      `POST http://${options.address}${request.path}`,
      ...Object.entries(request.headers).map(([name, value]) => `${name}: ${value}`),
      `@${request.bodyFile}`,
      "",
    ].join("\n"),
  );
  const attack = [
    options.vegeta,
    "attack",
    `-targets=${targets}`,
    "-format=http",
    "-rate=0",
    `-workers=${options.concurrency}`,
    `-max-workers=${options.concurrency}`,
    `-duration=${options.durationSeconds}s`,
    "-keepalive=true",
  ];
  const pinned = options.cpus === undefined ? attack.join(" ") : `taskset -c ${options.cpus} ${attack.join(" ")}`;
  const { stdout } = await promisify(execFile)("sh", ["-c", `${pinned} | ${options.vegeta} report -type=json`], {
    maxBuffer: 16 * 1024 * 1024,
  });
  const report = JSON.parse(stdout) as VegetaReport;
  const ok = Math.round(report.requests * report.success);
  return {
    ok,
    errors: report.requests - ok,
    rps: report.throughput,
    p50Ms: report.latencies["50th"] / NS_PER_MS,
    p99Ms: report.latencies["99th"] / NS_PER_MS,
    ...(report.errors !== null && report.errors.length > 0 ? { firstError: report.errors[0] } : {}),
  };
}

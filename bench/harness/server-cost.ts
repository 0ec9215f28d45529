import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { credentials } from "@grpc/grpc-js";
import { GRPCInferenceServiceClient } from "../../proto/gen/ts/grpc_service.js";
import { call } from "../../dataplane/test/fixtures/server.js";

/**
 * What a run cost a server, beside what the client measured: its inferences and executions
 * (ModelStatistics) and the CPU its process group used. On a runner other work shares, CPU
 * per request holds where requests per second move with the load.
 */

/** A model's inference and execution counts, as the server reports them. */
export async function modelCounts(address: string, model: string): Promise<{ inferences: number; executions: number }> {
  const client = new GRPCInferenceServiceClient(address, credentials.createInsecure());
  try {
    const reply = await call(client, "modelStatistics", { name: model, version: "" });
    const stats = reply.modelStats[0];
    return { inferences: Number(stats?.inferenceCount ?? 0n), executions: Number(stats?.executionCount ?? 0n) };
  } finally {
    client.close();
  }
}

let ticksPerSecond: number | undefined;

/** CPU seconds (user + system) used so far by every live process of a process group (Linux /proc). */
export function processGroupCpuSeconds(group: number): number {
  ticksPerSecond ??= Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
  let ticks = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // After "pid (comm)": state, ppid, pgrp, ... utime and stime are the 12th and 13th of these.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === group) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks / ticksPerSecond;
}

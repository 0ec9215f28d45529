import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";

/**
 * How many cores this process may use: the cores it may run on (Node's
 * availableParallelism follows the CPU affinity), capped by the container's CPU limit.
 * A pod limited to 2 CPUs on a 64-core node sees 64 cores but gets 2 cores' worth of time:
 * one worker per visible core would be 32 processes per core of quota. The limit is the
 * cgroup's CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), rounded
 * up; no limit, or no cgroup file, leaves the cores as they are.
 */
export function usableCores(cgroupRoot = "/sys/fs/cgroup", cores = availableParallelism()): number {
  const quota = cpuQuota(cgroupRoot);
  return quota === undefined ? cores : Math.max(1, Math.min(cores, Math.ceil(quota)));
}

/** The CPU limit in cores, or undefined when there is none. */
function cpuQuota(root: string): number | undefined {
  const v2 = readText(join(root, "cpu.max"));
  if (v2 !== undefined) {
    const [quota, period] = v2.split(/\s+/);
    return ratio(quota, period);
  }
  return ratio(readText(join(root, "cpu", "cpu.cfs_quota_us")), readText(join(root, "cpu", "cpu.cfs_period_us")));
}

function ratio(quota: string | undefined, period: string | undefined): number | undefined {
  const limit = Number(quota);
  const length = Number(period);
  // "max" (v2) or -1 (v1): no limit.
  return Number.isFinite(limit) && limit > 0 && Number.isFinite(length) && length > 0 ? limit / length : undefined;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return undefined;
  }
}

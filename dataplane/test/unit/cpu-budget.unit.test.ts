import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { usableCores } from "../../src/cpu-budget.js";

describe("--grpc-workers 0: one worker per usable core", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "cgroup-"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const write = (path: string, text: string): void => {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), `${text}\n`);
  };

  it("caps the visible cores at the container's CPU limit (cgroup v2 cpu.max), rounded up", () => {
    write("cpu.max", "200000 100000");
    assert.equal(usableCores(root, 64), 2);
    write("cpu.max", "150000 100000");
    assert.equal(usableCores(root, 64), 2);
    write("cpu.max", "50000 100000");
    assert.equal(usableCores(root, 64), 1);
    write("cpu.max", "800000 100000");
    assert.equal(usableCores(root, 4), 4, "a limit above the cores leaves the cores");
  });

  it("no limit (max), or cgroup v1's quota and period", () => {
    write("cpu.max", "max 100000");
    assert.equal(usableCores(root, 8), 8);
    rmSync(join(root, "cpu.max"));
    write("cpu/cpu.cfs_quota_us", "300000");
    write("cpu/cpu.cfs_period_us", "100000");
    assert.equal(usableCores(root, 16), 3);
    write("cpu/cpu.cfs_quota_us", "-1");
    assert.equal(usableCores(root, 16), 16);
  });

  it("no cgroup files: the visible cores", () => {
    assert.equal(usableCores(join(root, "absent"), 6), 6);
  });
});

#!/usr/bin/env node
// Regenerates proto/gen from proto/*.proto with buf (from npm) and the local ts-proto /
// protoc-gen-es plugins, plus descriptors.binpb (the exact FileDescriptorSet, served by gRPC
// reflection). With --check, fails if the checked-in output differs.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readTree, syncGenerated } from "./lib/generated.mjs";

const root = new URL("..", import.meta.url).pathname;
const buf = join(root, "node_modules", ".bin", "buf");
const outDir = mkdtempSync(join(tmpdir(), "dynamo-kserve-proto-"));
try {
  const run = (args) =>
    execFileSync(buf, ["generate", "proto", ...args, "-o", outDir], { cwd: root, stdio: "inherit" });
  // health.proto is described for reflection only: grpc-health-check implements the service.
  run(["--template", "proto/buf.gen.yaml", "--exclude-path", "proto/onnx", "--exclude-path", "proto/grpc"]);
  run(["--template", "proto/buf.gen.onnx.yaml", "--path", "proto/onnx"]);
  run(["--template", "proto/buf.gen.es.yaml", "--path", "proto/model_config.proto"]);
  // What reflection serves: the data plane's services' files, not the ONNX graph subset nor
  // KEDA's external scaler (the activator's, which serves no reflection).
  const build = [
    "build",
    "proto",
    "--exclude-source-info",
    "--exclude-path",
    "proto/onnx",
    "--exclude-path",
    "proto/keda",
  ];
  execFileSync(buf, [...build, "-o", join(outDir, "descriptors.binpb")], { cwd: root, stdio: "inherit" });
  syncGenerated({
    label: "proto",
    dir: join(root, "proto", "gen"),
    files: readTree(outDir),
    check: process.argv.includes("--check"),
  });
} finally {
  rmSync(outDir, { recursive: true, force: true });
}

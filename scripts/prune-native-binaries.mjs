// Deletes the native libraries of other platforms from production node_modules (run in the
// image's build stage): onnxruntime-node ships Linux, macOS and Windows builds for every
// architecture (~290 MB), of which one runs here.
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const ONNXRUNTIME_BIN = "node_modules/onnxruntime-node/bin";

for (const napi of readdirSync(ONNXRUNTIME_BIN)) {
  for (const platform of readdirSync(join(ONNXRUNTIME_BIN, napi))) {
    for (const arch of readdirSync(join(ONNXRUNTIME_BIN, napi, platform))) {
      if (platform !== process.platform || arch !== process.arch) {
        rmSync(join(ONNXRUNTIME_BIN, napi, platform, arch), { recursive: true, force: true });
      }
    }
  }
}

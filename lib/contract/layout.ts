import { join } from "node:path";

/**
 * What the data plane and the operator agree on besides the command line: the gRPC health
 * service that is the data plane's readiness, where a model's files are found under
 * --model-files-root, and the format of a bearer-token file.
 */

/** The grpc.health.v1 service whose status is the data plane's readiness (SERVING while a model is ready). */
export const READINESS_SERVICE = "inference.GRPCInferenceService";

/**
 * A model configured by a single file finds its version folders (`<version>/model.onnx`)
 * here under --model-files-root: `<root>/<model>`.
 */
export const modelFilesFolder = (root: string, model: string): string => join(root, model);

/**
 * The tokens of a bearer-token file (--auth-token-file): one per line, blank lines and
 * `#` comments ignored.
 */
export function parseTokenFile(content: string): string[] {
  return content
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
}

import { join } from "node:path";

/**
 * What the data plane and the operator agree on besides the command line: the gRPC health
 * service that is the data plane's readiness, where a model's files are found (under
 * --model-files-root, or where --model-files names), and the format of a bearer-token file.
 */

/** The grpc.health.v1 service whose status is the data plane's readiness (SERVING once the start-up loads are done, while a model is ready). */
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

/** One --model-files value: a model's name and where its version folders are. */
export interface ModelFilesLocation {
  readonly model: string;
  /** A folder, or an object-storage prefix (s3://, gs://, as://), holding `<version>/...`. */
  readonly location: string;
}

/** `<model>=<location>`, as --model-files takes it (model names hold no `=`). */
export const modelFilesArgument = ({ model, location }: ModelFilesLocation): string => `${model}=${location}`;

/** A --model-files value read back; undefined when it is not `<model>=<location>`. */
export function parseModelFilesArgument(text: string): ModelFilesLocation | undefined {
  const separator = text.indexOf("=");
  if (separator <= 0 || separator === text.length - 1) return undefined;
  return { model: text.slice(0, separator), location: text.slice(separator + 1) };
}

import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * A test tier may skip (loudly) when something it needs is not installed on a laptop; under
 * CI=true a missing prerequisite fails instead.
 */
export function requireProgram(context: Mocha.Context, program: string, what: string, howToGet: string): void {
  if (existsSync(program)) return;
  const message = `${what} not found at ${program}; ${howToGet}`;
  if (process.env["CI"] === "true") throw new Error(message);
  console.warn(`\n  !!! SKIPPING tests that need ${what}: ${message}\n`);
  context.skip();
}

/** Where slow-to-build test tools and venvs are kept, outside the checkout. */
export const CACHE_DIR = process.env["DYNAMO_KSERVE_CACHE"] ?? join(homedir(), ".cache", "dynamo-kserve");
/** The tooling venv's interpreter (tritonclient, the KServe and openai SDKs, onnx; scripts/setup-python.sh). */
export const TOOLS_PYTHON = join(process.env["DYNAMO_KSERVE_VENV"] ?? join(CACHE_DIR, "venv"), "bin", "python");

const TOOLS_DIR = fileURLToPath(new URL("../../../e2e/tools", import.meta.url));

/** A tool e2e/tools/build.sh builds from its pinned Go module (`name`, pinned as NAME_VERSION). */
function toolBinary(name: string): string {
  const variable = `${name.toUpperCase()}_VERSION=`;
  const line = readFileSync(join(TOOLS_DIR, "versions.env"), "utf8")
    .split("\n")
    .find((candidate) => candidate.startsWith(variable));
  if (line === undefined) throw new Error(`${variable} is not pinned in e2e/tools/versions.env`);
  return join(CACHE_DIR, "tools", `${name}-${line.slice(variable.length).trim()}`, "bin", name);
}

export const grpcurlBinary = (): string => toolBinary("grpcurl");
export const helmBinary = (): string => toolBinary("helm");
export const ghzBinary = (): string => toolBinary("ghz");
export const vegetaBinary = (): string => toolBinary("vegeta");
/** perf_analyzer's wrapper (e2e/tools/perf-analyzer.sh): PyPI's binary through a newer glibc's loader. */
export const perfAnalyzerBinary = (): string => toolBinary("perf_analyzer");

export const requireGrpcurl = (context: Mocha.Context): void =>
  requireProgram(context, grpcurlBinary(), "grpcurl", "run bash e2e/tools/build.sh");
export const requireHelm = (context: Mocha.Context): void =>
  requireProgram(context, helmBinary(), "helm", "run bash e2e/tools/build.sh");

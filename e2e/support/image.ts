import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../cluster/cluster.js";

/**
 * The dynamo-kserve image, built from the repository's Dockerfile by the local Docker Engine.
 * No registry is reachable here, so the base is the stand-in e2e/image/base-image.sh makes
 * (Debian bookworm + this machine's node); real users build on the Dockerfile's default.
 */

const { version } = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string };

/** The tag the tests build and the Kubernetes getting-started page uses (the chart's default image). */
export const IMAGE = `dynamo-kserve:${version}`;

/** Whether a Docker Engine answers; under CI=true a missing one fails the tier instead of skipping it. */
export function requireDocker(context: Mocha.Context): void {
  // testcontainers' reaper (Ryuk) is an image from Docker Hub, which is not reachable here;
  // the tests stop and remove their own containers.
  process.env["TESTCONTAINERS_RYUK_DISABLED"] ??= "true";
  const probe = spawnSync("docker", ["version", "--format", "{{.Server.Version}}"], { encoding: "utf8" });
  if (probe.status === 0) return;
  const message = `no Docker Engine answers (${(probe.stderr || String(probe.error)).trim()}); install docker.io and start dockerd (.ci/run does both)`;
  if (process.env["CI"] === "true") throw new Error(message);
  console.warn(`\n  !!! SKIPPING tests that need the image: ${message}\n`);
  context.skip();
}

let built: string | undefined;

/**
 * Builds IMAGE once per test process (Docker's layer cache makes a rebuild of unchanged
 * sources take seconds) and returns its tag. The classic builder: Debian's docker.io has
 * no buildx plugin.
 */
export function buildImage(): string {
  if (built !== undefined) return built;
  const base = execFileSync("bash", [join(REPO_ROOT, "e2e", "image", "base-image.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  }).trim();
  const build = spawnSync("docker", ["build", "--build-arg", `BASE_IMAGE=${base}`, "--tag", IMAGE, REPO_ROOT], {
    encoding: "utf8",
    env: { ...process.env, DOCKER_BUILDKIT: "0" },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (build.status !== 0) throw new Error(`docker build failed:\n${build.stdout.slice(-4000)}\n${build.stderr}`);
  built = IMAGE;
  return built;
}

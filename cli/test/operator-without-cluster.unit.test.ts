import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CLI } from "../../dataplane/test/fixtures/paths.js";
import { freePort } from "../../e2e/support/ports.js";

/** Longer than any bounded wait below: an operator still running then retries forever. */
const GIVE_UP_MS = 40_000;

interface Outcome {
  readonly code: number | null;
  readonly stderr: string;
  readonly stdout: string;
  readonly seconds: number;
}

/** Runs `dynamo-kserve operator ...args` with HOME at an empty folder, until it exits (or GIVE_UP_MS). */
function runOperator(args: readonly string[], home: string): Promise<Outcome> {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
  delete env["KUBECONFIG"];
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, "operator", "--host", "127.0.0.1", "--http-port", "0", ...args],
      { env, timeout: GIVE_UP_MS, killSignal: "SIGKILL" },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null;
        resolve({ code, stdout, stderr, seconds: (Date.now() - started) / 1000 });
      },
    );
  });
}

function kubeconfigFor(dir: string, server: string): string {
  const file = join(dir, "kubeconfig");
  writeFileSync(
    file,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      `- name: nowhere`,
      `  cluster: { server: "${server}" }`,
      "users:",
      "- name: someone",
      "  user: { token: not-a-secret }",
      "contexts:",
      "- name: nowhere-context",
      "  context: { cluster: nowhere, user: someone }",
      "current-context: nowhere-context",
      "",
    ].join("\n"),
  );
  return file;
}

describe("dynamo-kserve operator without a reachable cluster", function () {
  this.timeout(GIVE_UP_MS + 10_000);
  let home: string;
  beforeEach(() => (home = mkdtempSync(join(tmpdir(), "operator-home-"))));
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("says at once that no cluster is configured when there is no kubeconfig at all", async () => {
    const outcome = await runOperator([], home);
    assert.equal(outcome.code, 1, `exit code (stderr: ${outcome.stderr})`);
    assert.match(
      outcome.stderr,
      /^dynamo-kserve: no Kubernetes cluster configured: no --kubeconfig, \$KUBECONFIG is unset, ~\/\.kube\/config does not exist/m,
    );
    assert.doesNotMatch(outcome.stdout + outcome.stderr, /skipTLSVerify/);
  });

  it("names the kubeconfig, context and server, and exits 1 after --cluster-wait-secs, when the port is closed", async () => {
    const port = await freePort();
    const kubeconfig = kubeconfigFor(home, `https://127.0.0.1:${port}`);
    const outcome = await runOperator(["--kubeconfig", kubeconfig, "--cluster-wait-secs", "2"], home);
    console.log(`      (exited after ${outcome.seconds} s)`);
    assert.equal(outcome.code, 1, `exit code (stderr: ${outcome.stderr})`);
    const tried = `kubeconfig ${kubeconfig}, context nowhere-context, server https://127.0.0.1:${port}`;
    assert.ok(
      outcome.stderr.includes(`no Kubernetes API server reachable (${tried}) within 2 s`),
      `stderr: ${outcome.stderr}`,
    );
    assert.match(outcome.stderr, /ECONNREFUSED/);
    assert.match(outcome.stdout, /Kubernetes API server not reachable yet; waiting/, "one line while it waits");
    assert.doesNotMatch(outcome.stdout + outcome.stderr, /skipTLSVerify|watch failed/);
  });

  it("gives up on a server that takes connections and never answers", async () => {
    const sockets: Socket[] = [];
    const silent: Server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const port = (silent.address() as { port: number }).port;
      const kubeconfig = kubeconfigFor(home, `https://127.0.0.1:${port}`);
      const outcome = await runOperator(["--kubeconfig", kubeconfig, "--cluster-wait-secs", "2"], home);
      assert.equal(outcome.code, 1, `exit code (stderr: ${outcome.stderr})`);
      assert.match(outcome.stderr, /no Kubernetes API server reachable .* within 2 s: no answer/);
    } finally {
      sockets.forEach((socket) => socket.destroy());
      silent.close();
    }
  });

  it("says why a plain-HTTP server without insecure-skip-tls-verify cannot be used, at once", async () => {
    const kubeconfig = kubeconfigFor(home, "http://127.0.0.1:1");
    const outcome = await runOperator(["--kubeconfig", kubeconfig], home);
    assert.equal(outcome.code, 1);
    assert.match(
      outcome.stderr,
      /server http:\/\/127\.0\.0\.1:1: .*plain HTTP only to a cluster marked insecure-skip-tls-verify: true/,
    );
  });
});

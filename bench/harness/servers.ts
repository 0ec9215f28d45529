import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, credentials, Metadata } from "@grpc/grpc-js";
import { GRPCInferenceServiceClient, GRPCInferenceServiceService } from "../../proto/gen/ts/grpc_service.js";
import { CLI, REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import { freePorts } from "../../e2e/support/ports.js";
import { CACHE_DIR } from "../../e2e/support/prerequisites.js";
import { encodeRequest } from "./requests.js";

const INFER_PATH = GRPCInferenceServiceService.modelInfer.path;

/**
 * Every server the benchmark drives, started on loopback by the same rules: its own
 * process group, pinned to the server's cores when asked, ready once its identity model
 * answers ModelReady (the ceilings, which serve nothing else, once their port accepts; the
 * forwarders once an identity request comes back through them).
 */

export const SERVER_IDS = [
  "dataplane",
  "dataplane-all-cores",
  "grpc-js-ceiling",
  "go-ceiling",
  "triton",
  "kserve",
  "mlserver",
  "dynamo",
  "dataplane-forward",
  "dataplane-pass-through",
  "triton-direct",
  "dataplane-python",
  "h2-proxy",
  "grpcjs-proxy",
  "upstream-direct",
] as const;
export type ServerId = (typeof SERVER_IDS)[number];

export const SERVER_LABELS: Readonly<Record<ServerId, string>> = {
  dataplane: "dynamo-kserve (1 worker)",
  "dataplane-all-cores": "dynamo-kserve (--grpc-workers 0)",
  "grpc-js-ceiling": "bare grpc-js (ceiling)",
  "go-ceiling": "bare grpc-go (ceiling)",
  triton: "Triton (python backend)",
  kserve: "KServe ModelServer",
  mlserver: "MLServer",
  dynamo: "NVIDIA Dynamo frontend",
  "dataplane-forward": "dynamo-kserve forwarding (Triton's configs: tensors checked)",
  "dataplane-pass-through": "dynamo-kserve forwarding (no tensors declared: passed through)",
  "triton-direct": "Triton direct",
  "dataplane-python": "dynamo-kserve python engine (Triton's model.py)",
  "h2-proxy": "bare node:http2 stream proxy (ceiling)",
  "grpcjs-proxy": "grpc-js server + grpc-js client, bytes only (ceiling)",
  "upstream-direct": "bare grpc-js upstream, direct",
};

/** The servers that forward to an upstream the harness starts first (the scenario names which). */
export const FORWARDERS: readonly ServerId[] = [
  "h2-proxy",
  "grpcjs-proxy",
  "dataplane-forward",
  "dataplane-pass-through",
];
export const forwards = (id: ServerId): boolean => FORWARDERS.includes(id);
/** Servers a forwarding scenario calls directly: the upstream alone, what forwarding is measured against. */
export const DIRECT_SERVERS: readonly ServerId[] = ["triton-direct", "upstream-direct"];

export interface BenchServer {
  readonly id: ServerId;
  readonly address: string;
  /** host:port of its KServe v2 REST endpoint, when it has one. */
  readonly httpAddress?: string;
  /** Its process group (the server and every process it started), for what it costs in CPU. */
  readonly processGroup: number;
  /** Why it is gone when it ended before stop() was called (its exit and last output), else undefined. */
  exited(): string | undefined;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Cores for the server (taskset), e.g. "0"; undefined: unpinned. */
  readonly cpus: string | undefined;
  /** FP32 element counts the ceilings pre-encode responses for. */
  readonly ceilingSizes: readonly number[];
  /** For the forwarders (FORWARDERS): the server to forward to, host:port. */
  readonly upstream?: string;
  /** More options for a data plane (e.g. --allow-client-shm); other servers ignore them. */
  readonly dataplaneOptions?: readonly string[];
}

/** Where bench/setup.sh puts what the peers need (venvs, the Go ceiling, Triton's files). */
export const BENCH_CACHE = join(CACHE_DIR, "bench");
const venvProgram = (venv: string, program: string) => join(CACHE_DIR, venv, "bin", program);

/** The python engine's server: the bench's Triton repository, run with the peers' Python (numpy). */
export const PYTHON_REPOSITORY = join(REPO_ROOT, "bench", "peers", "triton");
export const PYTHON_ARGS: readonly string[] = ["--python", venvProgram("venv-peers", "python")];
const TRITON_DIR = join(CACHE_DIR, "tritonserver");
/** Python peers load slowly (Triton starts a Python stub per model). */
const STARTUP_TIMEOUT_MS = 180_000;

/** Why a peer cannot run here, as its setup recorded it (the exact error), or undefined. */
export function setupError(id: ServerId): string | undefined {
  const file = join(BENCH_CACHE, `${id}.unavailable`);
  return existsSync(file) ? readFileSync(file, "utf8").trim() : undefined;
}

export async function startBenchServer(id: ServerId, options: StartOptions): Promise<BenchServer> {
  const unavailable = setupError(id);
  if (unavailable !== undefined) throw new Error(unavailable);
  // Its gRPC port, an HTTP port, and two more for servers that want them (metrics, a worker).
  const ports = await freePorts(4);
  const port = ports[0]!;
  const { command, args, env, ready, scratch, httpPort } = commandFor(id, ports, options);
  const child = spawnGroup(command, args, env, options.cpus);
  const output: string[] = [];
  const keep = (chunk: Buffer) => output.push(chunk.toString()) > 50 && output.shift();
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const address = `127.0.0.1:${port}`;
  const lastWords = () => output.join("").trim().slice(-1500);
  let stopping = false;
  const stop = async () => {
    stopping = true;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      killGroup(child, "SIGTERM");
      const timer = setTimeout(() => killGroup(child, "SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  };
  const probe = () =>
    ready === "port"
      ? portAccepts(address)
      : ready === "infer"
        ? inferAnswers(address)
        : modelReady(address, "identity_fp32");
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    const exited = child.exitCode !== null || child.signalCode !== null;
    if (exited || Date.now() > deadline) {
      await stop();
      const why = exited
        ? `exited (${child.exitCode ?? child.signalCode})`
        : `not ready in ${STARTUP_TIMEOUT_MS / 1000} s`;
      throw new Error(`${id} ${why}: ${lastWords()}`);
    }
    if (await probe().catch(() => false)) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return {
    id,
    address,
    ...(httpPort !== undefined ? { httpAddress: `127.0.0.1:${httpPort}` } : {}),
    processGroup: child.pid!,
    exited: () =>
      stopping || (child.exitCode === null && child.signalCode === null)
        ? undefined
        : `${id} exited (${child.exitCode ?? child.signalCode}) during the run: ${lastWords()}`,
    stop,
  };
}

/**
 * A repository forwarding Triton's benchmark models to `upstream` with configs that name
 * only the upstream: requests and replies pass through as bytes. The caller removes it.
 */
export function passThroughRepository(upstream: string): string {
  const folder = mkdtempSync(join(tmpdir(), "dynamo-kserve-pass-through-"));
  for (const model of readdirSync(join(REPO_ROOT, "bench", "peers", "triton"))) {
    mkdirSync(join(folder, model, "1"), { recursive: true });
    writeFileSync(
      join(folder, model, "config.pbtxt"),
      `name: "${model}"\nbackend: "kserve-grpc"\nparameters { key: "upstream" value { string_value: "${upstream}" } }\n`,
    );
  }
  return folder;
}

/** The data plane's command line in every benchmark: loopback, quiet, a fixed repository. */
export function dataplaneArgs(repository: string, port: number, httpPort = 0): string[] {
  return [
    "dataplane",
    "--model-repository",
    repository,
    "--model-control-mode",
    "none",
    "--host",
    "127.0.0.1",
    "--grpc-port",
    String(port),
    "--http-port",
    String(httpPort),
    "--metrics-port",
    "0",
    "--log-level",
    "warn",
  ];
}

interface Command {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  /** Ready once: its port accepts, its identity model is ready, or it answers an identity request (forwarders). */
  readonly ready: "port" | "model" | "infer";
  /** A scratch folder removed when the server stops. */
  readonly scratch?: string;
  /** Its KServe v2 REST port, when the HTTP scenarios can use it. */
  readonly httpPort?: number;
}

function commandFor(id: ServerId, ports: readonly number[], options: StartOptions): Command {
  const [port, httpPort, side, otherSide] = ports as [number, number, number, number];
  const node = (script: string, args: string[]): Command => ({
    command: process.execPath,
    args: [script, ...args],
    env: {},
    ready: "model",
  });
  const dataplane = (repository: string, extra: string[] = []): Command => ({
    ...node(CLI, [...dataplaneArgs(repository, port, httpPort), ...extra, ...(options.dataplaneOptions ?? [])]),
    httpPort,
  });
  const sizes = options.ceilingSizes.join(",");
  switch (id) {
    case "dataplane":
      return dataplane(join(REPO_ROOT, "bench", "models"));
    case "dataplane-all-cores":
      return dataplane(join(REPO_ROOT, "bench", "models"), ["--grpc-workers", "0"]);
    case "dataplane-forward":
      // The Triton repository itself, unchanged: its python models are forwarded to that Triton.
      return dataplane(join(REPO_ROOT, "bench", "peers", "triton"), [
        ...["--forward-unsupported", options.upstream!, "--forward-python"],
      ]);
    case "dataplane-python":
      // Triton's repository unchanged: its model.py files run in our python engine.
      return dataplane(PYTHON_REPOSITORY, [...PYTHON_ARGS]);
    case "dataplane-pass-through": {
      // Ready once a request comes back through it: a bare upstream answers ModelInfer only.
      const folder = passThroughRepository(options.upstream!);
      return { ...dataplane(folder), scratch: folder, ready: "infer" };
    }
    case "h2-proxy":
    case "grpcjs-proxy":
      return {
        ...node(join(REPO_ROOT, "dist", "bench", "ceilings", `${id}.js`), [String(port), options.upstream!]),
        ready: "infer",
      };
    // upstream-direct: the same bare server, called directly in the forward-bare-* scenarios.
    case "grpc-js-ceiling":
    case "upstream-direct":
      return {
        ...node(join(REPO_ROOT, "dist", "bench", "ceilings", "grpcjs.js"), [String(port), sizes]),
        ready: "port",
      };
    case "go-ceiling":
      return {
        command: join(BENCH_CACHE, "ceiling-go"),
        args: ["-port", String(port), "-sizes", sizes],
        env: {},
        ready: "port",
      };
    case "triton":
    case "triton-direct":
      return {
        command: join(TRITON_DIR, "bin", "tritonserver"),
        args: [
          "--model-repository",
          join(REPO_ROOT, "bench", "peers", "triton"),
          "--backend-directory",
          join(TRITON_DIR, "backends"),
          "--grpc-port",
          String(port),
          "--http-port",
          String(httpPort),
          "--metrics-port",
          String(side),
          "--log-verbose",
          "0",
        ],
        env: {
          LD_LIBRARY_PATH: readFileSync(join(TRITON_DIR, "libs-path"), "utf8").trim(),
          PATH: `${join(CACHE_DIR, "venv-peers", "bin")}:${process.env["PATH"]}`,
        },
        ready: "model",
        httpPort,
      };
    case "kserve":
      return {
        command: venvProgram("venv-kserve", "python"),
        args: [
          join(REPO_ROOT, "bench", "peers", "kserve", "identity.py"),
          "--grpc_port",
          String(port),
          "--http_port",
          String(side),
        ],
        env: {},
        ready: "model",
      };
    case "mlserver": {
      // MLServer reads settings from the environment; the models from a folder of its own.
      const folder = mkdtempSync(join(tmpdir(), "dynamo-kserve-mlserver-"));
      cpSync(join(REPO_ROOT, "bench", "peers", "mlserver"), folder, { recursive: true });
      return {
        command: venvProgram("venv-mlserver", "mlserver"),
        args: ["start", folder],
        env: {
          MLSERVER_GRPC_PORT: String(port),
          MLSERVER_HTTP_PORT: String(side),
          MLSERVER_METRICS_PORT: String(otherSide),
          MLSERVER_LOGGING_LEVEL: "WARNING",
        },
        ready: "model",
        scratch: folder,
      };
    }
    case "dynamo": {
      // The frontend and the worker registering the identity models, one process group;
      // their file-based discovery lives in a scratch folder.
      const discovery = mkdtempSync(join(tmpdir(), "dynamo-kserve-dynamo-"));
      return {
        command: join(REPO_ROOT, "bench", "peers", "dynamo", "serve.sh"),
        args: [join(CACHE_DIR, "venv-dynamo"), String(port), String(side), discovery],
        env: {},
        ready: "model",
        scratch: discovery,
      };
    }
  }
}

function spawnGroup(command: string, args: readonly string[], env: NodeJS.ProcessEnv, cpus: string | undefined) {
  const [program, programArgs] = cpus === undefined ? [command, args] : ["taskset", ["-c", cpus, command, ...args]];
  return spawn(program, programArgs, {
    env: { ...process.env, ...env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

async function portAccepts(address: string): Promise<boolean> {
  const client = new GRPCInferenceServiceClient(address, credentials.createInsecure());
  try {
    return await new Promise((resolve) =>
      client.waitForReady(Date.now() + 1000, (error) => resolve(error === undefined || error === null)),
    );
  } finally {
    client.close();
  }
}

/** One identity FP32 1 KiB ModelInfer answered OK: what a forwarder is for, whatever its upstream serves besides. */
async function inferAnswers(address: string): Promise<boolean> {
  const client = new Client(address, credentials.createInsecure());
  const request = Buffer.from(encodeRequest({ kind: "fp32", elements: 256 }));
  const asIs = (bytes: Buffer): Buffer => bytes;
  try {
    return await new Promise((resolve) =>
      client.makeUnaryRequest(
        INFER_PATH,
        asIs,
        asIs,
        request,
        new Metadata(),
        { deadline: Date.now() + 2000 },
        (error) => resolve(error === null),
      ),
    );
  } finally {
    client.close();
  }
}

async function modelReady(address: string, model: string): Promise<boolean> {
  const client = new GRPCInferenceServiceClient(address, credentials.createInsecure());
  try {
    return await new Promise((resolve) =>
      client.modelReady({ name: model, version: "" }, new Metadata(), { deadline: Date.now() + 2000 }, (error, reply) =>
        resolve(error === null && reply.ready),
      ),
    );
  } finally {
    client.close();
  }
}

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { requireProgram, TOOLS_PYTHON } from "../../../e2e/support/prerequisites.js";
import { START_OBJECT_STORE, requireObjectStore, type ObjectStoreServer } from "../../../lib/test/object-stores.js";
import { REPO_ROOT } from "../fixtures/paths.js";
import {
  MODELS_PYTHON,
  requireTritonPeers,
  requireTritonServer,
  startTritonServerOnObjectStore,
  type Peer,
} from "../fixtures/peers.js";
import { PYTHON_MODELS } from "../fixtures/python-models.js";
import { startServer, type ServerProcess } from "../fixtures/server.js";

/**
 * One model repository in a bucket, read by the data plane and by a real Triton at once:
 * tritonclient (gRPC and HTTP) must see the same index, metadata, config and outputs from
 * both, at start and after a new version is put in the bucket and loaded (explicit mode,
 * RepositoryModelLoad). S3 on SeaweedFS and on moto (Triton: AWS_* credentials), gs:// on
 * fake-gcs-server (Triton: CLOUD_STORAGE_EMULATOR_ENDPOINT); about 13 s each. Not Azure Blob:
 * Triton's as:// always means https://ACCOUNT.blob.core.windows.net, so it cannot read Azurite. Not the
 * ONNX example: the Triton laid out from nvidia-pytriton has only the Python backend.
 */

const run = promisify(execFile);
const OBSERVE = join(REPO_ROOT, "dataplane", "test", "conformance", "object_store_parity.py");
const ADD_SUB = join(PYTHON_MODELS, "add_sub");
const ADD_SUB_CONFIG = readFileSync(join(ADD_SUB, "config.pbtxt"), "utf8");
const ADD_SUB_MODEL = readFileSync(join(ADD_SUB, "1", "model.py"));
/** A second model, in the bucket but not loaded at start (explicit mode). */
const LATER = "add_sub_later";
const MODELS = ["add_sub", LATER];

type Observed = Record<"grpc" | "http", Record<string, unknown>>;

/** What tritonclient sees of the server at `grpc` and `http` (after loading `load`, if given). */
async function observe(grpc: string, http: string, load?: string): Promise<Observed> {
  const args = [OBSERVE, grpc, http, MODELS.join(","), ...(load === undefined ? [] : ["--load", load])];
  const { stdout } = await run(TOOLS_PYTHON, args, { timeout: 120_000 });
  const observed = JSON.parse(stdout) as Observed;
  for (const protocol of ["grpc", "http"] as const)
    for (const model of MODELS) {
      const config = observed[protocol][`${model} config`] as { answer?: unknown };
      if (config.answer !== undefined) config.answer = asWritten(config.answer, model);
    }
  return observed;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const same = (value: Json | undefined, expected: Json): boolean => JSON.stringify(value) === JSON.stringify(expected);

/** `optimization` as Triton completes it: pinned input and output memory, every other field its default. */
function isTritonsOptimization(value: Json | undefined): boolean {
  if (value === undefined || value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const { input_pinned_memory: input, output_pinned_memory: output, ...others } = value;
  return (
    same(input, { enable: true }) &&
    same(output, { enable: true }) &&
    Object.values(others).every((other) => other === false || other === 0 || other === "PRIORITY_DEFAULT")
  );
}

/**
 * A model's config without what Triton completes in it: the Python backend's
 * default_model_filename, each instance group's name (`<model>_<i>`), pinned input and output
 * memory, the default version policy (latest 1). The data plane applies the same defaults but
 * reports the config as written (the same for a local repository: not a difference of object
 * storage); on both sides these fields are removed when they hold Triton's completion or are
 * unset, and every other field is compared.
 */
function asWritten(answer: unknown, model: string): Json {
  const config = structuredClone(answer) as JsonObject;
  if (["model.py", ""].includes(config["default_model_filename"] as string)) delete config["default_model_filename"];
  if (isTritonsOptimization(config["optimization"])) delete config["optimization"];
  if (same(config["version_policy"], { latest: { num_versions: 1 } })) delete config["version_policy"];
  const groups = (config["instance_group"] ?? []) as JsonObject[];
  groups.forEach((group, index) => {
    if ([`${model}_${index}`, ""].includes(group["name"] as string)) delete group["name"];
  });
  return config;
}

for (const kind of ["seaweedfs", "moto", "fake-gcs"] as const) {
  describe(`the same repository in object storage (${kind}) through the data plane and through Triton`, function () {
    this.timeout(180_000);
    let store: ObjectStoreServer;
    let ours: ServerProcess | undefined;
    let triton: (Peer & { readonly httpAddress: string }) | undefined;
    const scratch: string[] = [];
    const folder = (name: string): string => {
      const dir = mkdtempSync(join(tmpdir(), `parity-${name}-`));
      scratch.push(dir);
      return dir;
    };
    const both = (load?: string): Promise<[Observed, Observed]> =>
      Promise.all([
        observe(`127.0.0.1:${ours!.grpcPort}`, `127.0.0.1:${ours!.httpPort}`, load),
        observe(triton!.address, triton!.httpAddress, load),
      ]);

    before(async function () {
      requireProgram(this, TOOLS_PYTHON, "the tritonclient venv", "run scripts/setup-python.sh");
      requireTritonPeers(this);
      requireTritonServer(this);
      requireObjectStore(this, kind);
      store = await START_OBJECT_STORE[kind]();
      await store.createBucket("models");
      await store.putFolder(ADD_SUB, "models", "repo/add_sub");
      await store.put("models", `repo/${LATER}/config.pbtxt`, ADD_SUB_CONFIG.replace('"add_sub"', `"${LATER}"`));
      await store.put("models", `repo/${LATER}/1/model.py`, ADD_SUB_MODEL);
      const secrets = folder("secret");
      await store.writeSecretDir(secrets);
      const location = store.location("models", "repo");
      const explicit = ["--model-control-mode", "explicit", "--load-model", "add_sub"];
      // Each kept as soon as it runs: after() stops whichever started if the other did not.
      await Promise.all([
        startServer([
          ...["--model-repository", location, ...store.dataPlaneArguments(secrets)],
          ...["--model-cache-dir", folder("cache"), "--python", MODELS_PYTHON, ...explicit],
        ]).then((started) => (ours = started)),
        startTritonServerOnObjectStore(store, [location], folder("mount"), explicit).then(
          (started) => (triton = started),
        ),
      ]);
    });

    after(async () => {
      await ours?.stop();
      await triton?.kill();
      await store?.stop();
      for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
    });

    it("lists the same index and answers the same metadata, config and outputs", async () => {
      const [mine, theirs] = await both();
      assert.deepEqual(mine, theirs);
      // Explicit mode: the model not loaded is listed without a state by both.
      assert.deepEqual(mine.grpc["index"], [
        ["add_sub", "1", "READY"],
        [LATER, "", ""],
      ]);
      assert.deepEqual((mine.grpc["add_sub infer"] as { answer: unknown }).answer, {
        OUTPUT0: [2, 3, 4, 3],
        OUTPUT1: [1, 1, 2, 5],
      });
    });

    it("after a new version is put in the bucket and RepositoryModelLoad, and a second model loaded", async () => {
      await store.put("models", "repo/add_sub/2/model.py", ADD_SUB_MODEL);
      await store.put("models", "repo/add_sub/config.pbtxt", `${ADD_SUB_CONFIG}\nversion_policy: { all: {} }\n`);
      const [mine, theirs] = await both("add_sub");
      assert.deepEqual(mine, theirs);
      const [mineLater, theirsLater] = await both(LATER);
      assert.deepEqual(mineLater, theirsLater);
      assert.deepEqual(
        (mineLater.http["index"] as string[][]).map((entry) => entry.join(" ")),
        ["add_sub 1 READY", "add_sub 2 READY", `${LATER} 1 READY`],
      );
    });
  });
}

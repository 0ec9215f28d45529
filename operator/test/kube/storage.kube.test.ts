import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { parseAllDocuments } from "yaml";
import type { V1ConfigMap, V1Deployment, V1Secret } from "@kubernetes/client-node";
import { eventually } from "../../../e2e/support/eventually.js";
import { freePort } from "../../../e2e/support/ports.js";
import { CLI, EXAMPLES } from "../../../dataplane/test/fixtures/paths.js";
import { requireObjectStore, startSeaweedFs, type ObjectStoreServer } from "../../../lib/test/object-stores.js";
import { REPO_ROOT, type TestCluster } from "../../../e2e/cluster/cluster.js";
import { testCluster } from "../../../e2e/cluster/mocha-global.js";
import type { DynamoKserveModel, DynamoKserveRepository } from "../../src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject, repositoryObject } from "../fixtures/kube.js";
import { useOperator } from "../fixtures/operator.js";

/**
 * Models in object storage, as the API server and the operator see them: which storageUri
 * forms and combinations the CRDs accept, what the data-plane pods carry (the Secret by
 * name, as files), and ModelFilesReady where the operator can tell without a store
 * (a missing or incomplete Secret, a missing CA bundle, no Secret at all).
 */

const GROUP_VERSION = "dynamokserve.dev/v1alpha1";
const MODEL_FILES_RULE =
  /set exactly one of modelFiles\.persistentVolumeClaim, modelFiles\.image, modelFiles\.configMap and modelFiles\.storageUri/;
const URI_FORM = /storageUri must be s3:\/\/bucket\/prefix, s3:\/\/host:port\/bucket\/prefix/;

const ACCEPTED_URIS = [
  "s3://models",
  "s3://models/triton/",
  "s3://my.bucket-1/a/b c/d",
  "s3://127.0.0.1:8333/models/triton",
  "s3://minio.storage.svc:9000/models",
  "s3://https://minio.storage.svc:9000/models/triton",
  "s3://[::1]:9000/models",
  "gs://models/triton",
  "as://account1/container/triton",
];

/** Each URI with the message it is refused with. */
const REFUSED_URIS: [string, RegExp][] = [
  ["/srv/models", URI_FORM],
  ["http://minio:9000/models", URI_FORM],
  ["s3://127.0.0.1:8333", URI_FORM],
  ["s3://https://models/triton", URI_FORM],
  ["s3://models//triton", URI_FORM],
  ["as://ab/container", URI_FORM],
  ["as://account1", URI_FORM],
  ["gs://models/triton/../other", /storageUri must not hold '\.' or '\.\.' path segments/],
  ["gs://models/./triton", /storageUri must not hold '\.' or '\.\.' path segments/],
];

describe("models in object storage: the CRDs' rules (real API server)", function () {
  this.timeout(60_000);
  let cluster: TestCluster;
  let namespace: string;

  before(async function () {
    cluster = testCluster(this);
    namespace = await new KubeTestClient(cluster.adminConfig()).createNamespace("storage-crd");
  });

  const create = async (plural: string, kind: string, spec: Record<string, unknown>) => {
    const response = await cluster.request(
      "POST",
      `/apis/${GROUP_VERSION}/namespaces/${namespace}/${plural}?dryRun=All`,
      {
        apiVersion: GROUP_VERSION,
        kind,
        metadata: { name: "x" },
        spec,
      },
    );
    return {
      status: response.status,
      body: response.body,
      message: (JSON.parse(response.body) as { message?: string }).message ?? "",
    };
  };
  const repository = (spec: Record<string, unknown>) =>
    create("dynamokserverepositories", "DynamoKserveRepository", spec);
  const model = (modelFiles: Record<string, unknown>, rest: Record<string, unknown> = {}) =>
    create("dynamokservemodels", "DynamoKserveModel", {
      modelConfig: { inline: IDENTITY_CONFIG },
      modelFiles,
      ...rest,
    });

  it("accepts Triton's forms of a location, for a repository and a model's files", async () => {
    for (const storageUri of ACCEPTED_URIS) {
      const accepted = await repository({ storageUri });
      assert.equal(accepted.status, 201, `${storageUri}: ${accepted.body}`);
      const files = await model({ storageUri });
      assert.equal(files.status, 201, `${storageUri}: ${files.body}`);
    }
  });

  it("refuses other forms, saying which forms there are", async () => {
    for (const [storageUri, message] of REFUSED_URIS) {
      for (const refused of [await repository({ storageUri }), await model({ storageUri })]) {
        assert.equal(refused.status, 422, `${storageUri}: ${refused.body}`);
        assert.match(refused.message, message, storageUri);
      }
    }
  });

  it("keeps a repository's sources apart: storageUri alone, or the ConfigMap and claim", async () => {
    assert.match((await repository({})).message, /set configMapRef, persistentVolumeClaim \(or both\), or storageUri/);
    for (const other of [{ configMapRef: { name: "configs" } }, { persistentVolumeClaim: { claimName: "models" } }]) {
      const refused = await repository({ storageUri: "s3://models/triton", ...other });
      assert.match(refused.message, /spec\.storageUri: Invalid value: .*storageUri is the whole repository/);
    }
    const stray = await repository({ configMapRef: { name: "configs" }, storage: { secretName: "creds" } });
    assert.match(stray.message, /spec\.storage: Invalid value: .*storage applies to storageUri/);
  });

  it("keeps a model's files to one source, storageUri counted, and storage only beside it", async () => {
    assert.match((await model({})).message, MODEL_FILES_RULE);
    const two = await model({ storageUri: "s3://models/ident", persistentVolumeClaim: { claimName: "models" } });
    assert.match(two.message, MODEL_FILES_RULE);
    const subPath = await model({ storageUri: "s3://models/ident", subPath: "ident" });
    assert.match(
      subPath.message,
      /spec\.modelFiles\.subPath: Invalid value: .*with storageUri, name the model's folder in the URI/,
    );
    const stray = await model({ persistentVolumeClaim: { claimName: "models" } }, { storage: { secretName: "creds" } });
    assert.match(stray.message, /spec\.storage: Invalid value: .*storage applies to modelFiles\.storageUri/);
    const badSize = await model({ storageUri: "s3://models/ident" }, { storage: { cacheSize: "lots" } });
    assert.match(badSize.message, /spec\.storage\.cacheSize/);
  });

  it("accepts the example a newcomer applies (a Secret and a repository in S3)", () => {
    const example = join(REPO_ROOT, "examples", "repositories", "s3.yaml");
    const output = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", example);
    assert.match(output, /dynamokserverepository\.dynamokserve\.dev\/models-in-s3 created \(server dry run\)/);
  });

  it("fills in storage's defaults: a 10Gi cache, the CA bundle's key ca.crt", async () => {
    const created = await repository({
      storageUri: "s3://models/triton",
      storage: { caBundle: { configMapName: "ca" } },
    });
    assert.equal(created.status, 201, created.body);
    const { spec } = JSON.parse(created.body) as { spec: { storage: unknown } };
    assert.deepEqual(spec.storage, { caBundle: { configMapName: "ca", key: "ca.crt" }, cacheSize: "10Gi" });
  });
});

const secretOf = (namespace: string, name: string, data: Record<string, string>): V1Secret => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name, namespace },
  type: "Opaque",
  data: Object.fromEntries(Object.entries(data).map(([key, value]) => [key, Buffer.from(value).toString("base64")])),
});

/** Credential values no object, Event or log line may ever hold. */
const ACCESS_KEY = "AKIAOPERATORTEST0001";
const SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/operator-test-secret";
const ROTATED_SECRET_KEY = "rotated/secret/key/operator-test-0002";

describe("models in object storage: pods and ModelFilesReady without a store (real API server)", function () {
  this.timeout(120_000);
  const suite = useOperator("storage", ["--storage-check-secs", "2"]);
  let kube: KubeTestClient;
  let namespace: string;
  before(() => ({ kube, namespace } = suite));

  const readModel = (name: string) => kube.read<DynamoKserveModel>(GROUP_VERSION, "DynamoKserveModel", namespace, name);
  const readRepository = (name: string) =>
    kube.read<DynamoKserveRepository>(GROUP_VERSION, "DynamoKserveRepository", namespace, name);
  const deployment = (name: string) => kube.read<V1Deployment>("apps/v1", "Deployment", namespace, name);
  /** A user's edit of a Secret's keys (kubectl patch), as a rotation is. */
  const rotate = (name: string, data: Record<string, string>) =>
    kube.mergePatch({ ...secretOf(namespace, name, data), metadata: { name, namespace } });

  it("mounts the Secret as read-only files and the cache as a bounded emptyDir, and passes the storage options", async () => {
    await kube.create(
      modelObject(namespace, "ident", {
        modelConfig: { inline: IDENTITY_CONFIG },
        modelFiles: { storageUri: "s3://127.0.0.1:1/models/ident" },
        storage: { secretName: "creds", cacheSize: "1Gi", s3: { region: "eu-west-1" } },
      }),
    );
    const pod = (await eventually(() => deployment("ident"), 30_000)).spec!.template.spec!;
    const container = pod.containers[0]!;
    const args = container.args!;
    const after = (flag: string) => args[args.indexOf(flag) + 1];
    assert.equal(after("--model-files"), "ident=s3://127.0.0.1:1/models/ident");
    assert.equal(after("--storage-secret-dir"), "/etc/dynamo-kserve/storage-credentials");
    assert.equal(after("--model-cache-max-bytes"), String(2 ** 30));
    assert.equal(after("--s3-region"), "eu-west-1");
    assert.deepEqual(
      { ...pod.volumes?.find((volume) => volume.name === "storage-credentials")?.secret },
      {
        secretName: "creds",
        defaultMode: 0o440,
      },
    );
    assert.deepEqual(
      { ...pod.volumes?.find((volume) => volume.name === "model-cache")?.emptyDir },
      { sizeLimit: "1Gi" },
    );
    assert.equal(container.volumeMounts?.find((mount) => mount.name === "storage-credentials")?.readOnly, true);
  });

  it("says SecretMissing, then SecretInvalid; a rotated Secret is read again without touching the pod template", async () => {
    await eventually(async () => {
      const model = await readModel("ident");
      assert.equal(conditionOf(model, "ModelFilesReady")?.reason, "SecretMissing", JSON.stringify(model.status));
      assert.match(
        conditionOf(model, "ModelFilesReady")!.message,
        /Secret creds \(storage\.secretName\) does not exist/,
      );
    }, 30_000);
    await kube.create(secretOf(namespace, "creds", { AWS_ACCESS_KEY_ID: ACCESS_KEY }));
    await eventually(async () => {
      const condition = conditionOf(await readModel("ident"), "ModelFilesReady");
      assert.equal(condition?.reason, "SecretInvalid");
      assert.match(condition!.message, /needs the keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/);
    }, 30_000);
    const before = await deployment("ident");
    await rotate("creds", { AWS_SECRET_ACCESS_KEY: SECRET_KEY });
    // The operator reads the rotated Secret (it lists the closed port now) ...
    await eventually(async () => {
      const condition = conditionOf(await readModel("ident"), "ModelFilesReady");
      assert.notEqual(condition?.reason, "SecretInvalid");
      assert.notEqual(condition?.reason, "SecretMissing");
      assert.equal(condition?.status, "False");
    }, 30_000);
    await rotate("creds", { AWS_SECRET_ACCESS_KEY: ROTATED_SECRET_KEY });
    await new Promise((resolve) => setTimeout(resolve, 5000));
    // ... and the pods were not rolled: the template (and the Deployment's generation) never changed.
    const after = await deployment("ident");
    assert.equal(after.metadata?.generation, before.metadata?.generation);
    assert.deepEqual(after.spec?.template, before.spec?.template);
  });

  it("says CheckedByPods without a Secret (workload identity), and CaBundleMissing until the CA's ConfigMap exists", async () => {
    await kube.create(
      repositoryObject(namespace, "ambient", {
        storageUri: "gs://models/triton",
        storage: { caBundle: { configMapName: "storage-ca" } },
        pod: { serviceAccountName: "model-reader" },
      }),
    );
    await eventually(async () => {
      const condition = conditionOf(await readRepository("ambient"), "ModelFilesReady");
      assert.equal(condition?.reason, "CaBundleMissing");
      assert.match(condition!.message, /ConfigMap storage-ca \(storage\.caBundle\) does not exist/);
    }, 30_000);
    await kube.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "storage-ca", namespace },
      data: { "ca.crt": "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n" },
    } as V1ConfigMap);
    await eventually(async () => {
      const condition = conditionOf(await readRepository("ambient"), "ModelFilesReady");
      assert.equal(condition?.status, "Unknown");
      assert.equal(condition?.reason, "CheckedByPods");
    }, 30_000);
    const pod = (await deployment("ambient")).spec!.template.spec!;
    assert.equal(pod.serviceAccountName, "model-reader");
    const args = pod.containers[0]!.args!;
    assert.deepEqual(args.slice(0, 3), ["dataplane", "--model-repository", "gs://models/triton"]);
    assert.equal(args[args.indexOf("--storage-ca-file") + 1], "/etc/dynamo-kserve/storage-ca/ca.crt");
    assert.equal(args.includes("--storage-secret-dir"), false);
  });

  it("puts no credential value in any object, Event, status or log line", async () => {
    const everything = [
      ...(await Promise.all(
        ["Deployment", "Service", "ConfigMap", "Event"].map(
          async (kind) => (await kube.api.list(kind === "Deployment" ? "apps/v1" : "v1", kind, namespace)).items,
        ),
      )),
      (await kube.api.list(GROUP_VERSION, "DynamoKserveModel", namespace)).items,
      (await kube.api.list(GROUP_VERSION, "DynamoKserveRepository", namespace)).items,
      suite.operator.logs,
    ];
    const text = JSON.stringify(everything);
    assert.ok(text.includes("creds"), "the Secret is named");
    for (const value of [ACCESS_KEY, SECRET_KEY, ROTATED_SECRET_KEY]) {
      assert.equal(text.includes(value), false, `${value} appears`);
      assert.equal(text.includes(Buffer.from(value).toString("base64")), false, `${value} appears in base64`);
    }
  });
});

describe("models in object storage: ModelFilesReady against SeaweedFS's S3 gateway (real API server)", function () {
  this.timeout(180_000);
  const suite = useOperator("storage-s3", ["--storage-check-secs", "2"]);
  let kube: KubeTestClient;
  let namespace: string;
  let store: ObjectStoreServer;
  /** Credentials SeaweedFS refuses (a well-formed key pair of nobody). */
  const WRONG = {
    AWS_ACCESS_KEY_ID: "AKIAWRONGWRONGWRONG1",
    AWS_SECRET_ACCESS_KEY: "wrong/secret/access/key/for/the/test",
  };

  before(async function () {
    requireObjectStore(this, "seaweedfs");
    ({ kube, namespace } = suite);
    store = await startSeaweedFs();
    await store.createBucket("models");
    await store.putFolder(join(EXAMPLES, "add_sub_onnx"), "models", "triton/add_sub_onnx");
    await store.put("models", "elsewhere/README.md", "not a model");
    await kube.create(secretOf(namespace, "good", { ...store.secretValues }));
    await kube.create(secretOf(namespace, "wrong", WRONG));
  });
  after(async () => {
    await store?.stop();
  });

  const readRepository = (name: string) =>
    kube.read<DynamoKserveRepository>(GROUP_VERSION, "DynamoKserveRepository", namespace, name);
  /** A repository at `storageUri` read with Secret `secretName`; resolves with its ModelFilesReady once it is `reason`. */
  const repositoryAt = async (name: string, storageUri: string, secretName: string, reason: string) => {
    await kube.create(repositoryObject(namespace, name, { storageUri, storage: { secretName } }));
    return eventually(async () => {
      const repository = await readRepository(name);
      const condition = conditionOf(repository, "ModelFilesReady");
      assert.equal(condition?.reason, reason, JSON.stringify(repository.status));
      return condition!;
    }, 30_000);
  };

  it("Ready with the right Secret, naming the models it found", async () => {
    const condition = await repositoryAt("right", store.location("models", "triton"), "good", "Ready");
    assert.equal(condition.status, "True");
    assert.equal(condition.message, `${store.location("models", "triton")} holds models add_sub_onnx`);
    await kube.create(
      modelObject(namespace, "add-sub", {
        modelName: "add_sub_onnx",
        modelConfig: { inline: 'backend: "onnxruntime"\n' },
        modelFiles: { storageUri: store.location("models", "triton/add_sub_onnx") },
        storage: { secretName: "good" },
      }),
    );
    await eventually(async () => {
      const model = await kube.read<DynamoKserveModel>(GROUP_VERSION, "DynamoKserveModel", namespace, "add-sub");
      const files = conditionOf(model, "ModelFilesReady");
      assert.equal(files?.reason, "Ready", JSON.stringify(model.status));
      assert.match(files!.message, /holds version folders 1$/);
    }, 30_000);
  });

  it("AccessDenied with a wrong Secret (an Event says so), Ready once the Secret is rotated, without a pod restart", async () => {
    const denied = await repositoryAt("denied", store.location("models", "triton"), "wrong", "AccessDenied");
    assert.equal(denied.status, "False");
    assert.match(denied.message, /access denied with the credentials of Secret wrong/);
    // Events are sent in the background: one says so soon after.
    await eventually(async () => {
      const events = (await kube.api.list("v1", "Event", namespace)).items as {
        reason?: string;
        type?: string;
        involvedObject?: { name?: string };
      }[];
      assert.ok(
        events.some(
          (event) =>
            event.reason === "AccessDenied" && event.type === "Warning" && event.involvedObject?.name === "denied",
        ),
        "a Warning Event AccessDenied",
      );
    }, 15_000);
    const before = await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "denied");
    await kube.mergePatch({
      ...secretOf(namespace, "wrong", { ...store.secretValues }),
      metadata: { name: "wrong", namespace },
    });
    await eventually(
      async () => assert.equal(conditionOf(await readRepository("denied"), "ModelFilesReady")?.reason, "Ready"),
      30_000,
    );
    const after = await kube.read<V1Deployment>("apps/v1", "Deployment", namespace, "denied");
    assert.equal(after.metadata?.generation, before.metadata?.generation);
    assert.deepEqual(after.spec?.template, before.spec?.template);
  });

  it("NoSuchBucket, EndpointUnreachable, NoModelsFound and SecretMissing, each saying where", async () => {
    const noBucket = await repositoryAt("no-bucket", store.location("absent", "triton"), "good", "NoSuchBucket");
    assert.match(noBucket.message, /the bucket \(or container\) does not exist/);
    const closed = `s3://127.0.0.1:${await freePort()}/models/triton`;
    const unreachable = await repositoryAt("unreachable", closed, "good", "EndpointUnreachable");
    assert.ok(unreachable.message.startsWith(closed), unreachable.message);
    const empty = await repositoryAt("empty", store.location("models", "elsewhere"), "good", "NoModelsFound");
    assert.match(empty.message, /holds nothing that looks like a model .* among 1 keys/);
    const missing = await repositoryAt("missing", store.location("models", "triton"), "absent", "SecretMissing");
    assert.match(missing.message, /Secret absent \(storage\.secretName\) does not exist/);
  });

  it("migrate reads a repository's configs from the bucket and points the models at it", async () => {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [CLI, "migrate", store.location("models", "triton"), "--storage-secret", "good", "--namespace", namespace],
      { env: { ...process.env, ...store.secretValues, AWS_REGION: "us-east-1" } },
    );
    assert.match(stderr, new RegExp(`files from ${store.location("models", "triton/add_sub_onnx")}/`));
    const documents = parseAllDocuments(stdout).map((document) => document.toJS() as Record<string, unknown>);
    const model = documents.find(
      (document) => document["kind"] === "DynamoKserveModel",
    ) as unknown as DynamoKserveModel;
    assert.deepEqual(model.spec.modelFiles, { storageUri: store.location("models", "triton/add_sub_onnx") });
    assert.deepEqual(model.spec.storage, { secretName: "good" });
    for (const document of documents) await kube.create(document as never);
    await eventually(async () => {
      const live = await kube.read<DynamoKserveModel>(
        GROUP_VERSION,
        "DynamoKserveModel",
        namespace,
        model.metadata.name,
      );
      assert.equal(conditionOf(live, "ModelFilesReady")?.reason, "Ready", JSON.stringify(live.status));
    }, 30_000);
  });

  it("puts no credential value in any object, Event, status or log line", async () => {
    const text = JSON.stringify([
      ...(await Promise.all(
        [
          ["apps/v1", "Deployment"],
          ["v1", "ConfigMap"],
          ["v1", "Event"],
          [GROUP_VERSION, "DynamoKserveModel"],
          [GROUP_VERSION, "DynamoKserveRepository"],
        ].map(async ([apiVersion, kind]) => (await kube.api.list(apiVersion!, kind!, namespace)).items),
      )),
      suite.operator.logs,
    ]);
    for (const value of [
      store.secretValues["AWS_SECRET_ACCESS_KEY"]!,
      WRONG.AWS_SECRET_ACCESS_KEY,
      WRONG.AWS_ACCESS_KEY_ID,
    ]) {
      assert.equal(text.includes(value), false, "a credential appears");
      assert.equal(text.includes(Buffer.from(value).toString("base64")), false, "a credential appears in base64");
    }
  });
});

import assert from "node:assert/strict";
import type { V1Deployment } from "@kubernetes/client-node";
import type { DynamoKserveRepository, DynamoKserveRepositorySpec } from "../../src/api/v1alpha1.js";
import {
  desiredRepositoryDeployment,
  desiredRepositoryStatus,
  upstreamAddress,
  type RepositoryObserved,
} from "../../src/resources/repository.js";

function repository(
  spec: DynamoKserveRepositorySpec,
  status?: DynamoKserveRepository["status"],
): DynamoKserveRepository {
  return {
    apiVersion: "dynamokserve.dev/v1alpha1",
    kind: "DynamoKserveRepository",
    metadata: { name: "triton", namespace: "ml", uid: "00000000-0000-0000-0000-000000000002", generation: 1 },
    spec,
    ...(status !== undefined ? { status } : {}),
  };
}

const SETTINGS = { dataplaneImage: "dynamo-kserve:test" };
const argsOf = (deployment: V1Deployment) => deployment.spec?.template.spec?.containers[0]?.args ?? [];
const AVAILABLE: V1Deployment = {
  spec: { replicas: 1, selector: {}, template: {} },
  status: { replicas: 1, readyReplicas: 1, availableReplicas: 1 },
};
const condition = (status: ReturnType<typeof desiredRepositoryStatus>["status"], type: string) =>
  status.conditions?.find((candidate) => candidate.type === type);

describe("DynamoKserveRepository builders", () => {
  it("mounts only what the spec names: a ConfigMap alone, a claim alone (with subPath)", () => {
    const configMapOnly = desiredRepositoryDeployment(repository({ configMapRef: { name: "configs" } }), SETTINGS);
    assert.deepEqual(argsOf(configMapOnly).slice(0, 3), ["dataplane", "--model-repository", "/models"]);
    assert.equal(argsOf(configMapOnly).includes("--model-files-root"), false);
    assert.equal(argsOf(configMapOnly).includes("--forward-unsupported"), false);

    const claimOnly = desiredRepositoryDeployment(
      repository({ persistentVolumeClaim: { claimName: "models", subPath: "triton" } }),
      SETTINGS,
    );
    assert.deepEqual(argsOf(claimOnly).slice(0, 3), ["dataplane", "--model-repository", "/repository"]);
    const mount = claimOnly.spec?.template.spec?.containers[0]?.volumeMounts?.[0];
    assert.deepEqual(mount, { name: "repository", mountPath: "/repository", readOnly: true, subPath: "triton" });
  });

  it("serves a storageUri as the repository itself, synced into the cache with the storage options", () => {
    const deployment = desiredRepositoryDeployment(
      repository({
        storageUri: "s3://https://minio.storage.svc:9000/models/triton",
        storage: {
          secretName: "bucket-credentials",
          s3: { endpoint: "https://ignored.example:9000", region: "us-east-1" },
          gcs: { endpoint: "http://fake-gcs:4443" },
          azure: { endpoint: "http://azurite:10000/{account}" },
        },
        upstream: { serviceName: "triton" },
      }),
      SETTINGS,
    );
    const args = argsOf(deployment);
    assert.deepEqual(args.slice(0, 3), [
      "dataplane",
      "--model-repository",
      "s3://https://minio.storage.svc:9000/models/triton",
    ]);
    const after = (flag: string) => args[args.indexOf(flag) + 1];
    assert.equal(after("--s3-endpoint"), "https://ignored.example:9000");
    assert.equal(after("--s3-region"), "us-east-1");
    assert.equal(after("--gcs-endpoint"), "http://fake-gcs:4443");
    assert.equal(after("--azure-endpoint"), "http://azurite:10000/{account}");
    assert.equal(after("--model-cache-max-bytes"), String(10 * 2 ** 30));
    assert.equal(after("--forward-unsupported"), "triton.ml.svc:8001");
    assert.equal(args.includes("--s3-path-style"), false);
    const pod = deployment.spec!.template.spec!;
    assert.deepEqual(
      pod.volumes?.map((volume) => volume.name),
      ["tmp", "model-cache", "storage-credentials"],
    );
    assert.deepEqual(
      pod.containers[0]!.volumeMounts?.find((mount) => mount.name === "storage-credentials"),
      { name: "storage-credentials", mountPath: "/etc/dynamo-kserve/storage-credentials", readOnly: true },
    );
  });

  it("forwards to the upstream Service in the repository's namespace, on port 8001 unless told", () => {
    assert.equal(upstreamAddress(repository({ upstream: { serviceName: "triton" } })), "triton.ml.svc:8001");
    assert.equal(
      upstreamAddress(repository({ upstream: { serviceName: "triton", port: 9001 } })),
      "triton.ml.svc:9001",
    );
    assert.equal(upstreamAddress(repository({ upstream: { address: "10.0.0.7:8001" } })), "10.0.0.7:8001");
    assert.equal(upstreamAddress(repository({})), undefined);
  });

  describe("status", () => {
    const spec = { configMapRef: { name: "configs" } };
    const now = "2026-11-22T10:00:00Z";
    const observe = (observed: Partial<RepositoryObserved>): RepositoryObserved => ({
      deployment: AVAILABLE,
      index: { state: "NoReadyPod" },
      ...observed,
    });

    it("is Ready only when the Deployment is available and every model is ready", () => {
      const { status } = desiredRepositoryStatus(
        repository(spec),
        observe({
          index: {
            state: "Listed",
            pod: "triton-0",
            models: [
              { name: "a", version: "1", state: "READY" },
              { name: "b", version: "1", state: "READY" },
            ],
          },
        }),
        now,
      );
      assert.equal(status.modelsReady, "2/2");
      assert.equal(condition(status, "Ready")?.status, "True");
      assert.equal(condition(status, "Ready")?.message, "2 models ready, served at triton.ml.svc:8001");
    });

    it("reports its InferencePool as a model does: the condition names the repository, the status the pool", () => {
      const pooled = repository({ ...spec, inferencePool: { endpointPickerRef: { name: "triton-epp" } } });
      const listed = { state: "Listed", pod: "triton-0", models: [] } as const;
      const created = desiredRepositoryStatus(
        pooled,
        observe({
          index: listed,
          inferencePool: { state: "Created", name: "triton", appProtocol: "kubernetes.io/h2c", service: "triton-pool" },
        }),
        now,
      ).status;
      assert.deepEqual(created.inferencePool, {
        name: "triton",
        appProtocol: "kubernetes.io/h2c",
        service: "triton-pool",
      });
      assert.equal(
        condition(created, "InferencePoolReady")?.message,
        "InferencePool triton selects this repository's pods with appProtocol kubernetes.io/h2c; Service triton-pool fronts it",
      );
      const taken = desiredRepositoryStatus(
        pooled,
        observe({
          index: listed,
          inferencePool: {
            state: "NameTaken",
            name: "triton",
            message: "an InferencePool named triton exists and is not managed by dynamo-kserve; rename one of them",
          },
        }),
        now,
      ).status;
      assert.deepEqual([condition(taken, "InferencePoolReady")?.reason, taken.inferencePool], ["NameTaken", undefined]);
      assert.equal(
        condition(
          desiredRepositoryStatus(repository(spec), observe({ index: listed }), now).status,
          "InferencePoolReady",
        ),
        undefined,
      );
    });

    it("names the models that are not ready with their reasons, five at most", () => {
      const models = Array.from({ length: 8 }, (_, i) => ({
        name: `m${i}`,
        state: "UNAVAILABLE",
        reason: `m${i}/config.pbtxt:${i + 1}: broken`,
      }));
      const { status } = desiredRepositoryStatus(
        repository(spec),
        observe({
          index: { state: "Listed", pod: "p", models: [{ name: "ok", version: "1", state: "READY" }, ...models] },
        }),
        now,
      );
      const modelsReady = condition(status, "ModelsReady")!;
      assert.equal(modelsReady.reason, "ModelsUnavailable");
      assert.match(modelsReady.message, /^8 of 9 not ready: m0: m0\/config\.pbtxt:1: broken; /);
      assert.match(modelsReady.message, /; and 3 more$/);
      assert.equal(condition(status, "Ready")?.reason, "ModelsUnavailable");
      assert.equal(status.modelsReady, "1/9");
    });

    it("keeps the last list while no pod can be asked, and says so (Unknown)", () => {
      const last = [{ name: "a", version: "1", state: "READY" }];
      const { status } = desiredRepositoryStatus(
        repository(spec, { models: last }),
        observe({ index: { state: "Failed", pod: "p", message: "connect ECONNREFUSED" } }),
        now,
      );
      assert.deepEqual(status.models, last);
      assert.equal(condition(status, "ModelsReady")?.status, "Unknown");
      assert.equal(condition(status, "ModelsReady")?.reason, "IndexFailed");
      assert.equal(condition(status, "Ready")?.status, "False");
    });

    it("says NoModels for a repository where the data plane found nothing", () => {
      const { status } = desiredRepositoryStatus(
        repository(spec),
        observe({ index: { state: "Listed", pod: "p", models: [] } }),
        now,
      );
      assert.equal(condition(status, "ModelsReady")?.reason, "NoModels");
    });

    it("says what the operator found at the storageUri (ModelFilesReady), and why no pod is ready when it is wanting", () => {
      const remote = { storageUri: "s3://models/triton", storage: { secretName: "creds" } };
      const unavailable: V1Deployment = {
        ...AVAILABLE,
        status: { replicas: 1, readyReplicas: 0, availableReplicas: 0 },
      };
      const denied = desiredRepositoryStatus(
        repository(remote),
        observe({
          deployment: unavailable,
          modelFiles: { state: "Failed", reason: "AccessDenied", message: "s3://models/triton: access denied" },
        }),
        now,
      );
      assert.equal(condition(denied.status, "ModelFilesReady")?.status, "False");
      assert.equal(condition(denied.status, "Ready")?.reason, "AccessDenied");
      assert.match(condition(denied.status, "Ready")!.message, /^ModelFilesReady is False: s3:\/\/models\/triton/);
      // A first value that says something is an Event; "the pods will tell" is not.
      assert.deepEqual(
        denied.transitions.map((transition) => [transition.type, transition.reason]),
        [["Warning", "AccessDenied"]],
      );
      const byPods = desiredRepositoryStatus(
        repository({ storageUri: "s3://models/triton" }),
        observe({ modelFiles: { state: "CheckedByPods", location: "s3://models/triton" } }),
        now,
      );
      assert.equal(condition(byPods.status, "ModelFilesReady")?.status, "Unknown");
      assert.equal(condition(byPods.status, "ModelFilesReady")?.reason, "CheckedByPods");
      assert.deepEqual(byPods.transitions, []);
      const found = desiredRepositoryStatus(
        repository(remote),
        observe({
          modelFiles: { state: "Found", location: "s3://models/triton", holds: "repository", found: ["a", "b"] },
        }),
        now,
      );
      assert.equal(condition(found.status, "ModelFilesReady")?.message, "s3://models/triton holds models a, b");
      assert.equal(
        condition(desiredRepositoryStatus(repository(spec), observe({}), now).status, "ModelFilesReady"),
        undefined,
      );
    });

    it("puts a missing ConfigMap and a taken name before everything else", () => {
      const missing = desiredRepositoryStatus(repository(spec), observe({ missingConfigMap: "configs" }), now);
      assert.equal(condition(missing.status, "Ready")?.reason, "ConfigMapNotFound");
      const taken = desiredRepositoryStatus(
        repository(spec),
        observe({
          missingConfigMap: "configs",
          stopped: { reason: "NameTaken", message: "a Service named triton exists" },
        }),
        now,
      );
      assert.equal(condition(taken.status, "Ready")?.reason, "NameTaken");
    });

    it("writes nothing new for an unchanged world, and an Event for a changed condition", () => {
      const listed = observe({ index: { state: "Listed", pod: "p", models: [{ name: "a", state: "READY" }] } });
      const first = desiredRepositoryStatus(repository(spec), listed, now);
      const second = desiredRepositoryStatus(repository(spec, first.status), listed, "2026-11-22T11:00:00Z");
      assert.deepEqual(second.status, first.status);
      assert.deepEqual(second.transitions, []);
      const broken = desiredRepositoryStatus(
        repository(spec, first.status),
        observe({ index: { state: "Listed", pod: "p", models: [{ name: "a", state: "UNAVAILABLE", reason: "x" }] } }),
        "2026-11-22T12:00:00Z",
      );
      assert.deepEqual(
        broken.transitions.map((transition) => [transition.type, transition.reason]),
        [
          ["Warning", "ModelsUnavailable"],
          ["Warning", "ModelsUnavailable"],
        ],
      );
    });
  });
});

import assert from "node:assert/strict";
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Owner } from "../../src/api/objects.js";
import { NameTakenError, RefusedError } from "../../src/kube/apply.js";
import type { ObjectSource } from "../../src/kube/controller.js";
import { OwnedCaches, type PlanOwner } from "../../src/kube/owned-caches.js";
import { kindKey, type OwnedKind, type Plan, type PlanOutcomes } from "../../src/kube/owned.js";
import type { OptionalKind } from "../../src/kube/optional-kind.js";
import { InferencePoolController } from "../../src/controllers/inferencepool.js";
import { INFERENCE_POOL_KIND, type InferencePool } from "../../src/resources/inference-pool.js";
import { CERTIFICATE_KIND } from "../../src/resources/certificate-request.js";
import { DEPLOYMENT_KIND, SERVICE_KIND } from "../../src/resources/dataplane-pods.js";
import { MODEL_LABEL, ownedMetadata } from "../../src/resources/names.js";
import { CONFIG_MAP_KIND } from "../../src/resources/model.js";

const NAMESPACE = "team";
const ownerNamed = (name: string, uid: string): Owner => ({
  apiVersion: "dynamokserve.dev/v1alpha1",
  kind: "DynamoKserveModel",
  metadata: { name, namespace: NAMESPACE, uid },
});
const objectOf = (kind: OwnedKind, owner: Owner, name: string): KubernetesObject => ({
  apiVersion: kind.apiVersion,
  kind: kind.kind,
  metadata: ownedMetadata(owner, name),
});

/** The plan runner over in-memory caches and a writer that records what it is asked to do. */
function harness(options: { certificatesInstalled: boolean }) {
  const stores = new Map<string, Map<string, KubernetesObject>>();
  const writes: string[] = [];
  const taken = new Set<string>();
  const refused = new Set<string>();
  const storeOf = (kind: { apiVersion?: string; kind?: string }) => {
    const key = kindKey(kind);
    if (!stores.has(key)) stores.set(key, new Map());
    return stores.get(key)!;
  };
  const source = (kind: OwnedKind): ObjectSource<KubernetesObject> => ({
    get: (_namespace, name) => storeOf(kind).get(name),
    list: () => [...storeOf(kind).values()],
  });
  const caches = new OwnedCaches({
    apply: (desired) => {
      const name = `${desired.kind}/${desired.metadata?.name}`;
      writes.push(`apply ${name}`);
      if (taken.has(name)) return Promise.reject(new NameTakenError(desired.kind!, desired.metadata!.name!, undefined));
      if (refused.has(name)) {
        return Promise.reject(new RefusedError(desired.kind!, desired.metadata!.name!, "spec.template: Invalid value"));
      }
      const kind = [SERVICE_KIND, DEPLOYMENT_KIND, CERTIFICATE_KIND].find((k) => k.kind === desired.kind)!;
      put(kind, desired);
      return Promise.resolve({ changed: true, object: desired });
    },
    remove: (live) => {
      writes.push(`delete ${live.kind}/${live.metadata?.name}`);
      storeOf(live).delete(live.metadata!.name!);
      return Promise.resolve();
    },
  });
  /** An object as the cache would see it (its event included). */
  const put = (kind: OwnedKind, object: KubernetesObject) => {
    storeOf(kind).set(object.metadata!.name!, object);
    caches.observe(kind, "add", object);
  };
  caches.declare(
    [SERVICE_KIND, DEPLOYMENT_KIND, CERTIFICATE_KIND],
    {
      watch: (kind) => source(kind),
      optional: (kind) => ({
        crd: () => (options.certificatesInstalled ? {} : undefined),
        objects: () => (options.certificatesInstalled ? source(kind) : undefined),
        specHasField: () => true,
      }),
    },
    () => undefined,
  );
  const ownerFor = (owner: Owner): PlanOwner => ({
    object: owner,
    ownerLabel: MODEL_LABEL,
    owns: [SERVICE_KIND, DEPLOYMENT_KIND, CERTIFICATE_KIND],
  });
  return { caches, writes, taken, refused, put, storeOf, ownerFor };
}

describe("owned kinds: a plan applied in order, then the prune", () => {
  const model = ownerNamed("m", "uid-1");

  it("a NameTaken stops the rest of its group, not the next group; what was not reached is not pruned", async () => {
    const { caches, writes, taken, put, ownerFor } = harness({ certificatesInstalled: true });
    put(DEPLOYMENT_KIND, objectOf(DEPLOYMENT_KIND, model, "m"));
    taken.add("Service/m");
    const dataplane = [{ apply: objectOf(SERVICE_KIND, model, "m") }, { apply: objectOf(DEPLOYMENT_KIND, model, "m") }];
    const plan: Plan = [dataplane, [{ apply: objectOf(CERTIFICATE_KIND, model, "m-tls") }]];
    const outcomes = await caches.apply(ownerFor(model), plan);
    assert.deepEqual(writes, ["apply Service/m", "apply Certificate/m-tls"]);
    assert.equal(outcomes.of(SERVICE_KIND, "m")?.state, "NameTaken");
    assert.equal(outcomes.of(DEPLOYMENT_KIND, "m")?.state, "NotReached");
    assert.equal(outcomes.of(CERTIFICATE_KIND, "m-tls")?.state, "Applied");
    assert.equal(outcomes.stopped(dataplane)?.reason, "NameTaken");
    assert.match(outcomes.stopped(dataplane)?.message ?? "", /a Service named m exists/);
  });

  it("an object the API server refuses stops the rest of its group like a NameTaken, says why, and is not pruned", async () => {
    const { caches, writes, refused, put, ownerFor } = harness({ certificatesInstalled: true });
    put(DEPLOYMENT_KIND, objectOf(DEPLOYMENT_KIND, model, "m"));
    refused.add("Service/m");
    const dataplane = [{ apply: objectOf(SERVICE_KIND, model, "m") }, { apply: objectOf(DEPLOYMENT_KIND, model, "m") }];
    const outcomes = await caches.apply(ownerFor(model), [
      dataplane,
      [{ apply: objectOf(CERTIFICATE_KIND, model, "m-tls") }],
    ]);
    assert.deepEqual(writes, ["apply Service/m", "apply Certificate/m-tls"]);
    assert.deepEqual(
      [outcomes.of(SERVICE_KIND, "m")?.state, outcomes.of(DEPLOYMENT_KIND, "m")?.state],
      ["Refused", "NotReached"],
    );
    assert.deepEqual(outcomes.stopped(dataplane), {
      reason: "Refused",
      message: "the API server refused Service m: spec.template: Invalid value",
    });
  });

  it("prunes the owner's objects the plan neither applies nor keeps, and nobody else's", async () => {
    const { caches, writes, put, storeOf, ownerFor } = harness({ certificatesInstalled: true });
    const recreated = ownerNamed("m", "uid-old");
    const other = ownerNamed("other", "uid-2");
    put(DEPLOYMENT_KIND, objectOf(DEPLOYMENT_KIND, model, "m"));
    put(CERTIFICATE_KIND, objectOf(CERTIFICATE_KIND, model, "m-tls"));
    // Labelled for the model, but controlled by an earlier model of that name: not ours to delete.
    put(SERVICE_KIND, objectOf(SERVICE_KIND, recreated, "m-left"));
    put(SERVICE_KIND, objectOf(SERVICE_KIND, other, "other"));
    const outcomes = await caches.apply(ownerFor(model), [
      [{ apply: objectOf(SERVICE_KIND, model, "m") }, { keep: DEPLOYMENT_KIND, name: "m" }],
    ]);
    assert.deepEqual(writes, ["apply Service/m", "delete Certificate/m-tls"]);
    assert.equal(outcomes.of(DEPLOYMENT_KIND, "m")?.state, "Kept");
    assert.deepEqual([...storeOf(SERVICE_KIND).keys()].sort(), ["m", "m-left", "other"]);
    assert.ok(storeOf(DEPLOYMENT_KIND).has("m"));
  });

  it("still prunes an object after a copy of it in another namespace (same owner uid) comes and goes", async () => {
    const { caches, writes, put, ownerFor } = harness({ certificatesInstalled: true });
    put(CERTIFICATE_KIND, objectOf(CERTIFICATE_KIND, model, "m-tls"));
    // e.g. `kubectl get -o yaml | kubectl apply -n elsewhere`: the garbage collector deletes it at once.
    const copy = objectOf(CERTIFICATE_KIND, model, "m-tls");
    const elsewhere = { ...copy, metadata: { ...copy.metadata, namespace: "elsewhere" } };
    caches.observe(CERTIFICATE_KIND, "add", elsewhere);
    caches.observe(CERTIFICATE_KIND, "delete", elsewhere);
    await caches.apply(ownerFor(model), [[{ apply: objectOf(SERVICE_KIND, model, "m") }]]);
    assert.deepEqual(writes, ["apply Service/m", "delete Certificate/m-tls"]);
  });

  it("asks once to delete an object, not again on every reconcile while a finalizer holds it", async () => {
    const { caches, writes, put, ownerFor } = harness({ certificatesInstalled: true });
    const certificate = objectOf(CERTIFICATE_KIND, model, "m-tls");
    // Deleted before (by the prune, or a user), held by somebody's finalizer: already on its way out.
    put(CERTIFICATE_KIND, {
      ...certificate,
      metadata: { ...certificate.metadata, deletionTimestamp: new Date(), finalizers: ["example.com/hold"] },
    });
    await caches.apply(ownerFor(model), [[{ apply: objectOf(SERVICE_KIND, model, "m") }]]);
    assert.deepEqual(writes, ["apply Service/m"]);
  });

  it("writes nothing of an optional kind whose CRD is not installed, and says so", async () => {
    const { caches, writes, ownerFor } = harness({ certificatesInstalled: false });
    const outcomes = await caches.apply(ownerFor(model), [[{ apply: objectOf(CERTIFICATE_KIND, model, "m-tls") }]]);
    assert.deepEqual(writes, []);
    assert.deepEqual(outcomes.of(CERTIFICATE_KIND, "m-tls"), { state: "CRDNotInstalled" });
    assert.equal(caches.installed(CERTIFICATE_KIND), false);
    assert.equal(caches.installed(DEPLOYMENT_KIND), true);
  });

  it("refuses a planned object of a kind its owner does not declare", async () => {
    const { caches, ownerFor } = harness({ certificatesInstalled: true });
    const undeclared = { ...ownerFor(model), owns: [SERVICE_KIND] };
    await assert.rejects(
      caches.apply(undeclared, [[{ apply: objectOf(DEPLOYMENT_KIND, model, "m") }]]),
      /plans an object of apps\/v1\/Deployment, a kind it does not declare in owns/,
    );
  });
});

describe("the InferencePool controller's plan", () => {
  const pool: InferencePool = {
    apiVersion: INFERENCE_POOL_KIND.apiVersion,
    kind: INFERENCE_POOL_KIND.kind,
    metadata: { name: "p", namespace: NAMESPACE, uid: "uid-p" },
    spec: {
      selector: { matchLabels: { app: "p" } },
      targetPorts: [{ number: 8000 }],
      endpointPickerRef: { name: "epp" },
    },
  } as InferencePool;

  it("fails the reconcile (retried with backoff, logged) when its Service's name is somebody else's", async () => {
    const controller = new InferencePoolController({
      objects: () => undefined,
    } as unknown as OptionalKind<InferencePool>);
    const planned = await controller.reconcile(pool);
    const message = "a Service named p-pool exists and is not managed by dynamo-kserve; rename one of them";
    const outcomes: PlanOutcomes = {
      of: () => ({ state: "NameTaken", message }),
      stopped: (group) => (group.length > 0 ? { reason: "NameTaken", message } : undefined),
    };
    await assert.rejects(async () => planned.settle(outcomes), /a Service named p-pool exists/);
  });
});

describe("owned kinds read from a cache of every object of the kind (ConfigMaps, InferencePools)", () => {
  it("hands the writer the object that holds the name, even a user's, so a NameTaken needs no read of the API server", async () => {
    const model = ownerNamed("m", "uid-1");
    const users: KubernetesObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "m-model-config", namespace: NAMESPACE },
    };
    const everyConfigMap: ObjectSource<KubernetesObject> = {
      get: (_namespace, name) => (name === "m-model-config" ? users : undefined),
      list: () => [users],
    };
    const seen: (KubernetesObject | undefined)[] = [];
    const caches = new OwnedCaches({
      apply: (desired, live) => {
        seen.push(live);
        return Promise.resolve({ changed: false, object: desired });
      },
      remove: () => Promise.resolve(),
    });
    const unused = () => assert.fail("a kind some watch caches whole gets no cache of its own");
    caches.declare([CONFIG_MAP_KIND], { watch: unused, optional: unused }, () => ({ watched: everyConfigMap }));
    await caches.apply({ object: model, ownerLabel: MODEL_LABEL, owns: [CONFIG_MAP_KIND] }, [
      [{ apply: objectOf(CONFIG_MAP_KIND, model, "m-model-config") }],
    ]);
    assert.deepEqual(seen, [users]);
  });
});

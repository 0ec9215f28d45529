import assert from "node:assert/strict";
import type { KubernetesObject, V1Deployment, V1Role, V1Service } from "@kubernetes/client-node";
import { parse } from "yaml";
import { codeBlocks } from "../../../e2e/support/docs.js";
import type { DynamoKserveModel, DynamoKserveModelSpec, DynamoKserveRepository } from "../../src/api/v1alpha1.js";
import { entryOf, type PlanGroup, type PlannedOutcome, type PlanOutcomes } from "../../src/kube/owned.js";
import {
  ENDPOINT_PICKER_IMAGE,
  ENDPOINT_PICKER_LABEL,
  endpointPickerConfig,
  endpointPickerObjects,
  loadSignalQueries,
} from "../../src/resources/endpoint-picker.js";
import type { InferencePool } from "../../src/resources/inference-pool.js";
import { selectorFor } from "../../src/resources/names.js";
import { poolOutcome, poolPlan } from "../../src/resources/pool-plan.js";
import { desiredStatus, poolCondition, poolStatus } from "../../src/resources/status.js";
import { IDENTITY_CONFIG } from "../fixtures/kube.js";
import { assertGolden } from "../fixtures/golden.js";

const SETTINGS = { dataplaneImage: "dynamo-kserve:test" };

function model(spec: Partial<DynamoKserveModelSpec> = {}): DynamoKserveModel {
  return {
    apiVersion: "dynamokserve.dev/v1alpha1",
    kind: "DynamoKserveModel",
    metadata: { name: "chat", namespace: "models", uid: "00000000-0000-0000-0000-000000000001", generation: 2 },
    spec: { modelConfig: { inline: IDENTITY_CONFIG }, ...spec },
  };
}

const managed = (picker: NonNullable<DynamoKserveModelSpec["inferencePool"]>["endpointPicker"] = {}) =>
  model({ modelName: "llama", inferencePool: { protocol: "HTTP", endpointPicker: picker } });

const applied = (group: PlanGroup) => group.map((entry) => ("apply" in entry ? entry.apply : undefined));
const kindsAndNames = (group: PlanGroup) => group.map((entry) => `${entryOf(entry).kind.kind}/${entryOf(entry).name}`);
const INPUTS = { installed: true, poolTakenByAnother: false, appProtocolSupported: true, settings: SETTINGS };

/** Outcomes as the owned caches would report them: every entry applied, with `live` for the objects named. */
function appliedOutcomes(group: PlanGroup, live: Record<string, KubernetesObject> = {}): PlanOutcomes {
  return {
    of: (kind, name) => {
      const entry = group.find(
        (candidate) => entryOf(candidate).kind.kind === kind.kind && entryOf(candidate).name === name,
      );
      if (entry === undefined || !("apply" in entry)) return undefined;
      return { state: "Applied", object: live[`${kind.kind}/${name}`] ?? entry.apply };
    },
    stopped: () => undefined,
  };
}

describe("the endpoint picker the operator runs for a pool (spec.inferencePool.endpointPicker)", () => {
  it("plans the picker's identity, rights, config, Service and Deployment before the pool, which names its Service (golden objects)", () => {
    const owner = managed({ failureMode: "FailOpen", resources: { limits: { memory: "1Gi" } } });
    const group = poolPlan(owner, INPUTS);
    assert.deepEqual(kindsAndNames(group), [
      "ServiceAccount/chat-epp",
      "Role/chat-epp",
      "RoleBinding/chat-epp",
      "ConfigMap/chat-epp",
      "Service/chat-epp",
      "Deployment/chat-epp",
      "InferencePool/chat",
    ]);
    assertGolden("endpoint-picker", applied(group).slice(0, -1));
    const pool = applied(group).at(-1) as InferencePool;
    assert.deepEqual(pool.spec.endpointPickerRef, {
      group: "",
      kind: "Service",
      name: "chat-epp",
      port: { number: 9002 },
      failureMode: "FailOpen",
    });
    assert.deepEqual(pool.spec.targetPorts, [{ number: 8000 }]);
  });

  it("never gives the picker's pods the data plane's selector (the pool, the Deployment and the Service would count them)", () => {
    const owner = managed();
    const deployment = endpointPickerObjects(owner, SETTINGS).find(
      (object) => object.kind === "Deployment",
    ) as V1Deployment;
    const labels = deployment.spec!.template.metadata!.labels!;
    for (const [key, value] of Object.entries(selectorFor(owner))) assert.notEqual(labels[key], value, key);
    assert.equal(labels[ENDPOINT_PICKER_LABEL], "chat");
  });

  it("grants the picker reads of its namespace's pods, InferencePools and InferenceObjectives, nothing else", () => {
    const role = endpointPickerObjects(managed(), SETTINGS).find((object) => object.kind === "Role") as V1Role;
    assert.deepEqual(
      role.rules!.flatMap((rule) => rule.resources!.map((resource) => `${resource}:${rule.verbs.join(",")}`)),
      [
        "pods:get,list,watch",
        "inferencepools:get,list,watch",
        "inferenceobjectives:get,list,watch",
        "inferencemodelrewrites:get,list,watch",
      ],
    );
  });

  it("rolls the picker when its config changes (it reads it once, at start): a renamed model's pods get a new config hash", () => {
    const hashOf = (owner: DynamoKserveModel) =>
      (endpointPickerObjects(owner, SETTINGS).find((object) => object.kind === "Deployment") as V1Deployment).spec!
        .template.metadata!.annotations!["dynamokserve.dev/config-hash"];
    assert.match(hashOf(managed()) ?? "", /^[0-9a-f]{16}$/);
    assert.equal(hashOf(managed()), hashOf(managed({ image: "other/epp:1" })));
    const renamed: DynamoKserveModel = { ...managed(), spec: { ...managed().spec, modelName: "llama-2" } };
    assert.notEqual(hashOf(renamed), hashOf(managed()));
  });

  it("serves ext_proc without a cleartext hint (the picker speaks its own TLS) and no profiles beside its metrics", () => {
    const objects = endpointPickerObjects(managed(), SETTINGS);
    const service = objects.find((object) => object.kind === "Service") as V1Service;
    assert.equal(service.spec!.ports!.find((port) => port.port === 9002)!.appProtocol, undefined);
    const args = (objects.find((object) => object.kind === "Deployment") as V1Deployment).spec!.template.spec!
      .containers[0]!.args!;
    assert.ok(args.includes("--enable-pprof=false"));
    assert.ok(args.includes("--metrics-endpoint-auth=false"));
  });

  it("runs the CR's image, else the operator's --endpoint-picker-image, else GAIE's epp v1.4.0", () => {
    const imageOf = (owner: DynamoKserveModel, settings: typeof SETTINGS & { endpointPickerImage?: string }) =>
      (endpointPickerObjects(owner, settings).find((object) => object.kind === "Deployment") as V1Deployment).spec!
        .template.spec!.containers[0]!.image;
    assert.equal(imageOf(managed(), SETTINGS), ENDPOINT_PICKER_IMAGE);
    assert.equal(imageOf(managed(), { ...SETTINGS, endpointPickerImage: "mirror/epp:1" }), "mirror/epp:1");
    assert.equal(
      imageOf(managed({ image: "mine/epp:2" }), { ...SETTINGS, endpointPickerImage: "mirror/epp:1" }),
      "mine/epp:2",
    );
  });

  it("scores a model's pods on its own series, and a repository's on the pods' totals", () => {
    assert.deepEqual(loadSignalQueries(managed()), {
      waiting: 'dynamo_kserve_requests_waiting{model="llama"}',
      running: 'dynamo_kserve_requests_running{model="llama"}',
      kvCacheUsage: 'dynamo_kserve_kv_cache_usage_ratio{model="llama"}',
    });
    const repository: DynamoKserveRepository = {
      apiVersion: "dynamokserve.dev/v1alpha1",
      kind: "DynamoKserveRepository",
      metadata: { name: "zoo", namespace: "models", uid: "uid-zoo" },
      spec: { configMapRef: { name: "configs" }, inferencePool: { endpointPicker: {} } },
    };
    assert.deepEqual(loadSignalQueries(repository), {
      waiting: "dynamo_kserve_server_requests_waiting",
      running: "dynamo_kserve_server_requests_running",
      kvCacheUsage: "dynamo_kserve_server_kv_cache_usage_ratio",
    });
  });

  it("generates the EndpointPickerConfig the gateways guide shows (the config the e2e tier ran by hand)", () => {
    const guide = codeBlocks("docs/guides/gateways.md", { heading: "Load signals", language: "yaml" }).find((block) =>
      /^kind: EndpointPickerConfig$/m.test(block.text),
    );
    assert.ok(guide !== undefined);
    assert.deepEqual(
      parse(endpointPickerConfig(loadSignalQueries(model({ modelName: "my-model" })))),
      parse(guide.text),
    );
  });

  it("writes nothing of the picker without the InferencePool CRD, or when the pool's name is somebody else's: the pool's entry alone says CRDNotInstalled or NameTaken", () => {
    assert.deepEqual(kindsAndNames(poolPlan(managed(), { ...INPUTS, installed: false })), ["InferencePool/chat"]);
    assert.deepEqual(kindsAndNames(poolPlan(managed(), { ...INPUTS, poolTakenByAnother: true })), [
      "InferencePool/chat",
    ]);
    // A picker the user runs: the pool alone, as before.
    const user = model({ inferencePool: { endpointPickerRef: { name: "theirs", port: { number: 9002 } } } });
    assert.deepEqual(kindsAndNames(poolPlan(user, INPUTS)), ["InferencePool/chat"]);
    assert.deepEqual((applied(poolPlan(user, INPUTS))[0] as InferencePool).spec.endpointPickerRef.name, "theirs");
    assert.deepEqual(poolPlan(model(), INPUTS), []);
  });

  it("reports InferencePoolReady False (EndpointPickerUnavailable) until a picker pod is available, then True naming it", () => {
    const owner = managed();
    const group = poolPlan(owner, INPUTS);
    const condition = (outcomes: PlanOutcomes) => {
      const status = desiredStatus(
        owner,
        {
          config: { valid: false, reason: "InvalidConfig", message: "x" },
          deployment: undefined,
          inferencePool: poolOutcome(owner, group, outcomes, true),
        },
        "2026-11-26T00:00:00Z",
      ).status;
      return {
        condition: status.conditions!.find((c) => c.type === "InferencePoolReady")!,
        pool: status.inferencePool,
      };
    };
    const starting = condition(appliedOutcomes(group));
    assert.equal(starting.condition.status, "False");
    assert.equal(starting.condition.reason, "EndpointPickerUnavailable");
    assert.match(
      starting.condition.message!,
      /Deployment chat-epp, image registry\.k8s\.io\/gateway-api-inference-extension\/epp:v1\.4\.0\) has no available pod/,
    );
    const deployment = applied(group).find((object) => object?.kind === "Deployment") as V1Deployment;
    const running = condition(
      appliedOutcomes(group, {
        "Deployment/chat-epp": { ...deployment, status: { availableReplicas: 1 } } as KubernetesObject,
      }),
    );
    assert.deepEqual([running.condition.status, running.condition.reason], ["True", "Created"]);
    assert.match(running.condition.message!, /endpoint picker chat-epp \(image .*epp:v1\.4\.0\) picks its pods$/);
    assert.deepEqual(running.pool, {
      name: "chat",
      appProtocol: "http",
      service: "chat-pool",
      endpointPicker: "chat-epp",
    });
  });

  it("writes the pool's InferenceObjective after the pool, and says its priority (or that its CRD is missing)", () => {
    const owner = model({
      inferencePool: { endpointPickerRef: { name: "theirs", port: { number: 9002 } }, objective: { priority: -5 } },
    });
    const group = poolPlan(owner, INPUTS);
    assert.deepEqual(kindsAndNames(group), ["InferencePool/chat", "InferenceObjective/chat"]);
    assert.deepEqual((applied(group)[1] as KubernetesObject & { spec: unknown }).spec, {
      poolRef: { group: "inference.networking.k8s.io", kind: "InferencePool", name: "chat" },
      priority: -5,
    });
    const outcome = poolOutcome(owner, group, appliedOutcomes(group), true);
    assert.match(
      poolCondition(outcome!, "model").message ?? "",
      /; InferenceObjective chat gives requests that name it priority -5$/,
    );
    assert.equal(poolStatus(outcome).inferencePool?.objective, "chat");
    const noCrd: PlanOutcomes = {
      of: (kind, name) =>
        kind.kind === "InferenceObjective" ? { state: "CRDNotInstalled" } : appliedOutcomes(group).of(kind, name),
      stopped: () => undefined,
    };
    const missing = poolOutcome(owner, group, noCrd, true)!;
    assert.equal(poolCondition(missing, "model").status, "True");
    assert.match(poolCondition(missing, "model").message ?? "", /no InferenceObjective: its CRD \(inferenceobjectives/);
    assert.equal(poolStatus(missing).inferencePool?.objective, undefined);
  });

  it("reports a picker object whose name is somebody else's as NameTaken, naming it (the pool was not reached)", () => {
    const owner = managed();
    const group = poolPlan(owner, INPUTS);
    const message = "a Deployment named chat-epp exists and is not managed by dynamo-kserve; rename one of them";
    const outcomes: PlanOutcomes = {
      of: (kind): PlannedOutcome =>
        kind.kind === "Deployment" ? { state: "NameTaken", message } : { state: "NotReached" },
      stopped: (planned) => (planned === group ? { reason: "NameTaken", message } : undefined),
    };
    assert.deepEqual(poolOutcome(owner, group, outcomes, true), { state: "NameTaken", name: "chat", message });
  });
});

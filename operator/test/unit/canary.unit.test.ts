import assert from "node:assert/strict";
import type { V1ConfigMap, V1Deployment, V1Service } from "@kubernetes/client-node";
import type { DynamoKserveModel, DynamoKserveModelSpec } from "../../src/api/v1alpha1.js";
import type { PlanGroup } from "../../src/kube/owned.js";
import {
  canaryCondition,
  canaryPlan,
  canaryStatus,
  canaryView,
  canaryWeight,
  type CanaryOutcome,
  type CanaryState,
} from "../../src/resources/canary.js";
import { checkModelConfig } from "../../src/resources/model-config.js";
import { desiredDeployment } from "../../src/resources/model.js";
import { CANARY_OF_LABEL, MODEL_LABEL, VARIANT_LABEL, selectorFor } from "../../src/resources/names.js";
import { routesPlan, routesSendCanaryNothing, type Route } from "../../src/resources/routes.js";
import { desiredServiceMonitor } from "../../src/resources/service-monitor.js";
import { IDENTITY_CONFIG } from "../fixtures/kube.js";
import { assertGolden } from "../fixtures/golden.js";

const settings = { dataplaneImage: "dynamo-kserve:stable" };

function model(spec: Partial<DynamoKserveModelSpec> = {}): DynamoKserveModel {
  return {
    apiVersion: "dynamokserve.dev/v1alpha1",
    kind: "DynamoKserveModel",
    metadata: { name: "resnet", namespace: "models", uid: "00000000-0000-0000-0000-000000000041", generation: 3 },
    spec: {
      modelConfig: { inline: IDENTITY_CONFIG },
      replicas: 3,
      routes: { gateway: { name: "inference" }, backend: "Service", grpc: { hostnames: ["resnet.example.com"] } },
      canary: {
        trafficPercent: 10,
        replicas: 2,
        image: "dynamo-kserve:next",
        modelConfig: { inline: IDENTITY_CONFIG.replace("max_batch_size: 8", "max_batch_size: 4") },
        resources: { requests: { cpu: "250m" } },
      },
      ...spec,
    },
  };
}

const withCanary = model();
const deploymentWith = (available: number): V1Deployment => ({
  metadata: { name: "resnet-canary" },
  spec: { replicas: 2, selector: {}, template: {} },
  status: { replicas: 2, readyReplicas: available, availableReplicas: available },
});
const running = (available: number, from = withCanary): CanaryState => ({
  phase: "Running",
  config: checkModelConfig(canaryView(from), undefined),
  deployment: deploymentWith(available),
});

const applied = <T>(group: PlanGroup, kind: string): T =>
  group.flatMap((entry) => ("apply" in entry && entry.apply.kind === kind ? [entry.apply as T] : []))[0]!;

const matches = (selector: Record<string, string>, labels: Record<string, string> | undefined): boolean =>
  Object.entries(selector).every(([key, value]) => labels?.[key] === value);

describe("a model's canary (spec.canary: a second variant, its share of the routes by weight)", () => {
  it("runs the canary's image, config and resources in <name>-canary objects, its pods apart from the stable's (golden objects)", () => {
    const group = canaryPlan(withCanary, running(2), settings);
    const service = applied<V1Service>(group, "Service");
    const configMap = applied<V1ConfigMap>(group, "ConfigMap");
    const deployment = applied<V1Deployment>(group, "Deployment");
    assert.deepEqual(
      group.map((entry) => ("apply" in entry ? `${entry.apply.kind}/${entry.apply.metadata?.name}` : "keep")),
      [
        "Service/resnet-canary",
        "ConfigMap/resnet-canary-model-config",
        "Deployment/resnet-canary",
        "PodDisruptionBudget/resnet-canary",
      ],
    );
    assertGolden("canary-deployment", deployment);
    assert.match(configMap.data!["resnet.pbtxt"]!, /max_batch_size: 4/);
    const stable = desiredDeployment(withCanary, settings);
    const canaryPods = deployment.spec!.template.metadata!.labels!;
    const stablePods = stable.spec!.template.metadata!.labels!;
    // The stable Deployment's (immutable) selector, its budget, autoscaler and pool never reach a canary pod.
    assert.equal(canaryPods[MODEL_LABEL], undefined);
    assert.ok(!matches(selectorFor(withCanary), canaryPods));
    assert.ok(!matches(deployment.spec!.selector.matchLabels!, stablePods));
    assert.ok(matches(service.spec!.selector!, canaryPods));
    assert.deepEqual([canaryPods[VARIANT_LABEL], stablePods[VARIANT_LABEL]], ["canary", "stable"]);
    assert.equal(canaryPods[CANARY_OF_LABEL], "resnet");
    // Owned by the model and labelled as its objects: its events reach the model, the prune finds them.
    assert.equal(deployment.metadata!.labels![MODEL_LABEL], "resnet");
    assert.equal(deployment.metadata!.ownerReferences![0]!.uid, withCanary.metadata.uid);
    const container = deployment.spec!.template.spec!.containers[0]!;
    assert.equal(container.image, "dynamo-kserve:next");
    assert.equal(container.args![container.args!.indexOf("--variant") + 1], "canary");
    assert.equal(deployment.spec!.replicas, 2);
    assert.equal(stable.spec!.template.spec!.containers[0]!.image, "dynamo-kserve:stable");
    // Prometheus keeps the variant on both variants' series.
    assert.deepEqual(desiredServiceMonitor(withCanary, "resnet").spec.podTargetLabels, [VARIANT_LABEL]);
  });

  it("weighs the routes 100 - p and p once a canary pod is available, 0 before and while it retires (golden route)", () => {
    assert.equal(canaryWeight(withCanary, running(0)), 0);
    assert.equal(canaryWeight(withCanary, running(1)), 10);
    const retiring: CanaryState = { phase: "Retiring", since: "2026-11-26T20:00:00Z", deployment: deploymentWith(2) };
    assert.equal(canaryWeight(withCanary, retiring), 0);
    assert.equal(canaryWeight(withCanary, { phase: "None" }), undefined);
    const [route] = routesPlan(withCanary, canaryWeight(withCanary, running(2)));
    assertGolden("canary-grpcroute", "apply" in route! ? route.apply : undefined);
    const [plain] = routesPlan(model({ canary: undefined }), undefined);
    assert.deepEqual("apply" in plain! ? (plain.apply as Route).spec.rules[0]!.backendRefs : undefined, [
      { name: "resnet", port: 8001 },
    ]);
  });

  it("keeps a retiring canary's objects as they are, and keeps what runs when the canary's config is refused", () => {
    const retiring: CanaryState = { phase: "Retiring", since: "2026-11-26T20:00:00Z", deployment: deploymentWith(2) };
    const kept = (group: PlanGroup) =>
      group.map((entry) => ("keep" in entry ? `keep ${entry.keep.kind}/${entry.name}` : `apply ${entry.apply.kind}`));
    assert.deepEqual(kept(canaryPlan(model({ canary: undefined }), retiring, settings)), [
      "keep Service/resnet-canary",
      "keep ConfigMap/resnet-canary-model-config",
      "keep Deployment/resnet-canary",
      "keep PodDisruptionBudget/resnet-canary",
    ]);
    const refused = model({
      canary: { trafficPercent: 10, modelConfig: { inline: 'backend: "nonesuch"' } },
    });
    const state = running(1, refused);
    assert.equal(state.phase === "Running" && state.config.valid, false);
    assert.deepEqual(kept(canaryPlan(refused, state, settings)), [
      "apply Service",
      "keep ConfigMap/resnet-canary-model-config",
      "keep Deployment/resnet-canary",
      "keep PodDisruptionBudget/resnet-canary",
    ]);
    assert.deepEqual(canaryPlan(withCanary, { phase: "None" }, settings), []);
  });

  it("retires only once every live route sends the canary nothing and its gateway accepted that generation", () => {
    const route = (weight: number, acceptedGeneration?: number): Route => ({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "GRPCRoute",
      metadata: { name: "resnet", namespace: "models", generation: 4 },
      spec: {
        parentRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "inference" }],
        rules: [
          {
            backendRefs: [
              { name: "resnet", port: 8001, weight: 100 - weight },
              { name: "resnet-canary", port: 8001, weight },
            ],
          },
        ],
      },
      ...(acceptedGeneration !== undefined
        ? {
            status: {
              parents: [
                {
                  parentRef: { name: "inference", namespace: "models", kind: "Gateway" },
                  conditions: ["Accepted", "ResolvedRefs"].map((type) => ({
                    type,
                    status: "True",
                    observedGeneration: acceptedGeneration,
                  })),
                },
              ],
            },
          }
        : {}),
    });
    const promoted = model({ canary: undefined });
    assert.equal(routesSendCanaryNothing(promoted, [route(10, 4)]), false);
    assert.equal(routesSendCanaryNothing(promoted, [route(0)]), false);
    assert.equal(routesSendCanaryNothing(promoted, [route(0, 3)]), false);
    assert.equal(routesSendCanaryNothing(promoted, [route(0, 4), undefined]), true);
    assert.equal(routesSendCanaryNothing(promoted, [undefined, undefined]), true);
  });

  it("says CanaryReady and status.canary: Starting, Serving, ConfigInvalid, Retiring, NameTaken", () => {
    const outcome = (state: CanaryState, available: number, extra: Partial<CanaryOutcome> = {}): CanaryOutcome => ({
      state,
      weight: canaryWeight(withCanary, state) ?? 0,
      deployment: deploymentWith(available),
      ...extra,
    });
    const starting = outcome(running(0), 0);
    assert.deepEqual(
      [canaryCondition(withCanary, starting).reason, canaryStatus(withCanary, starting).canary?.summary],
      ["Starting", "0% starting"],
    );
    const serving = outcome(running(2), 2);
    assert.equal(canaryCondition(withCanary, serving).status, "True");
    assert.match(canaryCondition(withCanary, serving).message, /resnet-canary gets 10% .* 2\/2 pods ready/);
    assert.deepEqual(canaryStatus(withCanary, serving), {
      canary: { service: "resnet-canary", trafficPercent: 10, replicas: 2, readyReplicas: 2, summary: "10% 2/2 ready" },
    });
    const refused = model({ canary: { trafficPercent: 10, modelConfig: { inline: 'backend: "nonesuch"' } } });
    const invalid = { ...outcome(running(1, refused), 1) };
    assert.equal(canaryCondition(refused, invalid).reason, "ConfigInvalid");
    assert.match(
      canaryCondition(refused, invalid).message,
      /canary.modelConfig is refused .*keep serving the last valid one/,
    );
    const retiring = outcome({ phase: "Retiring", since: "2026-11-26T20:00:00Z", deployment: deploymentWith(2) }, 2);
    assert.equal(canaryCondition(withCanary, retiring).reason, "Retiring");
    assert.deepEqual(canaryStatus(withCanary, retiring).canary, {
      service: "resnet-canary",
      trafficPercent: 0,
      replicas: 2,
      readyReplicas: 2,
      retiringSince: "2026-11-26T20:00:00Z",
      summary: "retiring",
    });
    const taken = outcome(running(0), 0, { nameTaken: "Service resnet-canary belongs to somebody else" });
    assert.equal(canaryCondition(withCanary, taken).reason, "NameTaken");
    assert.deepEqual(canaryStatus(withCanary, undefined), {});
  });
});

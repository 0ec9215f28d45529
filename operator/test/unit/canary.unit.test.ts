import assert from "node:assert/strict";
import type { V1ConfigMap, V1Deployment, V1PodDisruptionBudget, V1Service } from "@kubernetes/client-node";
import type { DynamoKserveModel, DynamoKserveModelSpec } from "../../src/api/v1alpha1.js";
import type { PlanGroup } from "../../src/kube/owned.js";
import {
  CANARY_DRAIN_MS,
  CANARY_RETIRE_LIMIT_MS,
  canaryCondition,
  canaryPlan,
  canaryRecheckMs,
  canaryStateOf,
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

/** The model's GRPCRoute as the API server has it (generation 4), accepted at `acceptedGeneration` if given. */
const liveRoute = (weight: number, acceptedGeneration?: number): Route => ({
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
    const budget = applied<V1PodDisruptionBudget>(group, "PodDisruptionBudget");
    assert.ok(matches(budget.spec!.selector!.matchLabels!, canaryPods));
    assert.ok(!matches(budget.spec!.selector!.matchLabels!, stablePods));
    // A user's pod labels never carry the operator's (objects written before the CRD refused them).
    const labelled = model({ pod: { labels: { team: "a", [MODEL_LABEL]: "resnet", [CANARY_OF_LABEL]: "resnet" } } });
    const labelledCanary = applied<V1Deployment>(canaryPlan(labelled, running(2, labelled), settings), "Deployment");
    const labelledStable = desiredDeployment(labelled, settings);
    assert.ok(!matches(selectorFor(labelled), labelledCanary.spec!.template.metadata!.labels));
    assert.ok(!matches(labelledCanary.spec!.selector.matchLabels!, labelledStable.spec!.template.metadata!.labels));
    assert.equal(labelledCanary.spec!.template.metadata!.labels!["team"], "a");
    // Its own model files: another volume, or another folder of the model's store.
    const filesModel = model({
      modelFiles: { persistentVolumeClaim: { claimName: "resnet-v1" } },
      canary: { trafficPercent: 10, modelFiles: { persistentVolumeClaim: { claimName: "resnet-v2" } } },
    });
    const claims = (built: V1Deployment) =>
      built.spec!.template.spec!.volumes!.flatMap((volume) => volume.persistentVolumeClaim?.claimName ?? []);
    assert.deepEqual(
      claims(applied<V1Deployment>(canaryPlan(filesModel, running(1, filesModel), settings), "Deployment")),
      ["resnet-v2"],
    );
    assert.deepEqual(claims(desiredDeployment(filesModel, settings)), ["resnet-v1"]);
    const storedModel = model({
      modelFiles: { storageUri: "s3://models/resnet/v1" },
      storage: { secretName: "s3" },
      canary: { trafficPercent: 10, modelFiles: { storageUri: "s3://models/resnet/v2" } },
    });
    const storedArgs = applied<V1Deployment>(canaryPlan(storedModel, running(1, storedModel), settings), "Deployment")
      .spec!.template.spec!.containers[0]!.args!;
    assert.equal(storedArgs[storedArgs.indexOf("--model-files") + 1], "resnet=s3://models/resnet/v2");
    // Not autoscaled: the model's autoscaler scales the stable Deployment only.
    assert.equal(
      canaryView(model({ replicas: undefined, autoscaling: { maxReplicas: 4, targetInflightRequests: 2 } })).spec
        .autoscaling,
      undefined,
    );
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
    const promoted = model({ canary: undefined });
    assert.equal(routesSendCanaryNothing(promoted, [liveRoute(10, 4)]), false);
    assert.equal(routesSendCanaryNothing(promoted, [liveRoute(0)]), false);
    assert.equal(routesSendCanaryNothing(promoted, [liveRoute(0, 3)]), false);
    assert.equal(routesSendCanaryNothing(promoted, [liveRoute(0, 4), undefined]), true);
    assert.equal(routesSendCanaryNothing(promoted, [undefined, undefined]), true);
  });

  it("says CanaryReady and status.canary: Starting, Serving, RoutesNotReady, ConfigInvalid, Retiring, NameTaken, Refused", () => {
    const routesReady = { status: "True", reason: "Accepted", message: "" } as const;
    const outcome = (state: CanaryState, available: number, extra: Partial<CanaryOutcome> = {}): CanaryOutcome => ({
      state,
      weight: canaryWeight(withCanary, state) ?? 0,
      deployment: deploymentWith(available),
      ...extra,
    });
    const starting = outcome(running(0), 0);
    assert.deepEqual(
      [canaryCondition(withCanary, starting, routesReady).reason, canaryStatus(withCanary, starting).canary?.summary],
      ["Starting", "0% starting"],
    );
    const serving = outcome(running(2), 2);
    assert.equal(canaryCondition(withCanary, serving, routesReady).status, "True");
    assert.match(
      canaryCondition(withCanary, serving, routesReady).message,
      /resnet-canary gets 10% .* 2\/2 pods ready/,
    );
    // Ready pods, routes the gateway has not accepted: no request reaches the canary.
    const pending = { status: "False", reason: "Pending", message: "" } as const;
    assert.deepEqual(
      [canaryCondition(withCanary, serving, pending).status, canaryCondition(withCanary, serving, pending).reason],
      ["False", "RoutesNotReady"],
    );
    assert.equal(canaryCondition(withCanary, serving, undefined).reason, "RoutesNotReady");
    assert.deepEqual(canaryStatus(withCanary, serving), {
      canary: { service: "resnet-canary", trafficPercent: 10, replicas: 2, readyReplicas: 2, summary: "10% 2/2 ready" },
    });
    const refused = model({ canary: { trafficPercent: 10, modelConfig: { inline: 'backend: "nonesuch"' } } });
    const invalid = { ...outcome(running(1, refused), 1) };
    assert.equal(canaryCondition(refused, invalid, routesReady).reason, "ConfigInvalid");
    assert.match(
      canaryCondition(refused, invalid, routesReady).message,
      /the canary's config, canary\.modelConfig, is refused .*keep serving the last valid one/,
    );
    const retiring = outcome({ phase: "Retiring", since: "2026-11-26T20:00:00Z", deployment: deploymentWith(2) }, 2);
    assert.equal(canaryCondition(withCanary, retiring, routesReady).reason, "Retiring");
    assert.deepEqual(canaryStatus(withCanary, retiring).canary, {
      service: "resnet-canary",
      trafficPercent: 0,
      replicas: 2,
      readyReplicas: 2,
      retiringSince: "2026-11-26T20:00:00Z",
      summary: "retiring",
    });
    for (const reason of ["NameTaken", "Refused"] as const) {
      const stopped = outcome(running(0), 0, { stopped: { reason, message: "the Deployment resnet-canary ..." } });
      assert.equal(canaryCondition(withCanary, stopped, routesReady).reason, reason);
    }
    assert.deepEqual(canaryStatus(withCanary, undefined), {});
  });

  it("decides the canary's phase: Running with spec.canary; Retiring while its own Deployment is there; gone once the routes send it nothing and the drain passed, or at the limit", () => {
    const promoted = model({ canary: undefined });
    const since = "2026-11-26T20:00:00Z";
    const at = (ms: number) => Date.parse(since) + ms;
    const ours = (extra: Partial<V1Deployment["metadata"]> = {}): V1Deployment => ({
      ...deploymentWith(2),
      metadata: {
        name: "resnet-canary",
        ownerReferences: [
          {
            apiVersion: "dynamokserve.dev/v1alpha1",
            kind: "DynamoKserveModel",
            name: "resnet",
            uid: withCanary.metadata.uid!,
          },
        ],
        ...extra,
      },
    });
    const sending = (weight: number) => liveRoute(weight, 4);
    const observed = (deployment: V1Deployment | undefined, now: number, routes: (Route | undefined)[] = []) => ({
      deployment,
      config: () => checkModelConfig(canaryView(withCanary), undefined),
      routes,
      now,
      nowText: new Date(now).toISOString().replace(/\.\d{3}Z$/, "Z"),
    });
    const retiringModel = { ...promoted, status: { canary: { retiringSince: since } } };
    assert.equal(canaryStateOf(withCanary, observed(undefined, at(0))).phase, "Running");
    // Removed: Retiring from now on, with the time recorded.
    const first = canaryStateOf(promoted, observed(ours(), at(0)));
    assert.deepEqual(first.phase === "Retiring" && first.since, since);
    // Within the drain, or while a live route still sends it requests: still retiring.
    assert.equal(
      canaryStateOf(retiringModel, observed(ours(), at(CANARY_DRAIN_MS - 1000), [sending(0)])).phase,
      "Retiring",
    );
    assert.equal(canaryStateOf(retiringModel, observed(ours(), at(CANARY_DRAIN_MS), [sending(10)])).phase, "Retiring");
    assert.equal(canaryStateOf(retiringModel, observed(ours(), at(CANARY_DRAIN_MS), [sending(0)])).phase, "None");
    assert.equal(
      canaryStateOf(retiringModel, observed(ours(), at(CANARY_RETIRE_LIMIT_MS), [sending(10)])).phase,
      "None",
    );
    // Somebody else's Deployment of that name, or ours already going: nothing to retire.
    const theirs: V1Deployment = {
      ...ours(),
      metadata: { name: "resnet-canary", ownerReferences: [{ apiVersion: "v1", kind: "X", name: "x", uid: "other" }] },
    };
    assert.equal(canaryStateOf(promoted, observed(theirs, at(0))).phase, "None");
    assert.equal(canaryStateOf(promoted, observed(ours({ deletionTimestamp: new Date(at(0)) }), at(0))).phase, "None");
    // Looked at again when the drain is over, then at the limit (never in a tight loop).
    const retiring: CanaryState = { phase: "Retiring", since, deployment: ours() };
    assert.equal(canaryRecheckMs(retiring, at(2_000)), CANARY_DRAIN_MS - 2_000);
    assert.equal(
      canaryRecheckMs(retiring, at(CANARY_DRAIN_MS + 5_000)),
      CANARY_RETIRE_LIMIT_MS - CANARY_DRAIN_MS - 5_000,
    );
    assert.equal(canaryRecheckMs({ phase: "None" }, at(0)), undefined);
  });
});

import assert from "node:assert/strict";
import type { V1ConfigMap, V1Deployment, V1Service } from "@kubernetes/client-node";
import type { TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { installGatewayApi } from "../../../e2e/support/gateway.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import type { Route } from "../../src/resources/routes.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject, unclaimedGateway } from "../fixtures/kube.js";
import { useOperator } from "../fixtures/operator.js";

const GATEWAY_API = "gateway.networking.k8s.io/v1";

/**
 * spec.canary against the real API server, with kwok making pods ready. No gateway runs here:
 * where a retirement waits for the gateway to accept routes that send the canary nothing, the
 * test writes the route's status as its controller would (the e2e tier has Traefik do it).
 */
describe("a canary (spec.canary: a second variant, its share of the routes by weight; real API server)", function () {
  this.timeout(180_000);
  const suite = useOperator("canary");
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let namespace: string;
  before(async () => {
    ({ cluster, kube, namespace } = suite);
    await installGatewayApi(cluster);
    // A Gateway no controller takes (the test writes the route's status in its stead).
    await kube.create(unclaimedGateway(namespace));
  });

  const canaryConfig = IDENTITY_CONFIG.replace("max_batch_size: 8", "max_batch_size: 4");
  const spec = (canary: DynamoKserveModel["spec"]["canary"] | null) =>
    ({
      replicas: 2,
      modelConfig: { inline: IDENTITY_CONFIG },
      routes: { gateway: { name: "inference" }, grpc: {} },
      canary,
    }) as DynamoKserveModel["spec"];
  const live = () => kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "split");
  const read = <T>(kind: string, name: string, apiVersion = kind === "Deployment" ? "apps/v1" : "v1") =>
    kube.read<T & { metadata: { name: string } }>(apiVersion, kind, namespace, name);
  const weights = async () =>
    (await read<Route>("GRPCRoute", "split", GATEWAY_API)).spec.rules[0]!.backendRefs.map(
      ({ name, weight }) => `${name}=${weight ?? "-"}`,
    );
  /** Writes the GRPCRoute's status as its gateway's controller would: accepted, at its current generation. */
  const acceptRoute = async (): Promise<void> => {
    const route = await read<Route>("GRPCRoute", "split", GATEWAY_API);
    const accepted = {
      ...route,
      status: {
        parents: [
          {
            parentRef: { group: "gateway.networking.k8s.io", kind: "Gateway", name: "inference" },
            controllerName: "example.com/test-gateway",
            conditions: ["Accepted", "ResolvedRefs"].map((type) => ({
              type,
              status: "True",
              reason: type,
              message: "",
              observedGeneration: route.metadata.generation,
              lastTransitionTime: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
            })),
          },
        ],
      },
    };
    const written = await cluster.request(
      "PUT",
      `/apis/gateway.networking.k8s.io/v1/namespaces/${namespace}/grpcroutes/split/status`,
      accepted,
    );
    assert.equal(written.status, 200, written.body);
  };
  const canaryObjects = [
    ["apps/v1", "Deployment", "split-canary"],
    ["v1", "Service", "split-canary"],
    ["v1", "ConfigMap", "split-canary-model-config"],
    ["policy/v1", "PodDisruptionBudget", "split-canary"],
  ] as const;

  it("runs the canary's pods beside the stable's, and weighs the route 100 - p / p once a canary pod is ready", async () => {
    await kube.create(
      modelObject(
        namespace,
        "split",
        spec({ trafficPercent: 20, replicas: 2, image: "dynamo-kserve:next", modelConfig: { inline: canaryConfig } }),
      ),
    );
    await eventually(async () => {
      const model = await live();
      assert.equal(model.status?.canary?.summary, "20% 2/2 ready");
      assert.deepEqual(await weights(), ["split=80", "split-canary=20"]);
    }, 60_000);
    // Ready pods, but no gateway has accepted the route: no request reaches the canary yet.
    assert.equal(conditionOf(await live(), "CanaryReady")?.reason, "RoutesNotReady");
    await acceptRoute();
    await eventually(async () => {
      const condition = conditionOf(await live(), "CanaryReady");
      assert.equal(condition?.status, "True", JSON.stringify(condition));
    }, 30_000);
    const stable = await read<V1Deployment>("Deployment", "split");
    const canary = await read<V1Deployment>("Deployment", "split-canary");
    assert.deepEqual(stable.spec!.selector.matchLabels, { "dynamokserve.dev/model": "split" });
    assert.deepEqual(canary.spec!.selector.matchLabels, { "dynamokserve.dev/canary-of": "split" });
    assert.equal(canary.spec!.template.spec!.containers[0]!.image, "dynamo-kserve:next");
    const service = await read<V1Service>("Service", "split-canary");
    assert.deepEqual(service.spec!.selector, { "dynamokserve.dev/canary-of": "split" });
    const config = await read<V1ConfigMap>("ConfigMap", "split-canary-model-config");
    assert.match(config.data!["split.pbtxt"]!, /max_batch_size: 4/);
    // The pods as the API server has them: the stable Service selects none of the canary's.
    const pods = JSON.parse(
      (await cluster.request("GET", `/api/v1/namespaces/${namespace}/pods?labelSelector=dynamokserve.dev/model=split`))
        .body,
    ) as { items: { metadata: { labels: Record<string, string> } }[] };
    assert.deepEqual(
      pods.items.map((pod) => pod.metadata.labels["dynamokserve.dev/variant"]),
      ["stable", "stable"],
    );
    const model = await live();
    assert.equal(model.status?.canary?.service, "split-canary");
    assert.equal(conditionOf(model, "Ready")?.status, "True");
  });

  it("says ConfigInvalid for a refused canary config and keeps its pods serving the last valid one", async () => {
    const before = (await read<V1ConfigMap>("ConfigMap", "split-canary-model-config")).data;
    await kube.mergePatch(
      modelObject(
        namespace,
        "split",
        spec({ trafficPercent: 20, modelConfig: { inline: 'backend: "nonesuch"' } } as never),
      ),
    );
    await eventually(async () => {
      const condition = conditionOf(await live(), "CanaryReady");
      assert.equal(condition?.reason, "ConfigInvalid", JSON.stringify(condition));
      assert.match(
        condition!.message,
        /the canary's config, canary\.modelConfig, is refused .*keep serving the last valid one/,
      );
    }, 30_000);
    assert.deepEqual((await read<V1ConfigMap>("ConfigMap", "split-canary-model-config")).data, before);
    assert.deepEqual(await weights(), ["split=80", "split-canary=20"]);
    assert.equal(conditionOf(await live(), "Ready")?.status, "True", "the stable variant is not touched");
  });

  it("says Refused with the API server's message when it refuses the canary's Deployment, and nothing else stops", async () => {
    await kube.mergePatch(
      modelObject(
        namespace,
        "split",
        spec({
          trafficPercent: 20,
          modelConfig: { inline: canaryConfig },
          resources: { requests: { cpu: "2" }, limits: { cpu: "1" } },
        } as never),
      ),
    );
    await eventually(async () => {
      const condition = conditionOf(await live(), "CanaryReady");
      assert.equal(condition?.reason, "Refused", JSON.stringify(condition));
      assert.match(
        condition!.message,
        /the API server refused Deployment split-canary: .*must be less than or equal to cpu limit/,
      );
    }, 30_000);
    const model = await live();
    assert.equal(conditionOf(model, "Ready")?.status, "True");
    assert.equal(model.status?.observedGeneration, model.metadata.generation, "the status is written");
    assert.deepEqual(await weights(), ["split=80", "split-canary=20"], "the running canary keeps its share");
  });

  it("retires a removed canary: the route sends it nothing, its objects stay until the gateway took that and the drain passed, then go", async () => {
    await kube.mergePatch(modelObject(namespace, "split", spec(null)));
    await eventually(async () => {
      const model = await live();
      assert.equal(conditionOf(model, "CanaryReady")?.reason, "Retiring");
      assert.equal(model.status?.canary?.summary, "retiring");
      assert.deepEqual(await weights(), ["split=100", "split-canary=0"]);
    }, 30_000);
    const since = Date.parse((await live()).status!.canary!.retiringSince!);
    // No gateway has accepted the route yet: everything of the canary is still there.
    for (const [apiVersion, kind, name] of canaryObjects) {
      assert.equal(await kube.exists(apiVersion, kind, namespace, name), true, `${kind} ${name}`);
    }
    // The route's controller accepts the generation that sends the canary nothing.
    await acceptRoute();
    await eventually(
      async () => {
        for (const [apiVersion, kind, name] of canaryObjects) {
          assert.equal(await kube.exists(apiVersion, kind, namespace, name), false, `${kind} ${name}`);
        }
      },
      60_000,
      250,
    );
    const gone = Date.now();
    assert.ok(gone - since >= 10_000 - 1_000, `the canary went ${gone - since} ms after it was retired`);
    await eventually(async () => {
      const model = await live();
      assert.equal(conditionOf(model, "CanaryReady"), undefined);
      assert.equal(model.status?.canary, undefined);
      // One backend, of the weight the Gateway API's schema defaults to.
      assert.deepEqual(await weights(), ["split=1"]);
    }, 30_000);
    assert.equal(await kube.exists("apps/v1", "Deployment", namespace, "split"), true);
  });
});

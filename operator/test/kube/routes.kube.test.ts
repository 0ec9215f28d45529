import assert from "node:assert/strict";
import type { TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { installGatewayApi } from "../../../e2e/support/gateway.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import type { Route } from "../../src/resources/routes.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject, unclaimedGateway } from "../fixtures/kube.js";
import { useOperator } from "../fixtures/operator.js";

const GATEWAY_API = "gateway.networking.k8s.io/v1";
const ROUTE_CRDS = ["grpcroutes.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"];

describe("routes (spec.routes: the Gateway API's upstream CRDs, real API server)", function () {
  this.timeout(180_000);
  const suite = useOperator("routes");
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let namespace: string;
  before(async () => {
    ({ cluster, kube, namespace } = suite);
    // Start without the Gateway API, whatever an earlier suite installed.
    for (const crd of ROUTE_CRDS) if (await cluster.hasCrd(crd)) await cluster.deleteCrd(crd);
  });

  const routed = (routes: DynamoKserveModel["spec"]["routes"] | null) =>
    modelObject(namespace, "routed", {
      replicas: 1,
      modelConfig: { inline: IDENTITY_CONFIG },
      routes,
    } as DynamoKserveModel["spec"]);
  const live = () =>
    kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "routed");
  const routesReady = async () => {
    const condition = conditionOf(await live(), "RoutesReady");
    return [condition?.status, condition?.reason];
  };
  const route = (kind: string) => kube.read<Route>(GATEWAY_API, kind, namespace, "routed");

  it("says CRDNotInstalled and writes nothing without the Gateway API, then writes both routes when it is installed: GatewayNotFound until the Gateway exists, then Pending for its controller", async () => {
    await kube.create(
      routed({
        gateway: { name: "inference" },
        grpc: { hostnames: ["routed.example.com"] },
        http: { hostnames: ["http.routed.example.com"] },
      }),
    );
    await eventually(async () => assert.deepEqual(await routesReady(), ["False", "CRDNotInstalled"]), 30_000);
    assert.match(
      conditionOf(await live(), "RoutesReady")?.message ?? "",
      /the Gateway API's GRPCRoute and HTTPRoute CRD/,
    );
    await eventually(
      async () => assert.equal(conditionOf(await live(), "Ready")?.status, "True", "the model itself serves"),
      30_000,
    );

    await installGatewayApi(cluster);
    await eventually(async () => assert.deepEqual(await routesReady(), ["False", "GatewayNotFound"]), 60_000);
    const grpc = await route("GRPCRoute");
    assert.deepEqual(grpc.spec.parentRefs, [
      { group: "gateway.networking.k8s.io", kind: "Gateway", name: "inference" },
    ]);
    assert.deepEqual(grpc.spec.hostnames, ["routed.example.com"]);
    assert.deepEqual(
      grpc.spec.rules.map((rule) => rule.backendRefs.map(({ name, port }) => [name, port])),
      [[["routed", 8001]]],
    );
    const http = await route("HTTPRoute");
    assert.deepEqual(
      http.spec.rules.map((rule) => rule.backendRefs.map(({ name, port }) => [name, port])),
      [[["routed", 8000]]],
    );
    assert.equal(grpc.metadata.ownerReferences?.[0]?.uid, (await live()).metadata.uid);
    assert.deepEqual((await live()).status?.routes, {
      gateway: `${namespace}/inference`,
      grpcRoute: "routed",
      httpRoute: "routed",
    });

    // The Gateway appears (no controller takes its class here): the routes wait to be accepted.
    await kube.create(unclaimedGateway(namespace));
    await eventually(async () => assert.deepEqual(await routesReady(), ["False", "Pending"]), 30_000);
  });

  it("deletes a route the model stops asking for, and both with spec.routes", async () => {
    await kube.mergePatch(routed({ gateway: { name: "inference" }, grpc: null } as never));
    await eventually(async () => {
      assert.equal(await kube.exists(GATEWAY_API, "GRPCRoute", namespace, "routed"), false);
      assert.equal(await kube.exists(GATEWAY_API, "HTTPRoute", namespace, "routed"), true);
    }, 30_000);
    await kube.mergePatch(routed(null));
    await eventually(async () => {
      assert.equal(await kube.exists(GATEWAY_API, "HTTPRoute", namespace, "routed"), false);
      const model = await live();
      assert.equal(conditionOf(model, "RoutesReady"), undefined);
      assert.equal(model.status?.routes, undefined);
    }, 30_000);
  });
});

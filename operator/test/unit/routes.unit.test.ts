import assert from "node:assert/strict";
import type { DynamoKserveModel, DynamoKserveModelSpec } from "../../src/api/v1alpha1.js";
import { entryOf, type PlanGroup, type PlanOutcomes } from "../../src/kube/owned.js";
import {
  routesCondition,
  routesOutcome,
  routesPlan,
  routesStatus,
  type Route,
  type RoutesOutcome,
} from "../../src/resources/routes.js";
import { IDENTITY_CONFIG } from "../fixtures/kube.js";
import { assertGolden } from "../fixtures/golden.js";

function model(spec: Partial<DynamoKserveModelSpec> = {}): DynamoKserveModel {
  return {
    apiVersion: "dynamokserve.dev/v1alpha1",
    kind: "DynamoKserveModel",
    metadata: { name: "resnet", namespace: "models", uid: "00000000-0000-0000-0000-000000000003", generation: 1 },
    spec: { modelConfig: { inline: IDENTITY_CONFIG }, ...spec },
  };
}

const routed = model({
  grpcPort: 9001,
  routes: {
    gateway: { name: "inference", namespace: "gateways", sectionName: "web" },
    grpc: { hostnames: ["resnet.example.com"] },
    http: { hostnames: ["rest.resnet.example.com"], pathPrefix: "/v2/models/resnet" },
  },
});

const applied = (group: PlanGroup) => group.map((entry) => ("apply" in entry ? (entry.apply as Route) : undefined)!);

/** Outcomes as the owned caches would report them: every route applied, as `live` has it (with its status). */
function appliedOutcomes(group: PlanGroup, live: Partial<Record<string, Route>> = {}): PlanOutcomes {
  return {
    of: (kind, name) => {
      const entry = group.find((candidate) => entryOf(candidate).kind.kind === kind.kind);
      if (entry === undefined || !("apply" in entry)) return undefined;
      return {
        state: "Applied",
        object: live[kind.kind] ?? { ...entry.apply, metadata: { ...entry.apply.metadata, name } },
      };
    },
    stopped: () => undefined,
  };
}

const accepted = (route: Route, status: "True" | "False", reason = "Accepted", message = ""): Route => ({
  ...route,
  status: {
    parents: [
      {
        parentRef: { group: "gateway.networking.k8s.io", kind: "Gateway", name: "inference", namespace: "gateways" },
        controllerName: "traefik.io/gateway-controller",
        conditions: [
          { type: "Accepted", status, reason, message },
          { type: "ResolvedRefs", status: "True", reason: "ResolvedRefs", message: "" },
        ],
      },
    ],
  },
});

describe("the routes of a model (spec.routes: Gateway API GRPCRoute and HTTPRoute)", () => {
  it("routes gRPC to the Service's gRPC port and HTTP under the path prefix to its HTTP port, from the Gateway's listener (golden objects)", () => {
    const group = routesPlan(routed);
    assertGolden("routes", applied(group));
    const [grpc, http] = applied(group);
    assert.deepEqual(grpc!.spec.rules, [{ backendRefs: [{ name: "resnet", port: 9001 }] }]);
    assert.deepEqual(http!.spec.rules[0]!.backendRefs, [{ name: "resnet", port: 8000 }]);
  });

  it("routes to the model's InferencePool when asked (a gateway of the Inference Extension asks its picker)", () => {
    const [route] = applied(
      routesPlan(
        model({
          inferencePool: { endpointPickerRef: { name: "theirs", port: { number: 9002 } } },
          routes: { gateway: { name: "gw" }, backend: "InferencePool", grpc: {} },
        }),
      ),
    );
    assert.deepEqual(route!.spec.rules, [
      { backendRefs: [{ group: "inference.networking.k8s.io", kind: "InferencePool", name: "resnet" }] },
    ]);
    assert.deepEqual(route!.spec.parentRefs, [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "gw" }]);
    assert.equal(route!.spec.hostnames, undefined);
  });

  it("writes only what is asked: an HTTPRoute alone, matching every path by default; nothing without spec.routes", () => {
    const [http, ...rest] = applied(routesPlan(model({ routes: { gateway: { name: "gw" }, http: {} } })));
    assert.deepEqual([http!.kind, rest.length], ["HTTPRoute", 0]);
    assert.deepEqual(http!.spec.rules[0]!.matches, [{ path: { type: "PathPrefix", value: "/" } }]);
    assert.deepEqual(routesPlan(model()), []);
  });

  it("says RoutesReady as the Gateway's controller said it in each route's status", () => {
    const group = routesPlan(routed);
    const [grpc, http] = applied(group);
    const condition = (outcome: RoutesOutcome | undefined) => {
      assert.ok(outcome !== undefined);
      const value = routesCondition(outcome, routed);
      return [value.status, value.reason, value.message];
    };
    assert.deepEqual(condition(routesOutcome(routed, group, appliedOutcomes(group), false)), [
      "False",
      "GatewayNotFound",
      "Gateway gateways/inference does not exist: GRPCRoute resnet and HTTPRoute resnet are written and attach when it does",
    ]);
    assert.deepEqual(condition(routesOutcome(routed, group, appliedOutcomes(group), true)), [
      "False",
      "Pending",
      "waiting for Gateway gateways/inference's controller to accept GRPCRoute resnet and resolve its backends",
    ]);
    const refused = appliedOutcomes(group, {
      GRPCRoute: accepted(grpc!, "True"),
      HTTPRoute: accepted(http!, "False", "NotAllowedByListeners", "no listener allows HTTPRoute"),
    });
    assert.deepEqual(condition(routesOutcome(routed, group, refused, true)), [
      "False",
      "NotAccepted",
      "Gateway gateways/inference does not accept HTTPRoute resnet: NotAllowedByListeners: no listener allows HTTPRoute",
    ]);
    // Accepted, but its backend is of a kind the gateway cannot reach (an InferencePool at a gateway without GAIE).
    const unresolved = accepted(grpc!, "True");
    unresolved.status!.parents![0]!.conditions![1] = {
      type: "ResolvedRefs",
      status: "False",
      reason: "InvalidKind",
      message: "unsupported backend kind InferencePool",
    };
    assert.deepEqual(
      condition(
        routesOutcome(
          routed,
          group,
          appliedOutcomes(group, { GRPCRoute: unresolved, HTTPRoute: accepted(http!, "True") }),
          true,
        ),
      ),
      [
        "False",
        "BackendNotResolved",
        "Gateway gateways/inference accepts GRPCRoute resnet but cannot send to its backend: InvalidKind: unsupported backend kind InferencePool",
      ],
    );
    // What the controller said of an older generation says nothing of the spec just written.
    const stale = accepted({ ...grpc!, metadata: { ...grpc!.metadata, generation: 2 } }, "True");
    for (const parentCondition of stale.status!.parents![0]!.conditions!) parentCondition.observedGeneration = 1;
    assert.equal(
      condition(
        routesOutcome(
          routed,
          group,
          appliedOutcomes(group, { GRPCRoute: stale, HTTPRoute: accepted(http!, "True") }),
          true,
        ),
      )[1],
      "Pending",
    );
    const both = appliedOutcomes(group, { GRPCRoute: accepted(grpc!, "True"), HTTPRoute: accepted(http!, "True") });
    // A namespace the operator does not watch: the routes' own status still says it.
    const outcome = routesOutcome(routed, group, both, undefined);
    assert.deepEqual(condition(outcome), [
      "True",
      "Accepted",
      "Gateway gateways/inference accepted GRPCRoute resnet and HTTPRoute resnet",
    ]);
    assert.deepEqual(routesStatus(outcome), {
      routes: { gateway: "gateways/inference", grpcRoute: "resnet", httpRoute: "resnet" },
    });
  });

  it("says CRDNotInstalled naming the missing kinds, and NameTaken naming the object", () => {
    const group = routesPlan(routed);
    const missing: PlanOutcomes = {
      of: (kind) =>
        kind.kind === "GRPCRoute" ? { state: "CRDNotInstalled" } : { state: "Applied", object: applied(group)[1]! },
      stopped: () => undefined,
    };
    const outcome = routesOutcome(routed, group, missing, true)!;
    assert.equal(outcome.state, "CRDNotInstalled");
    assert.match(routesCondition(outcome, routed).message ?? "", /^the Gateway API's GRPCRoute CRD/);
    assert.deepEqual(routesStatus(outcome), {});
    const message = "an HTTPRoute named resnet exists and is not managed by dynamo-kserve; rename one of them";
    const taken: PlanOutcomes = {
      of: () => ({ state: "NotReached" }),
      stopped: () => ({ reason: "NameTaken", message }),
    };
    assert.deepEqual(routesCondition(routesOutcome(routed, group, taken, true)!, routed), {
      status: "False",
      reason: "NameTaken",
      message,
    });
  });
});

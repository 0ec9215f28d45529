import type { KubernetesObject, V1ObjectMeta } from "@kubernetes/client-node";
import {
  SPEC_DEFAULTS,
  type ConditionValue,
  type DynamoKserveModel,
  type DynamoKserveModelStatus,
} from "../api/v1alpha1.js";
import { objectOf, type OwnedKind, type PlanGroup, type PlanOutcomes, type PlannedOutcome } from "../kube/owned.js";
import { portsOf } from "./dataplane-pods.js";
import { INFERENCE_POOL_GROUP, INFERENCE_POOL_KIND } from "./inference-pool.js";
import { objectNames, ownedMetadata } from "./names.js";

/**
 * The Gateway API routes of a model (spec.routes): a GRPCRoute to its gRPC port and an
 * HTTPRoute to its HTTP port, from one Gateway, to the model's Service (whose ports say
 * appProtocol kubernetes.io/h2c and http, which is how a gateway knows to speak HTTP/2
 * cleartext to gRPC pods) or to its InferencePool. RoutesReady follows what the gateway's
 * controller wrote in each route's status. Pure builders.
 */

const GATEWAY_GROUP = "gateway.networking.k8s.io";

export const GRPC_ROUTE_KIND = {
  apiVersion: `${GATEWAY_GROUP}/v1`,
  kind: "GRPCRoute",
  plural: "grpcroutes",
  optional: true,
} as const satisfies OwnedKind;

export const HTTP_ROUTE_KIND = {
  apiVersion: `${GATEWAY_GROUP}/v1`,
  kind: "HTTPRoute",
  plural: "httproutes",
  optional: true,
} as const satisfies OwnedKind;

/** The Gateway, read (never written) to say when a route's parent does not exist. */
export const GATEWAY_KIND = { apiVersion: `${GATEWAY_GROUP}/v1`, kind: "Gateway", plural: "gateways" } as const;

export const ROUTES_OWNS: readonly OwnedKind[] = [GRPC_ROUTE_KIND, HTTP_ROUTE_KIND];

type RoutesSpec = NonNullable<DynamoKserveModel["spec"]["routes"]>;

interface ParentRef {
  group: string;
  kind: string;
  name: string;
  namespace?: string;
  sectionName?: string;
}

interface BackendRef {
  group?: string;
  kind?: string;
  name: string;
  port?: number;
  weight?: number;
}

/** A route's parent as its status reports it, with the conditions the gateway's controller set. */
interface RouteParentStatus {
  parentRef: Partial<ParentRef>;
  controllerName?: string;
  conditions?: { type: string; status: string; reason?: string; message?: string; observedGeneration?: number }[];
}

export interface Route extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: {
    parentRefs: ParentRef[];
    hostnames?: string[];
    rules: { matches?: unknown[]; backendRefs: BackendRef[] }[];
  };
  status?: { parents?: RouteParentStatus[] };
}

/** The Gateway the routes attach to, as `namespace/name`. */
export function gatewayOf(model: DynamoKserveModel): { namespace: string; name: string } {
  const { gateway } = model.spec.routes!;
  return { namespace: gateway.namespace ?? model.metadata.namespace, name: gateway.name };
}

function parentRef(model: DynamoKserveModel): ParentRef {
  const { gateway } = model.spec.routes!;
  return {
    group: GATEWAY_GROUP,
    kind: "Gateway",
    name: gateway.name,
    ...(gateway.namespace !== undefined ? { namespace: gateway.namespace } : {}),
    ...(gateway.sectionName !== undefined ? { sectionName: gateway.sectionName } : {}),
  };
}

/**
 * Where a route sends requests: the model's Service on the protocol's port, or its InferencePool;
 * with a canary (its share, 0–100), the model's and the canary's Services by weight.
 */
function backendRefs(model: DynamoKserveModel, protocol: "grpc" | "http", canary: number | undefined): BackendRef[] {
  const backend = model.spec.routes!.backend ?? SPEC_DEFAULTS.routes.backend;
  if (backend === "InferencePool") {
    return [
      {
        group: INFERENCE_POOL_GROUP,
        kind: INFERENCE_POOL_KIND.kind,
        name: model.metadata.name,
      },
    ];
  }
  const port = portsOf(model)[protocol];
  if (canary === undefined) return [{ name: objectNames(model).service, port }];
  return [
    { name: objectNames(model).service, port, weight: 100 - canary },
    { name: objectNames(model, "canary").service, port, weight: canary },
  ];
}

function route(
  model: DynamoKserveModel,
  kind: typeof GRPC_ROUTE_KIND | typeof HTTP_ROUTE_KIND,
  hostnames: readonly string[] | undefined,
  rule: Route["spec"]["rules"][number],
): Route {
  return {
    apiVersion: kind.apiVersion,
    kind: kind.kind,
    metadata: ownedMetadata(model, model.metadata.name),
    spec: {
      parentRefs: [parentRef(model)],
      ...(hostnames !== undefined && hostnames.length > 0 ? { hostnames: [...hostnames] } : {}),
      rules: [rule],
    },
  };
}

/** The GRPCRoute: every gRPC call the listener takes (for these hostnames) to the model (and its canary). */
export function desiredGrpcRoute(model: DynamoKserveModel, canary?: number): Route {
  const grpc = model.spec.routes!.grpc!;
  return route(model, GRPC_ROUTE_KIND, grpc.hostnames, { backendRefs: backendRefs(model, "grpc", canary) });
}

/** The HTTPRoute: requests under the path prefix (for these hostnames) to the model (and its canary). */
export function desiredHttpRoute(model: DynamoKserveModel, canary?: number): Route {
  const http = model.spec.routes!.http!;
  const pathPrefix = http.pathPrefix ?? SPEC_DEFAULTS.routes.http.pathPrefix;
  return route(model, HTTP_ROUTE_KIND, http.hostnames, {
    matches: [{ path: { type: "PathPrefix", value: pathPrefix } }],
    backendRefs: backendRefs(model, "http", canary),
  });
}

/**
 * The routes' group of the model's plan (a group of its own: a route's name taken stops no
 * pod); `canary` is the canary's share now (undefined without one).
 */
export function routesPlan(model: DynamoKserveModel, canary?: number): PlanGroup {
  const routes: RoutesSpec | undefined = model.spec.routes;
  if (routes === undefined) return [];
  return [
    ...(routes.grpc !== undefined ? [{ apply: desiredGrpcRoute(model, canary) }] : []),
    ...(routes.http !== undefined ? [{ apply: desiredHttpRoute(model, canary) }] : []),
  ];
}

/**
 * Whether the gateway has taken routes that send the canary nothing: each live route (none
 * left counts) has a weight of 0 (or no backend) for the canary's Service, and its parent
 * accepted that generation. A retiring canary's objects go only then.
 */
export function routesSendCanaryNothing(model: DynamoKserveModel, live: readonly (Route | undefined)[]): boolean {
  const canaryService = objectNames(model, "canary").service;
  return live.every((route) => {
    if (route === undefined) return true;
    const toCanary = route.spec.rules.flatMap((rule) => rule.backendRefs).filter((ref) => ref.name === canaryService);
    if (toCanary.some((ref) => (ref.weight ?? 1) > 0)) return false;
    if (model.spec.routes === undefined) return true;
    return routeRefused(route, model, "") === undefined;
  });
}

/** What became of spec.routes. */
export type RoutesOutcome =
  | { readonly state: "CRDNotInstalled"; readonly kinds: readonly string[] }
  | { readonly state: "NameTaken" | "Refused"; readonly message: string }
  | {
      readonly state: "Written";
      readonly gateway: string;
      /** Whether the Gateway exists; undefined when the operator cannot see its namespace. */
      readonly gatewayFound: boolean | undefined;
      readonly routes: readonly Route[];
    };

/**
 * The routes' outcome from the plan's: `gatewayFound` looks the Gateway up (undefined when
 * its namespace is not watched, or the Gateway CRD is not installed).
 */
export function routesOutcome(
  model: DynamoKserveModel,
  group: PlanGroup,
  outcomes: PlanOutcomes,
  gatewayFound: boolean | undefined,
): RoutesOutcome | undefined {
  if (group.length === 0) return undefined;
  const stopped = outcomes.stopped(group);
  if (stopped !== undefined) return { state: stopped.reason, message: stopped.message };
  const kinds = [GRPC_ROUTE_KIND, HTTP_ROUTE_KIND];
  const planned = kinds
    .map((kind) => ({ kind, outcome: outcomes.of(kind, model.metadata.name) }))
    .filter((entry): entry is { kind: (typeof kinds)[number]; outcome: PlannedOutcome } => entry.outcome !== undefined);
  const missing = planned.filter(({ outcome }) => outcome.state === "CRDNotInstalled").map(({ kind }) => kind.kind);
  if (missing.length > 0) return { state: "CRDNotInstalled", kinds: missing };
  const { namespace, name } = gatewayOf(model);
  return {
    state: "Written",
    gateway: `${namespace}/${name}`,
    gatewayFound,
    routes: planned.flatMap(({ outcome }) => objectOf<Route>(outcome) ?? []),
  };
}

/** The status of the model's parent (its Gateway) in a route's status, as its controller wrote it. */
function parentStatus(route: Route, model: DynamoKserveModel): RouteParentStatus | undefined {
  const { namespace, name } = gatewayOf(model);
  return route.status?.parents?.find(
    (parent) =>
      parent.parentRef.name === name &&
      (parent.parentRef.namespace ?? route.metadata.namespace) === namespace &&
      (parent.parentRef.kind ?? "Gateway") === "Gateway",
  );
}

/** RoutesReady. */
export function routesCondition(outcome: RoutesOutcome, model: DynamoKserveModel): ConditionValue {
  switch (outcome.state) {
    case "CRDNotInstalled":
      return {
        status: "False",
        reason: "CRDNotInstalled",
        message: `the Gateway API's ${outcome.kinds.join(" and ")} CRD (gateway.networking.k8s.io, v1) is not installed: no ${outcome.kinds.join(" or ")} is written until it is (no restart needed)`,
      };
    case "NameTaken":
    case "Refused":
      return { status: "False", reason: outcome.state, message: outcome.message };
    case "Written": {
      const names = outcome.routes.map((route) => `${route.kind} ${route.metadata.name}`).join(" and ");
      if (outcome.gatewayFound === false) {
        return {
          status: "False",
          reason: "GatewayNotFound",
          message: `Gateway ${outcome.gateway} does not exist: ${names} are written and attach when it does`,
        };
      }
      for (const route of outcome.routes) {
        const refused = routeRefused(route, model, outcome.gateway);
        if (refused !== undefined) return refused;
      }
      return { status: "True", reason: "Accepted", message: `Gateway ${outcome.gateway} accepted ${names}` };
    }
  }
}

/**
 * What keeps a route from carrying traffic, from its parent's conditions for the route's
 * current generation (an older one's Accepted says nothing of the spec just written):
 * Accepted (the Gateway took it) and ResolvedRefs (its backends are there and of a kind and
 * protocol the gateway can reach; a gateway without GAIE support refuses an InferencePool
 * there, while still accepting the route). Undefined when both are True.
 */
function routeRefused(route: Route, model: DynamoKserveModel, gateway: string): ConditionValue | undefined {
  const current = (parentStatus(route, model)?.conditions ?? []).filter(
    (condition) =>
      condition.observedGeneration === undefined || condition.observedGeneration >= (route.metadata.generation ?? 0),
  );
  const named = `${route.kind} ${route.metadata.name}`;
  const why = (condition: { reason?: string; message?: string }) =>
    `${condition.reason ?? ""}${condition.message ? `: ${condition.message}` : ""}`;
  const accepted = current.find((condition) => condition.type === "Accepted");
  const resolved = current.find((condition) => condition.type === "ResolvedRefs");
  if (accepted === undefined || resolved === undefined) {
    return {
      status: "False",
      reason: "Pending",
      message: `waiting for Gateway ${gateway}'s controller to accept ${named} and resolve its backends`,
    };
  }
  if (accepted.status !== "True") {
    return {
      status: "False",
      reason: "NotAccepted",
      message: `Gateway ${gateway} does not accept ${named}: ${why(accepted)}`,
    };
  }
  if (resolved.status !== "True") {
    return {
      status: "False",
      reason: "BackendNotResolved",
      message: `Gateway ${gateway} accepts ${named} but cannot send to its backend: ${why(resolved)}`,
    };
  }
  return undefined;
}

/** status.routes. */
export function routesStatus(outcome: RoutesOutcome | undefined): Pick<DynamoKserveModelStatus, "routes"> {
  if (outcome?.state !== "Written") return {};
  const named = (kind: string) => outcome.routes.find((route) => route.kind === kind)?.metadata.name;
  const grpcRoute = named(GRPC_ROUTE_KIND.kind);
  const httpRoute = named(HTTP_ROUTE_KIND.kind);
  return {
    routes: {
      gateway: outcome.gateway,
      ...(grpcRoute !== undefined ? { grpcRoute } : {}),
      ...(httpRoute !== undefined ? { httpRoute } : {}),
    },
  };
}

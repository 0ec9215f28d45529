import { OPERATOR_NAME } from "../api/objects.js";
import type { KubernetesObject, V1ObjectMeta, V1Service } from "@kubernetes/client-node";
import type { Owner } from "../api/objects.js";
import { SPEC_DEFAULTS, type DynamoKserveModelSpec } from "../api/v1alpha1.js";
import { MANAGED_BY_LABEL, ownedMetadata, selectorFor, suffixedName } from "./names.js";
import { portsOf, SERVICE_KIND } from "./dataplane-pods.js";
import type { OwnedKind } from "../kube/owned.js";

/**
 * Gateway API Inference Extension objects: the InferencePool a DynamoKserveModel asks
 * for, and the Service the operator keeps in front of every InferencePool (ours or a
 * user's) so gateways and meshes that read a Service's appProtocol speak HTTP/2
 * cleartext to gRPC model servers (or HTTP to a pool on the HTTP front door). Pure builders.
 */

export const INFERENCE_POOL_KIND = {
  apiVersion: "inference.networking.k8s.io/v1",
  kind: "InferencePool",
  plural: "inferencepools",
  optional: true,
} as const satisfies OwnedKind;

/** GAIE's InferenceObjective: a priority for the requests of a pool that name it (GAIE v1.4's version). */
export const INFERENCE_OBJECTIVE_KIND = {
  apiVersion: "inference.networking.x-k8s.io/v1alpha2",
  kind: "InferenceObjective",
  plural: "inferenceobjectives",
  optional: true,
} as const satisfies OwnedKind;

/** The InferencePool's API group (a route's or an InferenceObjective's reference names it). */
export const INFERENCE_POOL_GROUP = INFERENCE_POOL_KIND.apiVersion.split("/")[0]!;

export const H2C = "kubernetes.io/h2c";

/** Labels the Service fronting a pool with the pool's name (how its events find the pool). */
export const POOL_LABEL = "dynamokserve.dev/inference-pool";

/**
 * The protocol of a pool's pods when the pool cannot say it (an InferencePool CRD older
 * than appProtocol): set on our pools, and honoured on anyone's.
 */
export const APP_PROTOCOL_ANNOTATION = "dynamokserve.dev/app-protocol";

export interface InferencePool extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: {
    selector: { matchLabels: Record<string, string> };
    targetPorts: { number: number }[];
    appProtocol?: string;
    endpointPickerRef: {
      group?: string;
      kind?: string;
      name: string;
      port?: { number: number };
      failureMode?: string;
    };
  };
}

export const HTTP = "http";

/** A DynamoKserveModel or a DynamoKserveRepository, as its pool needs it (the CRDs share spec.inferencePool). */
export type PoolOwner = Owner & {
  readonly spec: Pick<DynamoKserveModelSpec, "inferencePool" | "grpcPort" | "httpPort" | "metricsPort"> &
    Partial<Pick<DynamoKserveModelSpec, "modelName">>;
};

/** An InferencePool's reference to its endpoint picker (spec.endpointPickerRef, defaults filled in). */
export type EndpointPickerRef = InferencePool["spec"]["endpointPickerRef"];

/** spec.inferencePool.endpointPickerRef with its defaults: a picker the user runs. */
export function userPickerRef(owner: PoolOwner): EndpointPickerRef {
  const ref = owner.spec.inferencePool!.endpointPickerRef!;
  const defaults = SPEC_DEFAULTS.inferencePool.endpointPickerRef;
  return {
    group: ref.group ?? defaults.group,
    kind: ref.kind ?? defaults.kind,
    name: ref.name,
    ...(ref.port !== undefined ? { port: { number: ref.port.number } } : {}),
    failureMode: ref.failureMode ?? defaults.failureMode,
  };
}

/**
 * What an owner's pool serves (spec.inferencePool.protocol): the gRPC port with appProtocol
 * kubernetes.io/h2c, or the HTTP front door with http. One pool has one appProtocol (GAIE).
 */
export function poolTarget(owner: PoolOwner): { appProtocol: string; port: number } {
  const protocol = owner.spec.inferencePool?.protocol ?? SPEC_DEFAULTS.inferencePool.protocol;
  const ports = portsOf(owner);
  return protocol === "HTTP" ? { appProtocol: HTTP, port: ports.http } : { appProtocol: H2C, port: ports.grpc };
}

/**
 * The InferencePool of a model or a repository: its pods on the port it serves, with the
 * appProtocol where the CRD knows the field, and the endpoint picker `endpointPickerRef` names.
 */
export function desiredInferencePool(
  owner: PoolOwner,
  options: { appProtocolSupported: boolean; endpointPickerRef: EndpointPickerRef },
): InferencePool {
  const { appProtocol, port } = poolTarget(owner);
  return {
    apiVersion: INFERENCE_POOL_KIND.apiVersion,
    kind: INFERENCE_POOL_KIND.kind,
    metadata: { ...ownedMetadata(owner, owner.metadata.name), annotations: { [APP_PROTOCOL_ANNOTATION]: appProtocol } },
    spec: {
      selector: { matchLabels: selectorFor(owner) },
      targetPorts: [{ number: port }],
      ...(options.appProtocolSupported ? { appProtocol } : {}),
      endpointPickerRef: options.endpointPickerRef,
    },
  };
}

/** `<pool>-pool`, shortened with a hash when a Service name (63 characters) would be too long. */
export const poolServiceName = (pool: string): string => suffixedName(pool, "pool");

/** kubernetes.io/h2c for a gRPC pool (its appProtocol, else our annotation), http otherwise. */
export function poolAppProtocol(pool: InferencePool): string {
  const declared = pool.spec.appProtocol ?? pool.metadata.annotations?.[APP_PROTOCOL_ANNOTATION];
  return declared === H2C ? H2C : HTTP;
}

/** The Service fronting a pool's pods on its target ports, owned by the pool. */
export function desiredPoolService(pool: InferencePool): V1Service {
  const appProtocol = poolAppProtocol(pool);
  return {
    apiVersion: SERVICE_KIND.apiVersion,
    kind: SERVICE_KIND.kind,
    metadata: {
      name: poolServiceName(pool.metadata.name),
      namespace: pool.metadata.namespace,
      labels: { [MANAGED_BY_LABEL]: OPERATOR_NAME, [POOL_LABEL]: pool.metadata.name },
      ownerReferences: [
        {
          apiVersion: INFERENCE_POOL_KIND.apiVersion,
          kind: INFERENCE_POOL_KIND.kind,
          name: pool.metadata.name,
          uid: pool.metadata.uid ?? "",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      type: "ClusterIP",
      selector: { ...pool.spec.selector.matchLabels },
      ports: pool.spec.targetPorts.map((port, index) => ({
        name: index === 0 ? (appProtocol === H2C ? "grpc" : "http") : `port-${port.number}`,
        port: port.number,
        targetPort: port.number,
        protocol: "TCP",
        appProtocol,
      })),
    },
  };
}

/**
 * The owner's InferenceObjective (spec.inferencePool.objective), named like it: requests
 * carrying `x-gateway-inference-objective: <name>` get its priority in the picker's flow control.
 */
export function desiredInferenceObjective(owner: PoolOwner): KubernetesObject & { spec: object } {
  const objective = owner.spec.inferencePool!.objective!;
  return {
    apiVersion: INFERENCE_OBJECTIVE_KIND.apiVersion,
    kind: INFERENCE_OBJECTIVE_KIND.kind,
    metadata: ownedMetadata(owner, owner.metadata.name),
    spec: {
      poolRef: {
        group: INFERENCE_POOL_GROUP,
        kind: INFERENCE_POOL_KIND.kind,
        name: owner.metadata.name,
      },
      ...(objective.priority !== undefined ? { priority: objective.priority } : {}),
    },
  };
}

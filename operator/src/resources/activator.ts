import type { V1Deployment, V1Role, V1RoleBinding, V1Service, V1ServiceAccount } from "@kubernetes/client-node";
import { ACTIVATOR_OPTIONS, activatorArguments } from "../../../lib/contract/activator.js";
import { OPERATOR_NAME, type Owner } from "../api/objects.js";
import { SPEC_DEFAULTS } from "../api/v1alpha1.js";
import {
  HARDENED_CONTAINER,
  HARDENED_POD,
  portsOf,
  secretVolume,
  sharedServiceLabel,
  type BuildSettings,
  type DataplaneSpec,
  type MountedVolume,
} from "./dataplane-pods.js";
import { MANAGED_BY_LABEL, ownedMetadata, ownerLabel } from "./names.js";
import { identityRole, identityRoleBinding, identityServiceAccount } from "./pod-identity.js";

/**
 * The activator of a data plane that scales to zero (spec.autoscaling.minReplicas 0): one
 * small always-on pod (`dynamo-kserve activator`, the operator's image) that carries the
 * label the owner's Service selects but not the Deployment's selector, so the Deployment,
 * its disruption budget, the autoscaler and the InferencePool never count it. It is Ready
 * only while no data-plane pod is (it watches them, which is all its Role allows), so the
 * Service reaches it exactly when there is nothing else to reach; it holds each request
 * until a pod is Ready, and its first held request wakes the model through KEDA's
 * external-push (its own Service, which answers even while it is not Ready). Pure builders.
 */

/** The port of KEDA's external scaler service on the activator. */
export const ACTIVATOR_SCALER_PORT = ACTIVATOR_OPTIONS.scalerPort.default!;
/** The activator's side port (probes, /metrics); its Service publishes it as `metrics`. */
const ACTIVATOR_METRICS_PORT = 9091;

/**
 * The container ports of the activator's scaler and side port: 9090 and 9091 unless the
 * model's own ports (which the activator also listens on) use them. The activator's Service
 * publishes them at 9090 and 9091 whatever they are.
 */
export function activatorSidePorts(model: { grpc: number; http: number }): { scaler: number; metrics: number } {
  const free = (preferred: number, taken: number[]): number => {
    let port = preferred;
    while (taken.includes(port)) port += 2;
    return port;
  };
  const scaler = free(ACTIVATOR_SCALER_PORT, [model.grpc, model.http]);
  return { scaler, metrics: free(ACTIVATOR_METRICS_PORT, [model.grpc, model.http, scaler]) };
}

/** Name of every activator object of the data plane whose Deployment is `name`. */
export const activatorName = (name: string): string => `${name}-activator`;

/** Labels of the activator's pods: the owner's Service label, never the owner's pod selector. */
export function activatorPodLabels(owner: Owner): Record<string, string> {
  return {
    "app.kubernetes.io/name": "dynamo-kserve-activator",
    "app.kubernetes.io/instance": owner.metadata.name,
    [MANAGED_BY_LABEL]: OPERATOR_NAME,
    ...sharedServiceLabel(owner),
  };
}

/** What the activator reads besides the owner's spec. */
export interface ActivatorInputs {
  /** The owner's token Secret and key (spec.auth): the activator refuses a request without a valid token before holding it. */
  readonly tokens?: { readonly secretName: string; readonly key: string };
  /**
   * The owner's serving certificate Secret (tls.crt, tls.key, and ca.crt, the CA the pods'
   * certificate is checked against) and the name that certificate carries: the activator
   * serves clients with it and reaches the pods over TLS.
   */
  readonly tls?: { readonly secretName: string; readonly serverName: string };
}

const AUTH_MOUNT = "/etc/dynamo-kserve/auth";
const TLS_MOUNT = "/etc/dynamo-kserve/tls";
/** The least the activator needs: to see the owner's pods come and go. */
const POD_WATCH_VERBS = ["get", "list", "watch"];

type ActivatorSpec = Pick<DataplaneSpec, "autoscaling" | "grpcPort" | "httpPort" | "metricsPort" | "logLevel">;

/** The ServiceAccount the activator runs as. */
export function activatorServiceAccount(owner: Owner, name: string): V1ServiceAccount {
  return identityServiceAccount(owner, activatorName(name));
}

/** Its Role: read the pods of its namespace (RBAC cannot narrow a watch to a label; the activator's selector does). */
export function activatorRole(owner: Owner, name: string): V1Role {
  return identityRole(owner, activatorName(name), [{ apiGroups: [""], resources: ["pods"], verbs: POD_WATCH_VERBS }]);
}

export function activatorRoleBinding(owner: Owner, name: string): V1RoleBinding {
  return identityRoleBinding(owner, activatorName(name));
}

/**
 * The activator's own Service: KEDA's scaler and its metrics, answered whether or not the
 * activator is Ready (Ready means "the model has no ready pod", not "alive").
 */
export function activatorService(owner: Owner, name: string): V1Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: ownedMetadata(owner, activatorName(name)),
    spec: {
      type: "ClusterIP",
      selector: activatorPodLabels(owner),
      publishNotReadyAddresses: true,
      ports: [
        {
          name: "keda-scaler",
          port: ACTIVATOR_SCALER_PORT,
          targetPort: "keda-scaler",
          protocol: "TCP",
          appProtocol: "kubernetes.io/h2c",
        },
        {
          name: "metrics",
          port: ACTIVATOR_METRICS_PORT,
          targetPort: "act-metrics",
          protocol: "TCP",
          appProtocol: "http",
        },
      ],
    },
  };
}

/**
 * The activator's Deployment: one pod, replaced by surge only (a new pod runs beside the old
 * one until it is Ready, so a model at zero never loses its activator during a roll; while
 * the model has ready pods neither is Ready and the roll waits, harmlessly).
 */
export function activatorDeployment(
  owner: Owner,
  spec: ActivatorSpec,
  name: string,
  inputs: ActivatorInputs,
  settings: BuildSettings,
): V1Deployment {
  const ports = portsOf({ spec });
  const side = activatorSidePorts(ports);
  const activation = spec.autoscaling?.activation ?? {};
  const holdTimeoutSecs = activation.holdTimeoutSeconds ?? SPEC_DEFAULTS.autoscaling.activation.holdTimeoutSeconds;
  const mounted: MountedVolume[] = [
    ...(inputs.tokens !== undefined ? [secretVolume("auth", inputs.tokens.secretName, AUTH_MOUNT)] : []),
    ...(inputs.tls !== undefined ? [secretVolume("tls", inputs.tls.secretName, TLS_MOUNT)] : []),
  ];
  const args = [
    "activator",
    ...activatorArguments({
      namespace: owner.metadata.namespace,
      podSelector: `${ownerLabel(owner)}=${owner.metadata.name}`,
      grpcPort: ports.grpc,
      httpPort: ports.http,
      metricsPort: side.metrics,
      scalerPort: side.scaler,
      holdTimeoutSecs,
      maxHeldRequests: activation.maxHeldRequests ?? SPEC_DEFAULTS.autoscaling.activation.maxHeldRequests,
      // Held requests wait out their hold on SIGTERM; then the pod goes.
      shutdownGraceSecs: holdTimeoutSecs,
      logLevel: spec.logLevel ?? SPEC_DEFAULTS.logLevel,
      ...(inputs.tokens !== undefined ? { authTokenFile: `${AUTH_MOUNT}/${inputs.tokens.key}` } : {}),
      ...(inputs.tls !== undefined
        ? {
            tlsCertFile: `${TLS_MOUNT}/tls.crt`,
            tlsKeyFile: `${TLS_MOUNT}/tls.key`,
            upstreamCaFile: `${TLS_MOUNT}/ca.crt`,
            upstreamServerName: inputs.tls.serverName,
          }
        : {}),
    }),
  ];
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: ownedMetadata(owner, activatorName(name)),
    spec: {
      replicas: 1,
      selector: { matchLabels: activatorPodLabels(owner) },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels: activatorPodLabels(owner) },
        spec: {
          serviceAccountName: activatorName(name),
          // Its one use of the API server: the pod watch.
          automountServiceAccountToken: true,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: holdTimeoutSecs + 10,
          securityContext: HARDENED_POD,
          containers: [
            {
              name: "activator",
              image: settings.dataplaneImage,
              args,
              ports: [
                { name: "grpc", containerPort: ports.grpc, protocol: "TCP" },
                { name: "http", containerPort: ports.http, protocol: "TCP" },
                { name: "act-metrics", containerPort: side.metrics, protocol: "TCP" },
                { name: "keda-scaler", containerPort: side.scaler, protocol: "TCP" },
              ],
              // Ready = "no data-plane pod is ready": checked every second, so the Service
              // turns to the activator within about a second of the last pod leaving.
              readinessProbe: {
                httpGet: { path: "/readyz", port: "act-metrics" },
                periodSeconds: 1,
                failureThreshold: 1,
                successThreshold: 1,
                timeoutSeconds: 1,
              },
              livenessProbe: {
                httpGet: { path: "/healthz", port: "act-metrics" },
                periodSeconds: 10,
                failureThreshold: 3,
              },
              resources: { requests: { cpu: "10m", memory: "96Mi" }, limits: { memory: "256Mi" } },
              securityContext: HARDENED_CONTAINER,
              ...(mounted.length > 0 ? { volumeMounts: mounted.map(({ mount }) => mount) } : {}),
            },
          ],
          ...(mounted.length > 0 ? { volumes: mounted.map(({ volume }) => volume) } : {}),
        },
      },
    },
  };
}

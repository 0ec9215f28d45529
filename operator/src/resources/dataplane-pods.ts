import type { Owner } from "../api/objects.js";
import type {
  V1Affinity,
  V1Deployment,
  V2HorizontalPodAutoscaler,
  V2HorizontalPodAutoscalerBehavior,
  V2MetricSpec,
  V1EnvFromSource,
  V1EnvVar,
  V1PodDisruptionBudget,
  V1PodSecurityContext,
  V1PodSpec,
  V1SecurityContext,
  V1ResourceRequirements,
  V1Service,
  V1Toleration,
  V1TopologySpreadConstraint,
  V1Volume,
  V1VolumeMount,
} from "@kubernetes/client-node";
import { dataPlaneArguments, type DataPlaneArguments } from "../../../lib/contract/dataplane.js";
import { READINESS_SERVICE } from "../../../lib/contract/layout.js";
import { SPEC_DEFAULTS, type DynamoKserveModelSpec } from "../api/v1alpha1.js";
import type { OwnedKind } from "../kube/owned.js";
import { TLS_MOUNT } from "./credentials.js";
import {
  OPERATOR_LABEL_PREFIX,
  ownedMetadata,
  podLabelsFor,
  selectorFor,
  serviceLabel,
  type Variant,
} from "./names.js";

/**
 * What every data plane the operator runs has, whatever kind asked for it (a
 * DynamoKserveModel, a DynamoKserveRepository): the Deployment (hardened pods, probes, the
 * data plane's arguments built from its typed contract) and the Service. Pure.
 */

export const DEPLOYMENT_KIND: OwnedKind = { apiVersion: "apps/v1", kind: "Deployment", plural: "deployments" };
export const SERVICE_KIND: OwnedKind = { apiVersion: "v1", kind: "Service", plural: "services" };
export const DISRUPTION_BUDGET_KIND: OwnedKind = {
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  plural: "poddisruptionbudgets",
};
export const AUTOSCALER_KIND: OwnedKind = {
  apiVersion: "autoscaling/v2",
  kind: "HorizontalPodAutoscaler",
  plural: "horizontalpodautoscalers",
};

/** Operator-wide settings the builders need. */
export interface BuildSettings {
  /** The data-plane image used when spec.image is unset (and the activator's image). */
  readonly dataplaneImage: string;
  /** The Prometheus KEDA's triggers query unless spec.autoscaling.keda.prometheusAddress says otherwise. */
  readonly kedaPrometheusAddress?: string;
  /** The endpoint picker's image when spec.inferencePool.endpointPicker.image is unset (default: ENDPOINT_PICKER_IMAGE). */
  readonly endpointPickerImage?: string;
}

const UNPRIVILEGED_USER = 65532;

/** Every pod the operator runs (data planes, activators): an unprivileged user, the runtime's seccomp profile. */
export const HARDENED_POD: V1PodSecurityContext = {
  runAsNonRoot: true,
  runAsUser: UNPRIVILEGED_USER,
  runAsGroup: UNPRIVILEGED_USER,
  fsGroup: UNPRIVILEGED_USER,
  seccompProfile: { type: "RuntimeDefault" },
};

/** Every container the operator runs: no privilege to gain, no capability, a read-only root. */
export const HARDENED_CONTAINER: V1SecurityContext = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" },
};

/** A Kubernetes type the CRD leaves open (validated by the API server where it is used). */
const asKubernetes = <T>(value: unknown): T => value as T;

/** The spec fields every data plane has, whether it serves one model or a repository. */
export type DataplaneSpec = Pick<
  DynamoKserveModelSpec,
  | "replicas"
  | "autoscaling"
  | "image"
  | "imagePullPolicy"
  | "resources"
  | "grpcPort"
  | "httpPort"
  | "metricsPort"
  | "maxMessageSize"
  | "logLevel"
  | "pod"
  | "shutdown"
>;

/** A volume and where the data-plane container mounts it. */
export interface MountedVolume {
  readonly volume: V1Volume;
  readonly mount: V1VolumeMount;
}

/**
 * A Secret mounted read-only as files: what the kubelet keeps current when the Secret
 * changes (environment variables would need a restart), readable by the pod's group only.
 */
export function secretVolume(name: string, secretName: string, mountPath: string): MountedVolume {
  return {
    volume: { name, secret: { secretName, defaultMode: 0o440 } },
    mount: { name, mountPath, readOnly: true },
  };
}

/** What one kind's data-plane pods add to what every data plane has. */
export interface DataplanePods {
  /** Where the models come from and what else this kind sets (tokens, model files, an upstream). */
  readonly arguments: Partial<DataPlaneArguments>;
  /** The volumes holding the models, mounted before /tmp. */
  readonly sourceVolumes: readonly MountedVolume[];
  /** The Secret holding the serving certificate, when the gRPC port speaks TLS. */
  readonly tlsSecret?: string;
  /** Further volumes (TLS, tokens, model files). */
  readonly extraVolumes: readonly MountedVolume[];
  /** A model's variant (stable or canary): its pods' labels and selector, and --variant. */
  readonly variant?: Variant;
}

/** Resource quantities as strings, the form Kubernetes returns them in (2 -> "2"). */
export function quantities(resources: NonNullable<DataplaneSpec["resources"]>): V1ResourceRequirements {
  const asStrings = (values: Record<string, string | number | undefined> | undefined) =>
    values === undefined
      ? undefined
      : Object.fromEntries(Object.entries(values).map(([key, value]) => [key, String(value)]));
  return {
    ...(resources.requests !== undefined ? { requests: asStrings(resources.requests) } : {}),
    ...(resources.limits !== undefined ? { limits: asStrings(resources.limits) } : {}),
  };
}

/** How a data-plane pod leaves: the drain delay and the grace period (spec.shutdown with its defaults). */
function shutdownOf({ shutdown }: Pick<DataplaneSpec, "shutdown">): {
  drainDelaySeconds: number;
  gracePeriodSeconds: number;
} {
  return {
    drainDelaySeconds: shutdown?.drainDelaySeconds ?? SPEC_DEFAULTS.shutdown.drainDelaySeconds,
    gracePeriodSeconds: shutdown?.gracePeriodSeconds ?? SPEC_DEFAULTS.shutdown.gracePeriodSeconds,
  };
}

/** Whether the data plane scales to zero: KEDA at minReplicas 0, with an activator standing in for its pods. */
export const scalesToZero = ({ autoscaling }: Pick<DataplaneSpec, "autoscaling">): boolean =>
  autoscaling?.class === "KEDA" && autoscaling.minReplicas === 0;

/** The label the Service selects while the activator may stand in: the data-plane pods and the activator carry it. */
export const sharedServiceLabel = (owner: Owner): Record<string, string> => ({
  [serviceLabel(owner)]: owner.metadata.name,
});

/** The Deployment with its pods carrying the shared Service label (a data plane leaving scale to zero). */
export function withSharedServiceLabel(owner: Owner, deployment: V1Deployment): V1Deployment {
  const template = deployment.spec!.template;
  return {
    ...deployment,
    spec: {
      ...deployment.spec!,
      template: {
        ...template,
        metadata: { ...template.metadata, labels: { ...template.metadata?.labels, ...sharedServiceLabel(owner) } },
      },
    },
  };
}

export function portsOf({ spec }: { spec: Pick<DataplaneSpec, "grpcPort" | "httpPort" | "metricsPort"> }): {
  grpc: number;
  http: number;
  metrics: number;
} {
  return {
    grpc: spec.grpcPort ?? SPEC_DEFAULTS.grpcPort,
    http: spec.httpPort ?? SPEC_DEFAULTS.httpPort,
    metrics: spec.metricsPort ?? SPEC_DEFAULTS.metricsPort,
  };
}

/** The in-cluster addresses of a data plane's Service: gRPC host:port, and the HTTP base URL. */
export function endpointsOf(
  owner: { spec: Pick<DataplaneSpec, "grpcPort" | "httpPort" | "metricsPort">; metadata: { namespace?: string } },
  service: string,
  tls: boolean,
): { grpc: string; http: string } {
  const ports = portsOf(owner);
  const host = `${service}.${owner.metadata.namespace}.svc`;
  return { grpc: `${host}:${ports.grpc}`, http: `${tls ? "https" : "http"}://${host}:${ports.http}` };
}

/**
 * A data plane's Service: `grpc` with appProtocol kubernetes.io/h2c (gRPC over cleartext
 * HTTP/2), `http` (the front door: KServe v2 REST, OpenAI) with http — both https when the
 * data plane serves TLS; `metrics` over http.
 */
export function dataplaneService(
  owner: Owner,
  spec: DataplaneSpec,
  name: string,
  tls: boolean,
  /** Select by the Service label (data-plane pods and the activator) instead of the pod selector. */
  withActivator = false,
  variant: Variant = "stable",
): V1Service {
  const ports = portsOf({ spec });
  return {
    apiVersion: SERVICE_KIND.apiVersion,
    kind: SERVICE_KIND.kind,
    metadata: ownedMetadata(owner, name),
    spec: {
      type: "ClusterIP",
      selector: withActivator ? sharedServiceLabel(owner) : selectorFor(owner, variant),
      ports: [
        {
          name: "grpc",
          port: ports.grpc,
          targetPort: "grpc",
          protocol: "TCP",
          appProtocol: tls ? "https" : "kubernetes.io/h2c",
        },
        { name: "http", port: ports.http, targetPort: "http", protocol: "TCP", appProtocol: tls ? "https" : "http" },
        { name: "metrics", port: ports.metrics, targetPort: "metrics", protocol: "TCP", appProtocol: "http" },
      ],
    },
  };
}

/**
 * A data plane's PodDisruptionBudget: voluntary disruptions (node drains, cluster upgrades)
 * take one pod at a time. None for a single replica, which a budget would make undrainable;
 * one when the count is left to an autoscaler (replicas unset).
 */
export function dataplaneDisruptionBudget(
  owner: Owner,
  spec: Pick<DataplaneSpec, "replicas">,
  name: string,
  variant: Variant = "stable",
): V1PodDisruptionBudget | undefined {
  if (spec.replicas !== undefined && spec.replicas <= 1) return undefined;
  return {
    apiVersion: DISRUPTION_BUDGET_KIND.apiVersion,
    kind: DISRUPTION_BUDGET_KIND.kind,
    metadata: ownedMetadata(owner, name),
    spec: { maxUnavailable: 1, selector: { matchLabels: selectorFor(owner, variant) } },
  };
}

/**
 * A data plane's HorizontalPodAutoscaler (spec.autoscaling, class HPA), named like and scaling its
 * Deployment: in-flight requests per pod (a Pods metric from the custom metrics API) and/or
 * CPU utilization (the resource metrics API). Undefined without spec.autoscaling. The HPA
 * targets the Deployment, not the owner's scale subresource: a Deployment's replica count
 * is never read as 0 (which an HPA takes for "scaling disabled"), and the operator, which
 * then leaves the Deployment's replicas unapplied, cannot fight it.
 */
export function dataplaneAutoscaler(
  owner: Owner,
  spec: Pick<DataplaneSpec, "autoscaling">,
  name: string,
): V2HorizontalPodAutoscaler | undefined {
  const autoscaling = spec.autoscaling;
  if (autoscaling === undefined || autoscaling.class === "KEDA") return undefined;
  const metrics: V2MetricSpec[] = [
    ...(autoscaling.targetInflightRequests !== undefined
      ? [
          {
            type: "Pods",
            pods: {
              metric: { name: autoscaling.inflightMetric ?? SPEC_DEFAULTS.autoscaling.inflightMetric },
              target: { type: "AverageValue", averageValue: String(autoscaling.targetInflightRequests) },
            },
          },
        ]
      : []),
    ...(autoscaling.targetCPUUtilization !== undefined
      ? [
          {
            type: "Resource",
            resource: {
              name: "cpu",
              target: { type: "Utilization", averageUtilization: autoscaling.targetCPUUtilization },
            },
          },
        ]
      : []),
  ];
  return {
    apiVersion: AUTOSCALER_KIND.apiVersion,
    kind: AUTOSCALER_KIND.kind,
    metadata: ownedMetadata(owner, name),
    spec: {
      scaleTargetRef: { apiVersion: DEPLOYMENT_KIND.apiVersion, kind: DEPLOYMENT_KIND.kind, name },
      minReplicas: autoscaling.minReplicas ?? SPEC_DEFAULTS.autoscaling.minReplicas,
      maxReplicas: autoscaling.maxReplicas,
      metrics,
      ...(autoscaling.behavior !== undefined
        ? { behavior: asKubernetes<V2HorizontalPodAutoscalerBehavior>(autoscaling.behavior) }
        : {}),
    },
  };
}

/**
 * What spec.pod places and adds to the pod (the API server validates each field as part of
 * the Deployment's pod template; the CRD keeps the Kubernetes types open).
 */
function placement(pod: DataplaneSpec["pod"]): Partial<V1PodSpec> {
  if (pod === undefined) return {};
  return {
    ...(pod.nodeSelector !== undefined ? { nodeSelector: pod.nodeSelector as Record<string, string> } : {}),
    ...(pod.tolerations !== undefined ? { tolerations: asKubernetes<V1Toleration[]>(pod.tolerations) } : {}),
    ...(pod.affinity !== undefined ? { affinity: asKubernetes<V1Affinity>(pod.affinity) } : {}),
    ...(pod.topologySpreadConstraints !== undefined
      ? { topologySpreadConstraints: asKubernetes<V1TopologySpreadConstraint[]>(pod.topologySpreadConstraints) }
      : {}),
    ...(pod.priorityClassName !== undefined ? { priorityClassName: pod.priorityClassName } : {}),
    ...(pod.serviceAccountName !== undefined ? { serviceAccountName: pod.serviceAccountName } : {}),
    ...(pod.imagePullSecrets !== undefined ? { imagePullSecrets: pod.imagePullSecrets } : {}),
  };
}

/**
 * spec.pod.labels without the operator's (dynamokserve.dev/...): those select pods, and a user's
 * copy would put a canary's pods behind the model's Service or the other way round. The CRD
 * refuses them; objects written before that rule still hold them.
 */
function usersPodLabels(labels: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(labels ?? {}).filter(([key]) => !key.startsWith(OPERATOR_LABEL_PREFIX)));
}

/**
 * A data-plane Deployment. Config changes reach pods through mounted volumes (the data
 * plane reloads them), so the pod template carries no config hash: only changes to the
 * template itself roll pods — one new pod at a time, none taken away before its
 * replacement is ready (maxUnavailable 0), each old one draining on SIGTERM.
 */
export function dataplaneDeployment(
  owner: Owner,
  spec: DataplaneSpec,
  name: string,
  pods: DataplanePods,
  settings: BuildSettings,
): V1Deployment {
  const ports = portsOf({ spec });
  const { tlsSecret, variant } = pods;
  const shutdown = shutdownOf(spec);
  const args = [
    "dataplane",
    ...dataPlaneArguments({
      ...pods.arguments,
      grpcPort: ports.grpc,
      httpPort: ports.http,
      metricsPort: ports.metrics,
      logLevel: spec.logLevel ?? SPEC_DEFAULTS.logLevel,
      drainDelaySecs: shutdown.drainDelaySeconds,
      shutdownGraceSecs: shutdown.gracePeriodSeconds,
      ...(spec.maxMessageSize !== undefined ? { maxMessageSize: spec.maxMessageSize } : {}),
      ...(variant !== undefined ? { variant } : {}),
      ...(tlsSecret !== undefined
        ? { useTls: true, certFile: `${TLS_MOUNT}/tls.crt`, keyFile: `${TLS_MOUNT}/tls.key` }
        : {}),
    }),
  ];
  // Kubernetes' gRPC probes cannot speak TLS: with TLS, the HTTP health port answers them.
  const probes =
    tlsSecret === undefined
      ? {
          livenessProbe: { grpc: { port: ports.grpc }, periodSeconds: 10, failureThreshold: 3 },
          readinessProbe: { grpc: { port: ports.grpc, service: READINESS_SERVICE }, periodSeconds: 5 },
        }
      : {
          livenessProbe: {
            httpGet: { path: "/v2/health/live", port: "metrics" },
            periodSeconds: 10,
            failureThreshold: 3,
          },
          readinessProbe: { httpGet: { path: "/v2/health/ready", port: "metrics" }, periodSeconds: 5 },
        };
  const tmp: MountedVolume = { volume: { name: "tmp", emptyDir: {} }, mount: { name: "tmp", mountPath: "/tmp" } };
  const volumes = [...pods.sourceVolumes, tmp, ...pods.extraVolumes];
  return {
    apiVersion: DEPLOYMENT_KIND.apiVersion,
    kind: DEPLOYMENT_KIND.kind,
    metadata: ownedMetadata(owner, name),
    spec: {
      // Unset replicas (always with spec.autoscaling) leave the count to whoever owns it (an
      // HPA); the field is not applied.
      ...(spec.replicas !== undefined && spec.autoscaling === undefined ? { replicas: spec.replicas } : {}),
      selector: { matchLabels: selectorFor(owner, variant) },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: {
          // The operator's labels win: they are the Service's and the Deployment's selector.
          labels: {
            ...usersPodLabels(spec.pod?.labels as Record<string, string> | undefined),
            ...podLabelsFor(owner, variant),
            // The label the Service selects once it may also reach the activator (scale to zero).
            ...(scalesToZero(spec) ? sharedServiceLabel(owner) : {}),
          },
          ...(spec.pod?.annotations !== undefined
            ? { annotations: spec.pod.annotations as Record<string, string> }
            : {}),
        },
        spec: {
          ...placement(spec.pod),
          // SIGKILL comes only after the drain and the grace period (and 5 s to close engines).
          terminationGracePeriodSeconds: shutdown.drainDelaySeconds + shutdown.gracePeriodSeconds + 5,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: HARDENED_POD,
          containers: [
            {
              name: "dataplane",
              image: spec.image ?? settings.dataplaneImage,
              ...(spec.imagePullPolicy !== undefined ? { imagePullPolicy: spec.imagePullPolicy } : {}),
              args,
              ...(spec.pod?.env !== undefined ? { env: asKubernetes<V1EnvVar[]>(spec.pod.env) } : {}),
              ...(spec.pod?.envFrom !== undefined
                ? { envFrom: asKubernetes<V1EnvFromSource[]>(spec.pod.envFrom) }
                : {}),
              ports: [
                { name: "grpc", containerPort: ports.grpc, protocol: "TCP" },
                { name: "http", containerPort: ports.http, protocol: "TCP" },
                { name: "metrics", containerPort: ports.metrics, protocol: "TCP" },
              ],
              ...probes,
              ...(spec.resources !== undefined ? { resources: quantities(spec.resources) } : {}),
              securityContext: HARDENED_CONTAINER,
              volumeMounts: volumes.map(({ mount }) => mount),
            },
          ],
          volumes: volumes.map(({ volume }) => volume),
        },
      },
    },
  };
}

import type {
  V1ConfigMap,
  V1Deployment,
  V1ResourceRequirements,
  V1Service,
  V1Volume,
  V1VolumeMount,
} from "@kubernetes/client-node";
import { SPEC_DEFAULTS, type DynamoKserveModel } from "../api/v1alpha1.js";
import { AUTH_MOUNT, TLS_MOUNT, tlsSecretName, tokenKey } from "./credentials.js";
import type { ValidConfig } from "./model-config.js";
import {
  labelsFor,
  MODEL_FILES_ROOT,
  MODEL_REPOSITORY_PATH,
  objectNames,
  ownedMetadata,
  selectorFor,
  servedModelName,
} from "./names.js";

/**
 * Pure desired-state builders: a DynamoKserveModel (plus what was observed) in, the
 * objects it should own out. No I/O; the controller applies what these return.
 */

/** Operator-wide settings the builders need. */
export interface BuildSettings {
  /** The data-plane image used when spec.image is unset. */
  readonly dataplaneImage: string;
}

/** The gRPC health service name whose status is a data-plane pod's readiness. */
const READINESS_SERVICE = "inference.GRPCInferenceService";
const UNPRIVILEGED_USER = 65532;

/** Resource quantities as strings, the form Kubernetes returns them in (2 -> "2"). */
function quantities(resources: NonNullable<DynamoKserveModel["spec"]["resources"]>): V1ResourceRequirements {
  const asStrings = (values: Record<string, string | number | undefined> | undefined) =>
    values === undefined
      ? undefined
      : Object.fromEntries(Object.entries(values).map(([key, value]) => [key, String(value)]));
  return {
    ...(resources.requests !== undefined ? { requests: asStrings(resources.requests) } : {}),
    ...(resources.limits !== undefined ? { limits: asStrings(resources.limits) } : {}),
  };
}

export function portsOf(model: DynamoKserveModel): { grpc: number; metrics: number } {
  return {
    grpc: model.spec.grpcPort ?? SPEC_DEFAULTS.grpcPort,
    metrics: model.spec.metricsPort ?? SPEC_DEFAULTS.metricsPort,
  };
}

/** The ConfigMap mounted as the data plane's model repository: one file, the model's config. */
export function desiredConfigMap(model: DynamoKserveModel, config: ValidConfig): V1ConfigMap {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: ownedMetadata(model, objectNames(model).configMap),
    ...(config.text !== undefined ? { data: { [config.fileName]: config.text } } : {}),
    ...(config.binaryBase64 !== undefined ? { binaryData: { [config.fileName]: config.binaryBase64 } } : {}),
  };
}

/**
 * The Service: `grpc` with appProtocol kubernetes.io/h2c (gRPC over cleartext HTTP/2), or
 * https when the data plane serves TLS; `metrics` over http.
 */
export function desiredService(model: DynamoKserveModel): V1Service {
  const ports = portsOf(model);
  const grpcProtocol = tlsSecretName(model) === undefined ? "kubernetes.io/h2c" : "https";
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: ownedMetadata(model, objectNames(model).service),
    spec: {
      type: "ClusterIP",
      selector: selectorFor(model),
      ports: [
        { name: "grpc", port: ports.grpc, targetPort: "grpc", protocol: "TCP", appProtocol: grpcProtocol },
        { name: "metrics", port: ports.metrics, targetPort: "metrics", protocol: "TCP", appProtocol: "http" },
      ],
    },
  };
}

/**
 * The data-plane Deployment. Config changes reach pods through the mounted ConfigMap
 * (the data plane reloads them), so the pod template carries no config hash: only
 * changes to the template itself roll pods.
 */
export function desiredDeployment(model: DynamoKserveModel, settings: BuildSettings): V1Deployment {
  const { spec } = model;
  const ports = portsOf(model);
  const tlsSecret = tlsSecretName(model);
  const args = [
    "dataplane",
    "--model-repository",
    MODEL_REPOSITORY_PATH,
    "--grpc-port",
    String(ports.grpc),
    "--metrics-port",
    String(ports.metrics),
    "--log-level",
    spec.logLevel ?? SPEC_DEFAULTS.logLevel,
    ...(spec.maxMessageSize !== undefined ? ["--max-message-size", String(spec.maxMessageSize)] : []),
    ...(tlsSecret !== undefined
      ? ["--use-tls", "--cert-file", `${TLS_MOUNT}/tls.crt`, "--key-file", `${TLS_MOUNT}/tls.key`]
      : []),
    ...(spec.auth !== undefined ? ["--auth-token-file", `${AUTH_MOUNT}/${tokenKey(model)}`] : []),
    ...(spec.modelFiles !== undefined ? ["--model-files-root", MODEL_FILES_ROOT] : []),
  ];
  const modelFiles = modelFilesVolume(model);
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
  const secretVolumes = [
    ...(tlsSecret !== undefined ? [{ name: "tls", secret: { secretName: tlsSecret, defaultMode: 0o440 } }] : []),
    ...(spec.auth !== undefined
      ? [{ name: "auth", secret: { secretName: spec.auth.tokenSecretRef.name, defaultMode: 0o440 } }]
      : []),
  ];
  const secretMounts = secretVolumes.map((volume) => ({
    name: volume.name,
    mountPath: volume.name === "tls" ? TLS_MOUNT : AUTH_MOUNT,
    readOnly: true,
  }));
  const labels = labelsFor(model);
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: ownedMetadata(model, objectNames(model).deployment),
    spec: {
      // Unset replicas leave the count to whoever owns it (an HPA); the field is not applied.
      ...(spec.replicas !== undefined ? { replicas: spec.replicas } : {}),
      selector: { matchLabels: selectorFor(model) },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: UNPRIVILEGED_USER,
            runAsGroup: UNPRIVILEGED_USER,
            fsGroup: UNPRIVILEGED_USER,
            seccompProfile: { type: "RuntimeDefault" },
          },
          containers: [
            {
              name: "dataplane",
              image: spec.image ?? settings.dataplaneImage,
              ...(spec.imagePullPolicy !== undefined ? { imagePullPolicy: spec.imagePullPolicy } : {}),
              args,
              ports: [
                { name: "grpc", containerPort: ports.grpc, protocol: "TCP" },
                { name: "metrics", containerPort: ports.metrics, protocol: "TCP" },
              ],
              ...probes,
              ...(spec.resources !== undefined ? { resources: quantities(spec.resources) } : {}),
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                capabilities: { drop: ["ALL"] },
                seccompProfile: { type: "RuntimeDefault" },
              },
              volumeMounts: [
                { name: "model-config", mountPath: MODEL_REPOSITORY_PATH, readOnly: true },
                { name: "tmp", mountPath: "/tmp" },
                ...secretMounts,
                ...(modelFiles !== undefined ? [modelFiles.mount] : []),
              ],
            },
          ],
          volumes: [
            { name: "model-config", configMap: { name: objectNames(model).configMap } },
            { name: "tmp", emptyDir: {} },
            ...secretVolumes,
            ...(modelFiles !== undefined ? [modelFiles.volume] : []),
          ],
        },
      },
    },
  };
}

/**
 * spec.modelFiles as a volume mounted at /model-files/<model name> (the data plane's
 * --model-files-root), so the model's version folders sit where it looks for them.
 */
function modelFilesVolume(model: DynamoKserveModel): { volume: V1Volume; mount: V1VolumeMount } | undefined {
  const files = model.spec.modelFiles;
  if (files === undefined) return undefined;
  const name = "model-files";
  const source: Omit<V1Volume, "name"> =
    files.persistentVolumeClaim !== undefined
      ? { persistentVolumeClaim: { claimName: files.persistentVolumeClaim.claimName, readOnly: true } }
      : files.image !== undefined
        ? {
            image: {
              reference: files.image.reference,
              ...(files.image.pullPolicy !== undefined ? { pullPolicy: files.image.pullPolicy } : {}),
            },
          }
        : {
            configMap: {
              name: files.configMap!.name,
              items: files.configMap!.items.map(({ key, path }) => ({ key, path })),
            },
          };
  return {
    volume: { name, ...source },
    mount: {
      name,
      mountPath: `${MODEL_FILES_ROOT}/${servedModelName(model)}`,
      readOnly: true,
      ...(files.subPath !== undefined ? { subPath: files.subPath } : {}),
    },
  };
}

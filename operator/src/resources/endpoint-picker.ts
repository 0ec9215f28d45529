import type { KubernetesObject, V1ConfigMap, V1Deployment, V1PolicyRule, V1Service } from "@kubernetes/client-node";
import { createHash } from "node:crypto";
import { stringify } from "yaml";
import { MODEL_LOAD_SIGNALS, POD_LOAD_SIGNALS } from "../../../lib/contract/load-signals.js";
import { OPERATOR_NAME, type Owner } from "../api/objects.js";
import { REPOSITORY_KIND, SPEC_DEFAULTS } from "../api/v1alpha1.js";
import type { OwnedKind } from "../kube/owned.js";
import {
  identityRole,
  identityRoleBinding,
  identityServiceAccount,
  ROLE_BINDING_KIND,
  ROLE_KIND,
  SERVICE_ACCOUNT_KIND,
} from "./pod-identity.js";
import {
  DEPLOYMENT_KIND,
  HARDENED_CONTAINER,
  HARDENED_POD,
  portsOf,
  quantities,
  SERVICE_KIND,
  type BuildSettings,
} from "./dataplane-pods.js";
import { INFERENCE_POOL_GROUP, type EndpointPickerRef, type PoolOwner } from "./inference-pool.js";
import { CONFIG_MAP_KIND } from "./model.js";
import { MANAGED_BY_LABEL, ownedMetadata, servedModelName, suffixedName } from "./names.js";

/**
 * The endpoint picker the operator runs for a pool (spec.inferencePool.endpointPicker): the
 * Gateway API Inference Extension's epp, as its own chart (config/charts/epplib, v1.4) deploys
 * it — one pod replaced by Recreate (one active picker: its scorers keep state), ext_proc on
 * 9002, gRPC health on 9003, metrics on 9090 — with what it reads narrowed to a Role of the
 * pool's namespace, and its EndpointPickerConfig generated from the data plane's load signals
 * instead of hand-edited per model. Pure builders.
 */

/** The image a managed picker runs unless the CR or the operator's --endpoint-picker-image says otherwise. */
export const ENDPOINT_PICKER_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.4.0";

/** The picker's ports, as GAIE's chart has them. */
export const ENDPOINT_PICKER_PORTS = { extProc: 9002, health: 9003, metrics: 9090 } as const;

/** The gRPC health service the picker answers for (GAIE's chart probes it). */
const HEALTH_SERVICE = "inference-extension";

/** The kinds of a managed picker's objects (the pool's group of a plan). */
export const ENDPOINT_PICKER_OWNS: readonly OwnedKind[] = [
  SERVICE_ACCOUNT_KIND,
  ROLE_KIND,
  ROLE_BINDING_KIND,
  CONFIG_MAP_KIND,
  SERVICE_KIND,
  DEPLOYMENT_KIND,
];

/** Labels the picker's pods with the pool they pick for: its Deployment's and Service's selector. */
export const ENDPOINT_PICKER_LABEL = "dynamokserve.dev/endpoint-picker";

const CONFIG_FILE = "endpoint-picker.yaml";
/** On the picker's pods: a hash of its config, so a new config rolls them. */
const CONFIG_HASH_ANNOTATION = "dynamokserve.dev/config-hash";
const CONFIG_MOUNT = "/config";

/** Name of every object of the picker of pool `pool` (the pool is named like its owner). */
export const endpointPickerName = (pool: string): string => suffixedName(pool, "epp");

/** The pool's spec.inferencePool.endpointPicker, when the operator runs its picker. */
export const managedPicker = (owner: PoolOwner) => owner.spec.inferencePool?.endpointPicker;

/** The labels of the picker's pods: never the owner's pod selector, which the pool and the data plane's objects select by. */
function pickerPodLabels(owner: Owner): Record<string, string> {
  return {
    "app.kubernetes.io/name": "dynamo-kserve-endpoint-picker",
    "app.kubernetes.io/instance": owner.metadata.name,
    [MANAGED_BY_LABEL]: OPERATOR_NAME,
    [ENDPOINT_PICKER_LABEL]: owner.metadata.name,
  };
}

/**
 * The series the picker scores pods on: a model's own (the `model` label narrows them to one
 * series per pod, all the picker takes); a repository's pods serve many models, so their
 * totals.
 */
export function loadSignalQueries(owner: PoolOwner): {
  waiting: string;
  running: string;
  kvCacheUsage: string;
} {
  if (owner.kind === REPOSITORY_KIND) return { ...POD_LOAD_SIGNALS };
  const selector = `{model="${servedModelName(owner)}"}`;
  return {
    waiting: `${MODEL_LOAD_SIGNALS.waiting}${selector}`,
    running: `${MODEL_LOAD_SIGNALS.running}${selector}`,
    kvCacheUsage: `${MODEL_LOAD_SIGNALS.kvCacheUsage}${selector}`,
  };
}

/**
 * The picker's EndpointPickerConfig (GAIE v1.4, the dataLayer feature): its data layer
 * scrapes each pod's metrics port and maps the model-server protocol (TotalQueuedRequests,
 * TotalRunningRequests, KVCacheUtilization) to the load-signal series; the queue and KV-cache
 * scorers rank the pods on them. The gateways guide shows this text for a model.
 */
export function endpointPickerConfig(queries: ReturnType<typeof loadSignalQueries>): string {
  const config = {
    apiVersion: "inference.networking.x-k8s.io/v1alpha1",
    kind: "EndpointPickerConfig",
    featureGates: ["dataLayer"],
    plugins: [
      { name: "metrics", type: "metrics-data-source" },
      {
        name: "load-signals",
        type: "model-server-protocol-metrics",
        parameters: {
          defaultEngine: "dynamo-kserve",
          engineConfigs: [
            {
              name: "dynamo-kserve",
              queuedRequestsSpec: queries.waiting,
              runningRequestsSpec: queries.running,
              kvUsageSpec: queries.kvCacheUsage,
            },
          ],
        },
      },
      { name: "queue-scorer", type: "queue-scorer" },
      { name: "kv-cache-utilization-scorer", type: "kv-cache-utilization-scorer" },
    ],
    data: { sources: [{ pluginRef: "metrics", extractors: [{ pluginRef: "load-signals" }] }] },
  };
  return stringify(config, { lineWidth: 0 });
}

/** A fresh list each time (a shared one would print as a YAML anchor in golden files). */
const read = (): string[] => ["get", "list", "watch"];

/**
 * What the picker's Role lets it read, in its pool's namespace only: pods (the pool's endpoints), its
 * InferencePool, and the InferenceObjectives and InferenceModelRewrites it applies (GAIE's
 * chart grants the same). No TokenReview: the picker serves its metrics without
 * authentication (--metrics-endpoint-auth=false), on a port only the cluster reaches.
 */
const PICKER_RULES = (): V1PolicyRule[] => [
  { apiGroups: [""], resources: ["pods"], verbs: read() },
  { apiGroups: [INFERENCE_POOL_GROUP], resources: ["inferencepools"], verbs: read() },
  {
    apiGroups: ["inference.networking.x-k8s.io"],
    resources: ["inferenceobjectives", "inferencemodelrewrites"],
    verbs: read(),
  },
];

/** The ConfigMap holding `config`, the picker's EndpointPickerConfig. */
function endpointPickerConfigMap(owner: PoolOwner, config: string): V1ConfigMap {
  return {
    apiVersion: CONFIG_MAP_KIND.apiVersion,
    kind: CONFIG_MAP_KIND.kind,
    metadata: ownedMetadata(owner, endpointPickerName(owner.metadata.name)),
    data: { [CONFIG_FILE]: config },
  };
}

/** The picker's Service: what the pool's endpointPickerRef names (ext_proc, over the picker's TLS), and its metrics. */
function endpointPickerService(owner: PoolOwner): V1Service {
  return {
    apiVersion: SERVICE_KIND.apiVersion,
    kind: SERVICE_KIND.kind,
    metadata: ownedMetadata(owner, endpointPickerName(owner.metadata.name)),
    spec: {
      type: "ClusterIP",
      selector: pickerPodLabels(owner),
      ports: [
        // No appProtocol: the picker serves ext_proc over TLS with a certificate of its own
        // (GAIE's --secure-serving), which a gateway takes unchecked; kubernetes.io/h2c would
        // tell it to speak cleartext (GAIE's chart leaves it unset too).
        { name: "grpc-ext-proc", port: ENDPOINT_PICKER_PORTS.extProc, targetPort: "grpc", protocol: "TCP" },
        {
          name: "http-metrics",
          port: ENDPOINT_PICKER_PORTS.metrics,
          targetPort: "metrics",
          protocol: "TCP",
          appProtocol: "http",
        },
      ],
    },
  };
}

/** The picker's Deployment (`config`, in the ConfigMap above, mounted read-only). */
function endpointPickerDeployment(owner: PoolOwner, settings: BuildSettings, config: string): V1Deployment {
  const picker = managedPicker(owner)!;
  const name = endpointPickerName(owner.metadata.name);
  // The picker reads its config once, at start: a changed config (the model renamed) rolls it.
  const configHash = createHash("sha256").update(config).digest("hex");
  const grpcProbe = () => ({ grpc: { port: ENDPOINT_PICKER_PORTS.health, service: HEALTH_SERVICE } });
  return {
    apiVersion: DEPLOYMENT_KIND.apiVersion,
    kind: DEPLOYMENT_KIND.kind,
    metadata: ownedMetadata(owner, name),
    spec: {
      replicas: 1,
      // One active picker, as GAIE's chart: the old one goes before the new one starts.
      strategy: { type: "Recreate" },
      selector: { matchLabels: pickerPodLabels(owner) },
      template: {
        metadata: {
          labels: pickerPodLabels(owner),
          annotations: { [CONFIG_HASH_ANNOTATION]: configHash.slice(0, 16) },
        },
        spec: {
          serviceAccountName: name,
          // It watches pods and its pool through the API server.
          automountServiceAccountToken: true,
          enableServiceLinks: false,
          securityContext: HARDENED_POD,
          containers: [
            {
              name: "epp",
              image: picker.image ?? settings.endpointPickerImage ?? ENDPOINT_PICKER_IMAGE,
              args: [
                `--pool-name=${owner.metadata.name}`,
                `--pool-namespace=${owner.metadata.namespace}`,
                `--config-file=${CONFIG_MOUNT}/${CONFIG_FILE}`,
                // The pool's target port is the gRPC or HTTP one; the signals are on the metrics port.
                `--model-server-metrics-port=${portsOf(owner).metrics}`,
                `--grpc-port=${ENDPOINT_PICKER_PORTS.extProc}`,
                `--grpc-health-port=${ENDPOINT_PICKER_PORTS.health}`,
                `--metrics-port=${ENDPOINT_PICKER_PORTS.metrics}`,
                "--zap-encoder=json",
                "--tracing=false",
                "--metrics-endpoint-auth=false",
                // Its profiles would be served beside the metrics, to anyone in the cluster.
                "--enable-pprof=false",
              ],
              env: [
                { name: "NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              ],
              ports: [
                { name: "grpc", containerPort: ENDPOINT_PICKER_PORTS.extProc, protocol: "TCP" },
                { name: "grpc-health", containerPort: ENDPOINT_PICKER_PORTS.health, protocol: "TCP" },
                { name: "metrics", containerPort: ENDPOINT_PICKER_PORTS.metrics, protocol: "TCP" },
              ],
              readinessProbe: { ...grpcProbe(), periodSeconds: 2 },
              livenessProbe: { ...grpcProbe(), initialDelaySeconds: 5, periodSeconds: 10 },
              resources:
                picker.resources !== undefined
                  ? quantities(picker.resources)
                  : { requests: { cpu: "100m", memory: "128Mi" } },
              securityContext: HARDENED_CONTAINER,
              volumeMounts: [{ name: "config", mountPath: CONFIG_MOUNT, readOnly: true }],
            },
          ],
          volumes: [{ name: "config", configMap: { name } }],
        },
      },
    },
  };
}

/** The picker's objects, its identity, rights and config before the pod that uses them. */
export function endpointPickerObjects(owner: PoolOwner, settings: BuildSettings): KubernetesObject[] {
  const name = endpointPickerName(owner.metadata.name);
  const config = endpointPickerConfig(loadSignalQueries(owner));
  return [
    identityServiceAccount(owner, name),
    identityRole(owner, name, PICKER_RULES()),
    identityRoleBinding(owner, name),
    endpointPickerConfigMap(owner, config),
    endpointPickerService(owner),
    endpointPickerDeployment(owner, settings, config),
  ];
}

/** The pool's endpointPickerRef to the managed picker's Service. */
export function managedPickerRef(owner: PoolOwner): EndpointPickerRef {
  return {
    group: "",
    kind: "Service",
    name: endpointPickerName(owner.metadata.name),
    port: { number: ENDPOINT_PICKER_PORTS.extProc },
    failureMode: managedPicker(owner)?.failureMode ?? SPEC_DEFAULTS.inferencePool.endpointPickerRef.failureMode,
  };
}

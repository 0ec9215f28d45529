import type { KubernetesObject, V1ConfigMap, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import {
  API_VERSION,
  KIND,
  PLURAL,
  REPOSITORY_KIND,
  REPOSITORY_PLURAL,
  type DynamoKserveModel,
  type DynamoKserveRepository,
} from "./api/v1alpha1.js";
import { DynamoKserveModelController, MODEL_OWNS, type CertificateSettings } from "./controllers/dynamokservemodel.js";
import {
  DynamoKserveRepositoryController,
  podIpAddress,
  REPOSITORY_OWNS,
} from "./controllers/dynamokserverepository.js";
import { InferencePoolController, POOL_OWNS } from "./controllers/inferencepool.js";
import { Manager, type ManagerOptions } from "./kube/manager.js";
import type { OperatorMetrics } from "./kube/metrics.js";
import { SecretReader } from "./kube/secrets.js";
import { GrpcRepositoryIndex } from "./probes/repository-index.js";
import { ModelFilesChecker } from "./probes/model-files.js";
import { INFERENCE_POOL_KIND, type InferencePool } from "./resources/inference-pool.js";
import { REPOSITORY_LABEL } from "./resources/names.js";
import { GATEWAY_KIND } from "./resources/routes.js";
import type { OwnedKind } from "./kube/owned.js";

export interface OperatorOptions extends Omit<ManagerOptions, "logger"> {
  readonly dataplaneImage: string;
  /** The image of the endpoint pickers the operator runs (spec.inferencePool.endpointPicker) when theirs is unset. */
  readonly endpointPickerImage?: string;
  /** The Prometheus KEDA's triggers query by default (spec.autoscaling.keda.prometheusAddress wins). */
  readonly kedaPrometheusAddress?: string;
  /** Validity and renewal of tls.mode SelfSigned serving certificates. */
  readonly certificates: CertificateSettings;
  /** How often a DynamoKserveRepository's data plane is asked for its models' states. */
  readonly repositoryStatusSeconds: number;
  /** How long the operator's listing of a model location in object storage stands (ModelFilesReady). */
  readonly storageCheckSeconds: number;
  readonly logger: Logger;
}

export interface RunningOperator {
  readonly httpPort: number;
  readonly metrics: OperatorMetrics;
  stop(): Promise<void>;
}

/** What each controller owns: the kinds the chart's RBAC must grant (a unit test holds it to them). */
export const OWNED_KINDS: ReadonlyMap<string, readonly OwnedKind[]> = new Map([
  ["dynamokservemodel", MODEL_OWNS],
  ["dynamokserverepository", REPOSITORY_OWNS],
  ["inferencepool", POOL_OWNS],
]);

/**
 * The operator: what it watches besides what its controllers own, and its three controllers (DynamoKserveModel,
 * DynamoKserveRepository, InferencePool), run by the manager (kube/manager.ts).
 */
export async function startOperator(options: OperatorOptions): Promise<RunningOperator> {
  const { logger } = options;
  const manager = new Manager(options);
  const caches = {
    models: manager.watch<DynamoKserveModel & KubernetesObject>({
      apiVersion: API_VERSION,
      kind: KIND,
      plural: PLURAL,
    }),
    repositories: manager.watch<DynamoKserveRepository & KubernetesObject>({
      apiVersion: API_VERSION,
      kind: REPOSITORY_KIND,
      plural: REPOSITORY_PLURAL,
    }),
    // All ConfigMaps: models and repositories may name any ConfigMap of their namespace (the
    // models' own ConfigMaps are read from this cache too, not watched twice).
    configMaps: manager.watch<V1ConfigMap & KubernetesObject>({
      apiVersion: "v1",
      kind: "ConfigMap",
      plural: "configmaps",
    }),
    // Only repositories' pods: the one a repository's models are asked of must be ready.
    pods: manager.watch<V1Pod & KubernetesObject>({ apiVersion: "v1", kind: "Pod", plural: "pods" }, REPOSITORY_LABEL),
    // Every InferencePool, ours or a user's, while its CRD is there: each gets a Service.
    pools: manager.optional<InferencePool>(INFERENCE_POOL_KIND),
  };
  // Gateways are read, never written: a model's routes say when theirs does not exist.
  const gateways = manager.optional<KubernetesObject>(GATEWAY_KIND);
  const gatewayExists = (namespace: string, name: string): boolean | undefined => {
    const watched = gateways.objects();
    if (watched === undefined) return undefined;
    if (options.namespaces.length > 0 && !options.namespaces.includes(namespace)) return undefined;
    return watched.get(namespace, name) !== undefined;
  };
  const settings = {
    dataplaneImage: options.dataplaneImage,
    ...(options.endpointPickerImage !== undefined ? { endpointPickerImage: options.endpointPickerImage } : {}),
    ...(options.kedaPrometheusAddress !== undefined ? { kedaPrometheusAddress: options.kedaPrometheusAddress } : {}),
  };
  const secrets = new SecretReader(manager.config);
  const modelFilesChecker = new ModelFilesChecker(options.storageCheckSeconds * 1000);
  manager.register(
    new DynamoKserveModelController(
      { ...caches, gatewayExists },
      manager.owned,
      secrets,
      manager.writer,
      settings,
      options.certificates,
      modelFilesChecker,
      logger.child({ controller: "dynamokservemodel" }),
    ),
  );
  manager.register(
    new DynamoKserveRepositoryController(
      caches,
      manager.owned,
      settings,
      {
        reader: new GrpcRepositoryIndex(),
        addressOf: podIpAddress,
        intervalMs: options.repositoryStatusSeconds * 1000,
      },
      { secrets, checker: modelFilesChecker },
      logger.child({ controller: "dynamokserverepository" }),
    ),
  );
  manager.register(new InferencePoolController(caches.pools));

  const { httpPort } = await manager.start();
  logger.info(
    {
      httpPort,
      namespaces: options.namespaces.length > 0 ? options.namespaces : "all",
      workers: options.workers,
      leaderElection: options.leaderElection === undefined ? "off" : options.leaderElection.identity,
    },
    "operator ready",
  );
  return {
    httpPort,
    metrics: manager.metrics,
    async stop() {
      await manager.stop();
      logger.info("operator stopped");
    },
  };
}

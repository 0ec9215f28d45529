import type {
  KubernetesObject,
  V1ConfigMap,
  V1Deployment,
  V1Pod,
  V1PodDisruptionBudget,
  V1Service,
  V2HorizontalPodAutoscaler,
} from "@kubernetes/client-node";
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
import { OPERATOR_NAME } from "./api/objects.js";
import { DynamoKserveModelController, type CertificateSettings } from "./controllers/dynamokservemodel.js";
import { DynamoKserveRepositoryController, podIpAddress } from "./controllers/dynamokserverepository.js";
import { InferencePoolController } from "./controllers/inferencepool.js";
import { Manager, type ManagerOptions } from "./kube/manager.js";
import type { OperatorMetrics } from "./kube/metrics.js";
import { SecretReader } from "./kube/secrets.js";
import { GrpcRepositoryIndex } from "./probes/repository-index.js";
import { ModelFilesChecker } from "./probes/model-files.js";
import { CERTIFICATE_KIND, type Certificate } from "./resources/certificate-request.js";
import { INFERENCE_POOL_KIND, type InferencePool } from "./resources/inference-pool.js";
import { MANAGED_BY_LABEL, REPOSITORY_LABEL } from "./resources/names.js";
import { SERVICE_MONITOR_KIND, type ServiceMonitor } from "./resources/service-monitor.js";

export interface OperatorOptions extends Omit<ManagerOptions, "logger"> {
  readonly dataplaneImage: string;
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

/**
 * The operator: what it watches, and its three controllers (DynamoKserveModel,
 * DynamoKserveRepository, InferencePool), run by the manager (kube/manager.ts).
 */
export async function startOperator(options: OperatorOptions): Promise<RunningOperator> {
  const { logger } = options;
  const manager = new Manager(options);
  const owned = `${MANAGED_BY_LABEL}=${OPERATOR_NAME}`;
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
    deployments: manager.watch<V1Deployment & KubernetesObject>(
      { apiVersion: "apps/v1", kind: "Deployment", plural: "deployments" },
      owned,
    ),
    services: manager.watch<V1Service & KubernetesObject>(
      { apiVersion: "v1", kind: "Service", plural: "services" },
      owned,
    ),
    budgets: manager.watch<V1PodDisruptionBudget & KubernetesObject>(
      { apiVersion: "policy/v1", kind: "PodDisruptionBudget", plural: "poddisruptionbudgets" },
      owned,
    ),
    autoscalers: manager.watch<V2HorizontalPodAutoscaler & KubernetesObject>(
      { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler", plural: "horizontalpodautoscalers" },
      owned,
    ),
    // All ConfigMaps: models and repositories may name any ConfigMap of their namespace.
    configMaps: manager.watch<V1ConfigMap & KubernetesObject>({
      apiVersion: "v1",
      kind: "ConfigMap",
      plural: "configmaps",
    }),
    // Only repositories' pods: the one a repository's models are asked of must be ready.
    pods: manager.watch<V1Pod & KubernetesObject>({ apiVersion: "v1", kind: "Pod", plural: "pods" }, REPOSITORY_LABEL),
    // Kinds whose CRDs others install, watched while they are there.
    pools: manager.optional<InferencePool>(INFERENCE_POOL_KIND),
    monitors: manager.optional<ServiceMonitor>(SERVICE_MONITOR_KIND, owned),
    certificates: manager.optional<Certificate>(CERTIFICATE_KIND, owned),
  };
  const settings = { dataplaneImage: options.dataplaneImage };
  const secrets = new SecretReader(manager.config);
  const modelFilesChecker = new ModelFilesChecker(options.storageCheckSeconds * 1000);
  manager.register(
    new DynamoKserveModelController(
      caches,
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
      manager.writer,
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
  manager.register(new InferencePoolController(caches.pools, caches.services, manager.writer));

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

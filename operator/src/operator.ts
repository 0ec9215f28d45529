import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  type KubernetesObject,
  type V1ConfigMap,
  type V1Deployment,
  type V1CustomResourceDefinition,
  type V1Pod,
  type V1Secret,
  type V1Service,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../lib/errors.js";
import {
  API_VERSION,
  KIND,
  PLURAL,
  REPOSITORY_KIND,
  REPOSITORY_PLURAL,
  type DynamoKserveModel,
  type DynamoKserveRepository,
} from "./api/v1alpha1.js";
import {
  DynamoKserveModelController,
  type CertificateSettings,
  type ModelCaches,
} from "./controllers/dynamokservemodel.js";
import { DynamoKserveRepositoryController, podIpAddress } from "./controllers/dynamokserverepository.js";
import { keyOf } from "./controllers/shared.js";
import { GrpcRepositoryIndex } from "./probes/repository-index.js";
import { InferencePoolController } from "./controllers/inferencepool.js";
import { OptionalKind } from "./kube/optional-kind.js";
import { INFERENCE_POOL_KIND, type InferencePool } from "./resources/inference-pool.js";
import { SERVICE_MONITOR_KIND, type ServiceMonitor } from "./resources/service-monitor.js";
import { CERTIFICATE_KIND, type Certificate } from "./resources/certificate-request.js";
import { WatchedObjects, type WatchedKind } from "./kube/informer.js";
import { OperatorMetrics } from "./kube/metrics.js";
import { WorkQueue } from "./kube/queue.js";
import { LeaderElector, type LeaderElectionOptions } from "./kube/leader.js";
import { KubeWriter } from "./kube/writer.js";
import { MANAGED_BY_LABEL, OPERATOR_NAME, REPOSITORY_LABEL } from "./resources/names.js";

export interface OperatorOptions {
  /** Path of a kubeconfig; undefined loads the default (in-cluster, $KUBECONFIG, ~/.kube/config). */
  readonly kubeconfig: string | undefined;
  /** Namespaces to manage; empty means all. */
  readonly namespaces: readonly string[];
  readonly dataplaneImage: string;
  readonly workers: number;
  readonly httpHost: string;
  readonly httpPort: number;
  /** Every model is reconciled again this often, as a safety net behind the watches. */
  readonly resyncSeconds: number;
  /** With several replicas: only the Lease holder reconciles; undefined runs without election. */
  readonly leaderElection: Omit<LeaderElectionOptions, "logger"> | undefined;
  /** Validity and renewal of tls.mode SelfSigned serving certificates. */
  readonly certificates: CertificateSettings;
  /** How often a DynamoKserveRepository's data plane is asked for its models' states. */
  readonly repositoryStatusSeconds: number;
  /** Called if leadership is lost (the CLI exits, so the pod restarts as a candidate). */
  readonly onLostLeadership?: () => void;
  readonly logger: Logger;
}

export interface RunningOperator {
  readonly httpPort: number;
  readonly metrics: OperatorMetrics;
  stop(): Promise<void>;
}

const MODEL_CONTROLLER = "dynamokservemodel";
const POOL_CONTROLLER = "inferencepool";
const REPOSITORY_CONTROLLER = "dynamokserverepository";

/** Starts the watches, the work queue and the HTTP endpoint (/healthz, /readyz, /metrics). */
export async function startOperator(options: OperatorOptions): Promise<RunningOperator> {
  const { logger } = options;
  const config = new KubeConfig();
  if (options.kubeconfig !== undefined) config.loadFromFile(options.kubeconfig);
  else config.loadFromDefault();
  const objectsApi = KubernetesObjectApi.makeApiClient(config);
  const metrics = new OperatorMetrics();
  const writer = new KubeWriter(config, metrics, logger);

  /** A work queue whose reconciles are timed and counted; a reconcile may return a Requeue. */
  const queueFor = (name: string, reconcile: (key: string) => Promise<unknown>): WorkQueue =>
    new WorkQueue((key) => measured(name, () => reconcile(key)), {
      name,
      workers: options.workers,
      baseDelayMs: 200,
      maxDelayMs: 60_000,
      logger,
      metrics: metrics.queue(name),
    });
  const modelQueue = queueFor(MODEL_CONTROLLER, (key) => modelController.reconcile(key));
  const poolQueue = queueFor(POOL_CONTROLLER, (key) => poolController.reconcile(key));
  const repositoryQueue = queueFor(REPOSITORY_CONTROLLER, (key) => repositoryController.reconcile(key));
  const queues = [modelQueue, poolQueue, repositoryQueue];
  // Events arrive only after start(), when the controllers below exist.
  const route = (kind: string, object: KubernetesObject): void => {
    modelController.keysFor(kind, object).forEach((key) => modelQueue.add(key));
    poolController.keysFor(kind, object).forEach((key) => poolQueue.add(key));
    repositoryController.keysFor(kind, object).forEach((key) => repositoryQueue.add(key));
  };
  const watch = <T extends KubernetesObject>(kind: WatchedKind, labelSelector?: string): WatchedObjects<T> =>
    new WatchedObjects<T>(config, objectsApi, kind, {
      namespaces: options.namespaces,
      ...(labelSelector !== undefined ? { labelSelector } : {}),
      logger,
      onEvent: (_event, object) => route(kind.kind, object),
    });
  const owned = `${MANAGED_BY_LABEL}=${OPERATOR_NAME}`;
  // CRDs are cluster-scoped: watched to notice InferencePool's (and others') coming and going.
  const crds = new WatchedObjects<V1CustomResourceDefinition & KubernetesObject>(
    config,
    objectsApi,
    { apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", plural: "customresourcedefinitions" },
    {
      namespaces: [],
      logger,
      onEvent: (_event, crd) =>
        optionalKinds.filter((kind) => kind.crdName === crd.metadata?.name).forEach((kind) => kind.crdChanged()),
    },
  );
  const watchedCaches = {
    models: watch<DynamoKserveModel & KubernetesObject>({ apiVersion: API_VERSION, kind: KIND, plural: PLURAL }),
    deployments: watch<V1Deployment & KubernetesObject>(
      { apiVersion: "apps/v1", kind: "Deployment", plural: "deployments" },
      owned,
    ),
    services: watch<V1Service & KubernetesObject>({ apiVersion: "v1", kind: "Service", plural: "services" }, owned),
    // All ConfigMaps: models may name any ConfigMap of their namespace in configMapRef.
    configMaps: watch<V1ConfigMap & KubernetesObject>({ apiVersion: "v1", kind: "ConfigMap", plural: "configmaps" }),
    repositories: watch<DynamoKserveRepository & KubernetesObject>({
      apiVersion: API_VERSION,
      kind: REPOSITORY_KIND,
      plural: REPOSITORY_PLURAL,
    }),
    // Only repositories' pods: the one a repository's models are asked of must be ready.
    pods: watch<V1Pod & KubernetesObject>({ apiVersion: "v1", kind: "Pod", plural: "pods" }, REPOSITORY_LABEL),
  };
  const pools = new OptionalKind<InferencePool>(
    INFERENCE_POOL_KIND,
    crds,
    () => watch<InferencePool>(INFERENCE_POOL_KIND),
    (installed) => crdChanged(INFERENCE_POOL_KIND.kind, installed),
    logger,
  );
  const monitors = new OptionalKind<ServiceMonitor>(
    SERVICE_MONITOR_KIND,
    crds,
    () => watch<ServiceMonitor>(SERVICE_MONITOR_KIND, owned),
    (installed) => crdChanged(SERVICE_MONITOR_KIND.kind, installed),
    logger,
  );
  const core = config.makeApiClient(CoreV1Api);
  const secrets = {
    async get(namespace: string, name: string): Promise<V1Secret | undefined> {
      try {
        return await core.readNamespacedSecret({ namespace, name });
      } catch (error) {
        if ((error as { code?: number }).code === 404) return undefined;
        throw error;
      }
    },
  };
  const certificates = new OptionalKind<Certificate>(
    CERTIFICATE_KIND,
    crds,
    () => watch<Certificate>(CERTIFICATE_KIND, owned),
    (installed) => crdChanged(CERTIFICATE_KIND.kind, installed),
    logger,
  );
  const caches: ModelCaches = { ...watchedCaches, pools, monitors, certificates, secrets };
  const optionalKinds: OptionalKind<KubernetesObject>[] = [pools, monitors, certificates];
  const modelController = new DynamoKserveModelController(
    caches,
    writer,
    { dataplaneImage: options.dataplaneImage },
    options.certificates,
    logger.child({ controller: MODEL_CONTROLLER }),
  );
  const poolController = new InferencePoolController(pools, watchedCaches.services, writer);
  const repositoryController = new DynamoKserveRepositoryController(
    { ...watchedCaches, monitors },
    writer,
    { dataplaneImage: options.dataplaneImage },
    {
      reader: new GrpcRepositoryIndex(),
      addressOf: podIpAddress,
      intervalMs: options.repositoryStatusSeconds * 1000,
    },
    logger.child({ controller: REPOSITORY_CONTROLLER }),
  );

  /**
   * A CRD came, changed or went: its objects went with a removed CRD, so what we applied
   * of them is forgotten (they are applied again), and everything is looked at again.
   */
  function crdChanged(kind: string, installed: boolean): void {
    if (!installed) writer.forgetKind(kind);
    enqueueEverything();
  }

  /** Every model, pool and repository: at start, on resync, and when a CRD comes or goes. */
  function enqueueEverything(): void {
    for (const model of watchedCaches.models.list())
      modelQueue.add(keyOf(model.metadata.namespace, model.metadata.name));
    for (const key of poolController.allKeys()) poolQueue.add(key);
    for (const key of repositoryController.allKeys()) repositoryQueue.add(key);
  }

  async function measured(controller: string, reconcile: () => Promise<unknown>): Promise<unknown> {
    const stopTimer = metrics.reconcileTime.startTimer({ controller });
    try {
      const requeue = await reconcile();
      metrics.reconcileTotal.inc({ controller, result: "success" });
      return requeue;
    } catch (error) {
      metrics.reconcileTotal.inc({ controller, result: "error" });
      metrics.reconcileErrors.inc({ controller });
      throw error;
    } finally {
      stopTimer();
    }
  }

  let ready = false;
  const http = await startHttp(options, metrics, () => ready);
  // Fill every cache before the first reconcile, so a restart starts from what exists
  // (and writes nothing) rather than from half-listed caches. A candidate that is not the
  // leader keeps its caches warm too, so it can take over at once.
  const allCaches: WatchedObjects<KubernetesObject>[] = [...Object.values(watchedCaches), crds];
  await Promise.all(allCaches.map((cache) => cache.start()));
  optionalKinds.forEach((kind) => kind.crdChanged());
  await Promise.all(optionalKinds.map((kind) => kind.settled()));
  let resync: NodeJS.Timeout | undefined;
  const lead = (): void => {
    queues.forEach((queue) => queue.start());
    enqueueEverything();
    resync = setInterval(enqueueEverything, options.resyncSeconds * 1000);
    resync.unref();
  };
  const elector =
    options.leaderElection === undefined ? undefined : new LeaderElector(config, { ...options.leaderElection, logger });
  const leaderGauge = metrics.leaderStatus(options.leaderElection?.name ?? OPERATOR_NAME);
  if (elector === undefined) {
    leaderGauge.set(1);
    lead();
  } else {
    leaderGauge.set(0);
    void elector.acquire().then(
      () => {
        leaderGauge.set(1);
        lead();
        elector.keepLeading(() => {
          leaderGauge.set(0);
          clearInterval(resync);
          void Promise.all(queues.map((queue) => queue.stop())).then(() => options.onLostLeadership?.());
        });
      },
      (error: unknown) => {
        if (!ready) return; // stopped while waiting
        logger.error({ err: errorMessage(error) }, "leader election failed");
        options.onLostLeadership?.();
      },
    );
  }
  ready = true;
  logger.info(
    {
      httpPort: http.port,
      namespaces: options.namespaces.length > 0 ? options.namespaces : "all",
      workers: options.workers,
      leaderElection: options.leaderElection === undefined ? "off" : options.leaderElection.identity,
    },
    "operator ready",
  );
  return {
    httpPort: http.port,
    metrics,
    async stop() {
      ready = false;
      clearInterval(resync);
      await Promise.all(queues.map((queue) => queue.stop()));
      await elector?.release();
      await Promise.all([...allCaches.map((cache) => cache.stop()), ...optionalKinds.map((kind) => kind.stop())]);
      await new Promise<void>((resolve) => http.server.close(() => resolve()));
      logger.info("operator stopped");
    },
  };
}

async function startHttp(
  options: OperatorOptions,
  metrics: OperatorMetrics,
  isReady: () => boolean,
): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (path === "/healthz") {
      response.writeHead(200).end("ok\n");
    } else if (path === "/readyz") {
      response.writeHead(isReady() ? 200 : 503).end(isReady() ? "ok\n" : "caches not synced\n");
    } else if (path === "/metrics") {
      metrics.registry.metrics().then(
        (text) => response.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
        () => response.writeHead(500).end(),
      );
    } else {
      response.writeHead(404).end(`not found: ${path}\n`);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.httpPort, options.httpHost, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}

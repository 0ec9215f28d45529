// Generated from crds/dynamokserve.dev_dynamokserverepositories.yaml by scripts/gen-api-types.mjs. DO NOT EDIT: change the CRD and run `npm run api:gen`.

export const GROUP = "dynamokserve.dev";
export const VERSION = "v1alpha1";
export const KIND = "DynamoKserveRepository";
export const PLURAL = "dynamokserverepositories";

/** Defaults the API server applies (from the schema's `default` values). */
export const SPEC_DEFAULTS = {"upstream":{"port":8001},"grpcPort":8001,"httpPort":8000,"metricsPort":8002,"logLevel":"info","monitoring":{"interval":"30s"}} as const;

/**
 * Where the repository is and how to run its data plane.
 */
export interface DynamoKserveRepositorySpec {
  /**
   * A ConfigMap in this namespace with one key per model, `<model>.pbtxt` (config.pbtxt text under data, or a binary ModelConfig `<model>.pb` under binaryData). With persistentVolumeClaim too, a key overrides the config of the claim's model of that name, whose version folders still hold the files.
   */
  configMapRef?: {
    /**
     * Name of the ConfigMap.
     */
    name: string;
  };
  /**
   * A PersistentVolumeClaim in this namespace holding the repository in Triton's layout (`<model>/config.pbtxt`, `<model>/<version>/...`), mounted read-only.
   */
  persistentVolumeClaim?: {
    /**
     * Name of the PersistentVolumeClaim.
     */
    claimName: string;
    /**
     * The repository's folder inside the volume. Default the volume's root.
     */
    subPath?: string;
  };
  /**
   * The Triton (or other KServe v2 gRPC server) that runs the models this data plane cannot: a Service in this namespace, or an address. Without it, such models fail to load and status says why.
   */
  upstream?: {
    /**
     * A Service in this namespace, e.g. the Triton Service.
     */
    serviceName?: string;
    /**
     * The Service's gRPC port.
     */
    port?: number;
    /**
     * host:port of a KServe v2 gRPC endpoint.
     */
    address?: string;
  };
  /**
   * Number of data-plane pods. Leave it unset to let something else own the count (a HorizontalPodAutoscaler); the operator then never writes the Deployment's replicas.
   */
  replicas?: number;
  /**
   * Data-plane container image. Defaults to the image the operator was started with.
   */
  image?: string;
  /**
   * Pull policy of the data-plane image.
   */
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  /**
   * CPU and memory requests and limits of the data-plane container.
   */
  resources?: {
    /**
     * Minimum resources, e.g. cpu: 500m, memory: 256Mi.
     */
    requests?: {
      [k: string]: number | string | undefined;
    };
    /**
     * Maximum resources, e.g. cpu: 2, memory: 1Gi.
     */
    limits?: {
      [k: string]: number | string | undefined;
    };
  };
  /**
   * Port of the KServe v2 gRPC service (the Service port named grpc).
   */
  grpcPort?: number;
  /**
   * Port of the HTTP front door (the Service port named http): KServe v2 REST with Triton's binary tensor data and generate extensions, and the OpenAI-compatible /v1 routes.
   */
  httpPort?: number;
  /**
   * Port of the HTTP health and metrics endpoint (the Service port named metrics).
   */
  metricsPort?: number;
  /**
   * Largest gRPC message the data plane accepts or sends, in bytes (default 64 MiB; compressed requests count decompressed).
   */
  maxMessageSize?: number;
  /**
   * Data-plane log level.
   */
  logLevel?: "trace" | "debug" | "info" | "warn" | "error";
  /**
   * Have Prometheus scrape the data plane: the operator creates a ServiceMonitor (monitoring.coreos.com/v1) for the repository's Service, port metrics, path /metrics, when the Prometheus Operator CRD is installed.
   */
  monitoring?: {
    /**
     * How often Prometheus scrapes, e.g. 30s.
     */
    interval?: string;
    /**
     * Extra labels on the ServiceMonitor, so a Prometheus serviceMonitorSelector picks it up.
     */
    labels?: {
      [k: string]: string | undefined;
    };
  };
}

/**
 * What the operator observed; written only by the operator.
 */
export interface DynamoKserveRepositoryStatus {
  /**
   * The metadata.generation this status describes.
   */
  observedGeneration?: number;
  /**
   * The in-cluster gRPC address: <service>.<namespace>.svc:<port>.
   */
  endpoint?: string;
  /**
   * The in-cluster HTTP base URL (KServe v2 REST and OpenAI): http(s)://<service>.<namespace>.svc:<port>.
   */
  httpEndpoint?: string;
  /**
   * Data-plane pods that exist.
   */
  replicas?: number;
  /**
   * Data-plane pods that are ready to serve.
   */
  readyReplicas?: number;
  /**
   * Ready models / models, e.g. 7/8.
   */
  modelsReady?: string;
  /**
   * Every model (and version) of the repository as a ready data-plane pod reports it (RepositoryIndex, and ModelReady, which for a forwarded model asks the upstream), in name order.
   */
  models?: {
    /**
     * The model name clients use.
     */
    name: string;
    /**
     * The version; empty when the model has none loaded.
     */
    version?: string;
    /**
     * READY or UNAVAILABLE.
     */
    state: string;
    /**
     * Why the model is not ready (file:line for config errors).
     */
    reason?: string;
  }[];
  /**
   * Ready (the Deployment is available and every model is ready), Available (enough pods are ready), ModelsReady (every model of the repository is ready), and with spec.monitoring, MonitoringReady (the ServiceMonitor exists).
   */
  conditions?: {
    /**
     * Condition type.
     */
    type: string;
    /**
     * True, False or Unknown.
     */
    status: "True" | "False" | "Unknown";
    /**
     * The metadata.generation the condition was set for.
     */
    observedGeneration?: number;
    /**
     * When the status last changed.
     */
    lastTransitionTime: string;
    /**
     * A CamelCase reason a program can match.
     */
    reason: string;
    /**
     * What a person should know, and what to do.
     */
    message: string;
  }[];
}

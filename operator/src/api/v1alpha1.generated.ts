// Generated from crds/dynamokserve.dev_dynamokservemodels.yaml by scripts/gen-api-types.mjs. DO NOT EDIT: change the CRD and run `npm run api:gen`.

export const GROUP = "dynamokserve.dev";
export const VERSION = "v1alpha1";
export const KIND = "DynamoKserveModel";
export const PLURAL = "dynamokservemodels";

/** Defaults the API server applies (from the schema's `default` values). */
export const SPEC_DEFAULTS = {"modelConfig":{"configMapRef":{"key":"config.pbtxt"}},"storage":{"caBundle":{"key":"ca.crt"},"cacheSize":"10Gi"},"autoscaling":{"class":"HPA","minReplicas":1,"inflightMetric":"dynamo_frontend_inflight_requests","keda":{"pollingIntervalSeconds":15,"cooldownSeconds":300},"activation":{"holdTimeoutSeconds":120,"maxHeldRequests":1000}},"shutdown":{"drainDelaySeconds":5,"gracePeriodSeconds":30},"grpcPort":8001,"httpPort":8000,"metricsPort":8002,"logLevel":"info","tls":{"mode":"Disabled","issuerRef":{"kind":"Issuer","group":"cert-manager.io"}},"auth":{"tokenSecretRef":{"key":"tokens"}},"monitoring":{"interval":"30s"},"inferencePool":{"protocol":"gRPC","endpointPicker":{"failureMode":"FailClose"},"endpointPickerRef":{"group":"","kind":"Service","failureMode":"FailClose"}},"routes":{"backend":"Service","http":{"pathPrefix":"/"}},"canary":{"replicas":1,"modelConfig":{"configMapRef":{"key":"config.pbtxt"}}}} as const;

/**
 * What to serve and how to run it.
 */
export interface DynamoKserveModelSpec {
  /**
   * The name clients use for the model in inference requests (model_name). Defaults to metadata.name. If the config.pbtxt sets `name`, it must be this name.
   */
  modelName?: string;
  /**
   * Where the model's Triton configuration (triton_model_config, a config.pbtxt) comes from: a key of an existing ConfigMap, or inline text. Exactly one.
   */
  modelConfig: {
    /**
     * A key of a ConfigMap in this namespace. A key under `data` is read as config.pbtxt text; a key under `binaryData` as a binary serialized inference.ModelConfig.
     */
    configMapRef?: {
      /**
       * Name of the ConfigMap.
       */
      name: string;
      /**
       * Key within the ConfigMap.
       */
      key?: string;
    };
    /**
     * The config.pbtxt text itself.
     */
    inline?: string;
  };
  /**
   * Where the model's version folders (`<version>/model.onnx`, ...) come from, for engines that read model files (onnx, python). A volume is mounted read-only at /model-files/<model name>; object storage (storageUri) is synced into the pod's cache. The data plane takes the config from modelConfig and the files from here. Exactly one source.
   */
  modelFiles?: {
    /**
     * A PersistentVolumeClaim in this namespace holding the files, e.g. a Triton model repository.
     */
    persistentVolumeClaim?: {
      /**
       * Name of the PersistentVolumeClaim.
       */
      claimName: string;
    };
    /**
     * An OCI image or artifact holding the files, mounted as an image volume (Kubernetes 1.33+ with the ImageVolume feature).
     */
    image?: {
      /**
       * The image reference, e.g. registry.example.com/models/densenet:1.
       */
      reference: string;
      /**
       * Pull policy of the image.
       */
      pullPolicy?: "Always" | "IfNotPresent" | "Never";
    };
    /**
     * A ConfigMap in this namespace whose binaryData keys are the files (small models: a ConfigMap holds at most 1 MiB); items place each key at its path, e.g. 1/model.onnx.
     */
    configMap?: {
      /**
       * Name of the ConfigMap.
       */
      name: string;
      /**
       * Which key becomes which file under the model's folder.
       *
       * @minItems 1
       *
       * Items: One file.
       */
      items: [
        {
          /**
           * The ConfigMap key.
           */
          key: string;
          /**
           * Its path in the model's folder, e.g. 1/model.onnx.
           */
          path: string;
        },
        ...{
          /**
           * The ConfigMap key.
           */
          key: string;
          /**
           * Its path in the model's folder, e.g. 1/model.onnx.
           */
          path: string;
        }[]
      ];
    };
    /**
     * The model's folder in object storage, the one holding the version folders (`<version>/model.onnx`, ...), e.g. s3://bucket/triton/densenet_onnx: s3://bucket/prefix (AWS), s3://host:port/bucket/prefix (an S3-compatible store over http; s3://https://host:port/... over https), gs://bucket/prefix or as://account/container/prefix. The data plane syncs it into a local cache (--model-files); spec.storage says how to reach it.
     */
    storageUri?: string;
    /**
     * The model's folder inside the volume (the one holding the version folders), e.g. its folder in a Triton model repository. Default: the volume's root.
     */
    subPath?: string;
  };
  /**
   * How the data plane reaches object storage for spec.modelFiles.storageUri: credentials, endpoints, a CA bundle, and the local cache the files are synced to (an emptyDir). Without secretName, each cloud's standard credential chain applies: workload identity through pod.serviceAccountName (EKS IRSA or Pod Identity, GKE Workload Identity, Azure Workload Identity), or the node's own identity.
   */
  storage?: {
    /**
     * A Secret in this namespace holding the credentials, by key: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) for s3://; service-account.json for gs://; AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN for as://. Mounted read-only as files (never environment variables): the data plane reads them again when the Secret changes, so rotation needs no restart. The operator reads it too, to check the location (condition ModelFilesReady).
     */
    secretName?: string;
    /**
     * S3 settings for s3:// locations.
     */
    s3?: {
      /**
       * An S3-compatible endpoint for s3://bucket/... locations, e.g. https://minio.storage.svc:9000 (s3://host:port/bucket/... names its own). Default: AWS.
       */
      endpoint?: string;
      /**
       * The region. Default the AWS SDK's (AWS_REGION), else us-east-1.
       */
      region?: string;
      /**
       * Address buckets by path (host/bucket/key), as most S3-compatible stores need.
       */
      pathStyle?: boolean;
    };
    /**
     * Cloud Storage settings for gs:// locations.
     */
    gcs?: {
      /**
       * A Cloud Storage endpoint (an emulator or a private endpoint). Default Google's.
       */
      endpoint?: string;
    };
    /**
     * Blob Storage settings for as:// locations.
     */
    azure?: {
      /**
       * The Blob service endpoint with {account} standing for the storage account, e.g. http://azurite.storage.svc:10000/{account}. Default https://{account}.blob.core.windows.net.
       */
      endpoint?: string;
    };
    /**
     * PEM certificates to trust for an https endpoint besides the system's (a private store): a key of a ConfigMap in this namespace, mounted into the pods.
     */
    caBundle?: {
      /**
       * Name of the ConfigMap.
       */
      configMapName: string;
      /**
       * Key within the ConfigMap.
       */
      key?: string;
    };
    /**
     * The most the pod's model cache holds (a quantity, e.g. 20Gi): the cache emptyDir's sizeLimit and the data plane's --model-cache-max-bytes. A model whose files would pass it fails to load, saying so, rather than the pod being evicted.
     */
    cacheSize?: number | string;
    /**
     * How often the data plane lists the location for added, changed and removed models and versions (poll mode; an unchanged listing downloads nothing). Default 5.
     */
    pollSeconds?: number;
  };
  /**
   * Number of data-plane pods. Leave it unset to let something else own the count (a HorizontalPodAutoscaler); the operator then never writes the Deployment's replicas. The scale subresource sets it (kubectl scale dkm, an HPA or KEDA targeting the model). Not with autoscaling, which owns the count.
   */
  replicas?: number;
  /**
   * Scale the data-plane pods with load, and leave the Deployment's replica count to the autoscaler. class HPA: the operator creates a HorizontalPodAutoscaler (autoscaling/v2) on the model's's Deployment, named like it, on in-flight requests per pod (the data plane's dynamo_frontend_inflight_requests, served by the custom metrics API, e.g. prometheus-adapter with the rule in the README) and/or CPU utilization (the resource metrics API, e.g. metrics-server); with both, the larger count wins. class KEDA: the operator creates a KEDA ScaledObject, named like the Deployment, whose triggers read the data plane's series from Prometheus (in-flight, waiting and running requests, KV-cache usage; no prometheus-adapter) and CPU; it can scale to zero (minReplicas 0), with an activator holding requests while no pod runs.
   */
  autoscaling?: {
    /**
     * Which autoscaler: HPA (a HorizontalPodAutoscaler on the custom and resource metrics APIs) or KEDA (a KEDA ScaledObject reading Prometheus; needs KEDA installed and spec.monitoring, so Prometheus scrapes the pods).
     */
    class?: "HPA" | "KEDA";
    /**
     * The fewest pods. 0 (class KEDA only) scales an idle model to zero after keda.cooldownSeconds; a request then wakes it and waits for the first pod.
     */
    minReplicas?: number;
    /**
     * The most pods.
     */
    maxReplicas: number;
    /**
     * Requests in flight per pod to aim for, averaged over the pods. For an LLM, about the batch a pod serves well.
     */
    targetInflightRequests?: number;
    /**
     * class HPA: the name under which the custom metrics API serves the data plane's in-flight requests per pod (what the adapter's rule calls it). class KEDA reads Prometheus directly and ignores it.
     */
    inflightMetric?: string;
    /**
     * Average CPU use to aim for, in percent of resources.requests.cpu.
     */
    targetCPUUtilization?: number;
    /**
     * class KEDA: requests waiting for the model per pod to aim for (dynamo_kserve_requests_waiting: a scheduler's queue, an LLM's waiting requests).
     */
    targetWaitingRequests?: number;
    /**
     * class KEDA: requests the model is executing per pod to aim for (dynamo_kserve_requests_running).
     */
    targetRunningRequests?: number;
    /**
     * class KEDA: KV-cache usage to aim for, in percent, averaged over the pods (dynamo_kserve_kv_cache_usage_ratio; engines that keep a KV cache).
     */
    targetKvCacheUsagePercent?: number;
    /**
     * How the KEDA ScaledObject reads and acts (class KEDA).
     */
    keda?: {
      /**
       * The Prometheus the triggers query (e.g. http://prometheus-operated.monitoring:9090); defaults to the operator's --keda-prometheus-address (the chart's autoscaling.keda.prometheusAddress).
       */
      prometheusAddress?: string;
      /**
       * How often KEDA reads the triggers.
       */
      pollingIntervalSeconds?: number;
      /**
       * How long a model must be idle (no request for that long) before it is scaled to zero (minReplicas 0). Scaling between 1 and maxReplicas follows behavior.
       */
      cooldownSeconds?: number;
    };
    /**
     * minReplicas 0: the activator that stands in for the pods while none runs (one small pod per owner, the operator's image). It holds each request until a pod is ready, then relays it; its first held request wakes the model through KEDA at once.
     */
    activation?: {
      /**
       * The longest a request waits for a pod: an HTTP request is answered 504 then, a gRPC call DEADLINE_EXCEEDED at the sooner of this and its own deadline (the pod still starts).
       */
      holdTimeoutSeconds?: number;
      /**
       * Requests held at once; more are refused (RESOURCE_EXHAUSTED, HTTP 503).
       */
      maxHeldRequests?: number;
    };
    /**
     * How fast the HPA scales up and down (autoscaling/v2 HorizontalPodAutoscalerBehavior, validated by the API server; class KEDA passes it to the HPA KEDA makes); e.g. scaleDown.stabilizationWindowSeconds, 300 by default.
     */
    behavior?: {
      [k: string]: unknown | undefined;
    };
  };
  /**
   * How a data-plane pod leaves (a roll-out, a scale-down, a node drain) without failing a request: on SIGTERM it keeps serving for drainDelaySeconds with readiness off, while Kubernetes takes it out of the Service's endpoints (HTTP replies then close their connections so clients reconnect elsewhere), then stops taking requests and gives those in flight, long streams included, gracePeriodSeconds to finish. The pod's terminationGracePeriodSeconds covers both, plus 5 seconds.
   */
  shutdown?: {
    /**
     * Seconds of serving with readiness off before new requests stop.
     */
    drainDelaySeconds?: number;
    /**
     * Seconds requests in flight (streams too) get to finish once new ones stop.
     */
    gracePeriodSeconds?: number;
  };
  /**
   * Where the data-plane pods run and what they carry beside the operator's own settings. Kubernetes validates each field as it validates a pod template.
   */
  pod?: {
    /**
     * Extra pod labels. Keys under dynamokserve.dev/ are the operator's (they select the pods: the Service, the disruption budget, the autoscaler, a pool, a canary) and are refused.
     */
    labels?: {
      [k: string]: string | undefined;
    };
    /**
     * Extra pod annotations.
     */
    annotations?: {
      [k: string]: string | undefined;
    };
    /**
     * Node labels the pods must run on.
     */
    nodeSelector?: {
      [k: string]: string | undefined;
    };
    /**
     * Taints the pods tolerate (core/v1 Toleration).
     */
    tolerations?: {
      [k: string]: unknown | undefined;
    }[];
    /**
     * Node and pod (anti-)affinity (core/v1 Affinity).
     */
    affinity?: {
      [k: string]: unknown | undefined;
    };
    /**
     * How the pods spread over zones or nodes (core/v1 TopologySpreadConstraint).
     */
    topologySpreadConstraints?: {
      [k: string]: unknown | undefined;
    }[];
    /**
     * The pods' PriorityClass.
     */
    priorityClassName?: string;
    /**
     * The pods' ServiceAccount. With workload identity (EKS IRSA or Pod Identity, GKE Workload Identity, Azure Workload Identity) its cloud identity is how the data plane reads object storage without storage.secretName. The Kubernetes API token is still not mounted (the identity webhooks mount their own).
     */
    serviceAccountName?: string;
    /**
     * Secrets for pulling the data-plane image.
     */
    imagePullSecrets?: {
      /**
       * Name of a Secret of the model's namespace.
       */
      name: string;
    }[];
    /**
     * Extra environment variables of the data-plane container (core/v1 EnvVar).
     */
    env?: {
      [k: string]: unknown | undefined;
    }[];
    /**
     * ConfigMaps and Secrets whose keys become environment variables (core/v1 EnvFromSource).
     */
    envFrom?: {
      [k: string]: unknown | undefined;
    }[];
  };
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
   * TLS on the gRPC port. Disabled (plaintext h2c), Secret (your kubernetes.io/tls Secret), SelfSigned (the operator makes a CA and a serving certificate for the Service's DNS names, renews it before it expires; the data plane reloads it without a restart), or CertManager (a cert-manager Certificate for those names from issuerRef). With TLS, probes use the HTTP health port (Kubernetes' gRPC probes cannot speak TLS).
   */
  tls?: {
    /**
     * How the serving certificate is obtained.
     */
    mode?: "Disabled" | "Secret" | "SelfSigned" | "CertManager";
    /**
     * mode Secret: a kubernetes.io/tls Secret in this namespace (tls.crt, tls.key).
     */
    secretName?: string;
    /**
     * mode CertManager: the cert-manager Issuer or ClusterIssuer that signs the certificate.
     */
    issuerRef?: {
      /**
       * Name of the issuer.
       */
      name: string;
      /**
       * Issuer (this namespace) or ClusterIssuer.
       */
      kind?: "Issuer" | "ClusterIssuer";
      /**
       * API group of the issuer.
       */
      group?: string;
    };
  };
  /**
   * Bearer-token authentication: the data plane accepts only calls with `authorization: Bearer <token>` for a token in this Secret key (one per line). Rotation (editing the Secret) is picked up live.
   */
  auth?: {
    /**
     * The Secret key holding the tokens.
     */
    tokenSecretRef: {
      /**
       * Name of the Secret.
       */
      name: string;
      /**
       * Key within the Secret.
       */
      key?: string;
    };
  };
  /**
   * Have Prometheus scrape the data plane: the operator creates a ServiceMonitor (monitoring.coreos.com/v1) for the model's Service, port metrics, path /metrics, when the Prometheus Operator CRD is installed.
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
  /**
   * Serve the model through the Gateway API Inference Extension: the operator creates an InferencePool (inference.networking.k8s.io/v1) named like this object, selecting exactly this model's data-plane pods on the gRPC port (appProtocol kubernetes.io/h2c when the installed InferencePool CRD has that field) or on the HTTP port (appProtocol http), and a Service fronting the pool.
   */
  inferencePool?: {
    /**
     * What the pool serves: the KServe v2 gRPC port (h2c), or the HTTP port (KServe v2 REST and OpenAI, which GAIE endpoint pickers parse). One pool has one appProtocol.
     */
    protocol?: "gRPC" | "HTTP";
    /**
     * An InferenceObjective (inference.networking.x-k8s.io/v1alpha2, GAIE v1.4) named like this object, for its pool: requests that name it (header x-gateway-inference-objective: <name>) get its priority in the endpoint picker's flow control. Written while its CRD is installed.
     */
    objective?: {
      /**
       * Higher is served first when requests queue; negative values are allowed; 0 when unset.
       */
      priority?: number;
    };
    /**
     * The operator runs the Gateway API Inference Extension's endpoint picker (epp) for this pool: a Deployment <name>-epp (one pod, replaced by Recreate as GAIE's chart does), its Service (ext_proc on 9002 over the picker's own TLS, metrics on 9090), a ServiceAccount and a Role that reads only pods, InferencePools, InferenceObjectives and InferenceModelRewrites of this namespace, and a ConfigMap with its EndpointPickerConfig, generated to score pods on the data plane's load signals (the model's series; a repository's pod totals). The pool's endpointPickerRef names that Service. GAIE's epp (v1.4) reads OpenAI bodies only: it needs protocol HTTP and picks for /v1 requests.
     */
    endpointPicker?: {
      /**
       * The endpoint picker's image; default: the operator's --endpoint-picker-image (registry.k8s.io/gateway-api-inference-extension/epp:v1.4.0 unless the chart says otherwise).
       */
      image?: string;
      /**
       * What the gateway does when the endpoint picker does not answer.
       */
      failureMode?: "FailOpen" | "FailClose";
      /**
       * CPU and memory requests and limits of the picker's container (default: requests of 100m CPU and 128Mi; GAIE's chart asks for 4 CPUs and 8Gi for production traffic).
       */
      resources?: {
        /**
         * Minimum resources, e.g. cpu: 100m, memory: 128Mi.
         */
        requests?: {
          [k: string]: number | string | undefined;
        };
        /**
         * Maximum resources, e.g. memory: 1Gi.
         */
        limits?: {
          [k: string]: number | string | undefined;
        };
      };
    };
    /**
     * The Endpoint Picker extension the gateway asks which pod serves a request (one you run).
     */
    endpointPickerRef?: {
      /**
       * API group of the referent; "" is the core group.
       */
      group?: string;
      /**
       * Kind of the referent.
       */
      kind?: string;
      /**
       * Name of the referent.
       */
      name: string;
      /**
       * The Endpoint Picker's Service port (required for a Service).
       */
      port?: {
        /**
         * The port number.
         */
        number: number;
      };
      /**
       * What the gateway does when the Endpoint Picker does not answer.
       */
      failureMode?: "FailOpen" | "FailClose";
    };
  };
  /**
   * Gateway API routes (gateway.networking.k8s.io/v1) from a Gateway to this model: a GRPCRoute to its gRPC port (appProtocol kubernetes.io/h2c, so the gateway speaks HTTP/2 cleartext to the pods) and/or an HTTPRoute to its HTTP port, each named like this object. gRPC requests name their model in the body, so a Gateway shared by several models tells them apart by hostname (or listener).
   */
  routes?: {
    /**
     * The Gateway the routes attach to (their parentRef).
     */
    gateway: {
      /**
       * The Gateway's name.
       */
      name: string;
      /**
       * The Gateway's namespace (default: the model's); its listeners must allow routes from here.
       */
      namespace?: string;
      /**
       * One listener of the Gateway, by name (default: every listener that allows the route).
       */
      sectionName?: string;
    };
    /**
     * What the routes send to: the model's Service (any Gateway API implementation), or its InferencePool (a gateway of the Gateway API Inference Extension, which asks the pool's endpoint picker for the pod).
     */
    backend?: "Service" | "InferencePool";
    /**
     * A GRPCRoute to the model's gRPC port.
     */
    grpc?: {
      /**
       * The hostnames the route matches (the request's Host or :authority); default every one the listener takes.
       *
       * @maxItems 16
       */
      hostnames?:
        | []
        | [string]
        | [string, string]
        | [string, string, string]
        | [string, string, string, string]
        | [string, string, string, string, string]
        | [string, string, string, string, string, string]
        | [string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string, string, string, string, string]
        | [
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string
          ]
        | [
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string
          ]
        | [
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string
          ];
    };
    /**
     * An HTTPRoute to the model's HTTP port (KServe v2 REST, OpenAI).
     */
    http?: {
      /**
       * The hostnames the route matches (the request's Host or :authority); default every one the listener takes.
       *
       * @maxItems 16
       */
      hostnames?:
        | []
        | [string]
        | [string, string]
        | [string, string, string]
        | [string, string, string, string]
        | [string, string, string, string, string]
        | [string, string, string, string, string, string]
        | [string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string, string, string, string]
        | [string, string, string, string, string, string, string, string, string, string, string, string, string]
        | [
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string
          ]
        | [
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string
          ]
        | [
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string,
            string
          ];
      /**
       * The requests' path prefix the route matches (the Gateway API's rules for a path).
       */
      pathPrefix?: string;
    };
  };
  /**
   * A second variant of the model beside the stable one (this spec), with its own pods and Service (<name>-canary), serving the same model name: the routes send trafficPercent of requests to it once a pod of it is ready. What it changes: the image, the model's config, its files, the resources; everything else is the stable spec's. Its pods answer with the header dynamo-kserve-variant: canary (the stable's: stable). Promote by writing the canary's fields into the spec and removing canary; roll back by removing canary. Either way the routes first send it nothing, and its objects go once the gateway has taken that and the requests it was serving have drained. Not autoscaled: it runs replicas pods.
   */
  canary?: {
    /**
     * The share of the routes' requests the canary gets, 0 to 100 (the routes' weights are 100 - trafficPercent and trafficPercent). 0 keeps it running with no traffic.
     */
    trafficPercent: number;
    /**
     * Number of the canary's pods.
     */
    replicas?: number;
    /**
     * The canary's data-plane image (default: the stable's).
     */
    image?: string;
    /**
     * The canary's Triton configuration (default: the stable's), as spec.modelConfig: a key of a ConfigMap, or inline text. Exactly one. It must name the same model.
     */
    modelConfig?: {
      /**
       * A key of a ConfigMap in this namespace (data as config.pbtxt text, binaryData as a serialized ModelConfig).
       */
      configMapRef?: {
        /**
         * Name of the ConfigMap.
         */
        name: string;
        /**
         * Key within the ConfigMap.
         */
        key?: string;
      };
      /**
       * The config.pbtxt text itself.
       */
      inline?: string;
    };
    /**
     * The canary's model files (default: the stable's), as spec.modelFiles: a volume, or a folder in object storage reached as spec.storage says (the operator checks only the stable's location; the canary's pods say whether they found theirs). Exactly one source.
     */
    modelFiles?: {
      /**
       * A PersistentVolumeClaim in this namespace holding the files, e.g. a Triton model repository.
       */
      persistentVolumeClaim?: {
        /**
         * Name of the PersistentVolumeClaim.
         */
        claimName: string;
      };
      /**
       * An OCI image or artifact holding the files, mounted as an image volume (Kubernetes 1.33+ with the ImageVolume feature).
       */
      image?: {
        /**
         * The image reference, e.g. registry.example.com/models/densenet:1.
         */
        reference: string;
        /**
         * Pull policy of the image.
         */
        pullPolicy?: "Always" | "IfNotPresent" | "Never";
      };
      /**
       * A ConfigMap in this namespace whose binaryData keys are the files (small models: a ConfigMap holds at most 1 MiB); items place each key at its path, e.g. 1/model.onnx.
       */
      configMap?: {
        /**
         * Name of the ConfigMap.
         */
        name: string;
        /**
         * Which key becomes which file under the model's folder.
         *
         * @minItems 1
         *
         * Items: One file.
         */
        items: [
          {
            /**
             * The ConfigMap key.
             */
            key: string;
            /**
             * Its path in the model's folder, e.g. 1/model.onnx.
             */
            path: string;
          },
          ...{
            /**
             * The ConfigMap key.
             */
            key: string;
            /**
             * Its path in the model's folder, e.g. 1/model.onnx.
             */
            path: string;
          }[]
        ];
      };
      /**
       * The model's folder in object storage, the one holding the version folders (`<version>/model.onnx`, ...), e.g. s3://bucket/triton/densenet_onnx: s3://bucket/prefix (AWS), s3://host:port/bucket/prefix (an S3-compatible store over http; s3://https://host:port/... over https), gs://bucket/prefix or as://account/container/prefix. The data plane syncs it into a local cache (--model-files); spec.storage says how to reach it.
       */
      storageUri?: string;
      /**
       * The model's folder inside the volume (the one holding the version folders), e.g. its folder in a Triton model repository. Default: the volume's root.
       */
      subPath?: string;
    };
    /**
     * The canary's CPU and memory requests and limits (default: the stable's).
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
  };
}

/**
 * What the operator observed; written only by the operator.
 */
export interface DynamoKserveModelStatus {
  /**
   * The metadata.generation this status describes.
   */
  observedGeneration?: number;
  /**
   * The model name clients use.
   */
  modelName?: string;
  /**
   * The backend of the model's config (what runs it).
   */
  backend?: string;
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
   * The label selector of the data-plane pods (the scale subresource's).
   */
  selector?: string;
  /**
   * Data-plane pods that are ready to serve.
   */
  readyReplicas?: number;
  /**
   * The autoscaler's state in a word or two, as kubectl get shows it: "HPA", "KEDA Active", "KEDA Idle", "KEDA ScaledToZero", "KEDA NotInstalled", "KEDA TriggerFailing".
   */
  autoscaler?: string;
  /**
   * The serving certificate in use.
   */
  tls?: {
    /**
     * The Secret mounted into the data plane.
     */
    secretName?: string;
    /**
     * When the serving certificate expires.
     */
    notAfter?: string;
  };
  /**
   * The InferencePool serving the model and the Service fronting it, as last made.
   */
  inferencePool?: {
    /**
     * Name of the InferencePool.
     */
    name?: string;
    /**
     * The pool's appProtocol (kubernetes.io/h2c, or http for an HTTP pool), or empty when the installed InferencePool CRD has no appProtocol field.
     */
    appProtocol?: string;
    /**
     * The Service fronting the pool's pods, with the matching appProtocol.
     */
    service?: string;
    /**
     * The Service of the endpoint picker the operator runs for the pool (spec.inferencePool.endpointPicker).
     */
    endpointPicker?: string;
    /**
     * The InferenceObjective written for the pool (spec.inferencePool.objective).
     */
    objective?: string;
  };
  /**
   * The routes written for spec.routes and the Gateway they attach to.
   */
  routes?: {
    /**
     * <namespace>/<name> of the Gateway.
     */
    gateway?: string;
    /**
     * Name of the GRPCRoute.
     */
    grpcRoute?: string;
    /**
     * Name of the HTTPRoute.
     */
    httpRoute?: string;
  };
  /**
   * The canary variant (spec.canary), while it runs or is being retired.
   */
  canary?: {
    /**
     * The canary's Service (the routes' second backend).
     */
    service?: string;
    /**
     * The share of the routes' requests it gets now (0 until a pod of it is ready, and while it is retired).
     */
    trafficPercent?: number;
    /**
     * The canary's pods that exist.
     */
    replicas?: number;
    /**
     * The canary's pods that are ready to serve.
     */
    readyReplicas?: number;
    /**
     * When spec.canary was removed and the routes stopped sending to it; its objects go after the drain.
     */
    retiringSince?: string;
    /**
     * What kubectl get shows: "10% 1/1 ready", "0% starting", "retiring".
     */
    summary?: string;
  };
  /**
   * Ready (the model can be called), ConfigValid (its config.pbtxt parses and checks), Available (enough pods are ready), Degraded (something needs attention), and with spec.inferencePool, InferencePoolReady (the pool and its Service exist, and the endpoint picker the operator runs is available), with spec.routes, RoutesReady (the Gateway accepted the routes), with spec.canary, CanaryReady (its pods are ready and the routes give it its share; reason Starting, Retiring, ConfigInvalid, ...), and with spec.monitoring, MonitoringReady (the ServiceMonitor exists), with TLS or auth, CredentialsReady (the certificate and token Secrets are there and usable), and with modelFiles.storageUri, ModelFilesReady (the operator listed the location with storage.secretName's credentials and found version folders there; Unknown with reason CheckedByPods without a Secret). With spec.autoscaling, AutoscalerReady (the autoscaler's objects exist and it reads its metrics; reason KEDANotInstalled, TriggerFailing, ...), and with minReplicas 0, ScaledToZero (no pod runs; the activator holds requests).
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

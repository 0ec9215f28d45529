import {
  argumentsOf,
  choice,
  duration,
  flag,
  fraction,
  logLevel,
  repeatable,
  text,
  toggle,
  wholeNumber,
  type ValuesOf,
} from "./options.js";

/**
 * The data plane's command line: every option of `dynamo-kserve dataplane`, declared once.
 * The CLI parses these, the operator builds a pod's arguments from them
 * (dataPlaneArguments), and the option reference (docs/reference/options.md) is generated from them.
 */

/** The largest gRPC message accepted or sent unless --max-message-size says otherwise (see dataplane/src/limits.ts). */
export const DEFAULT_MAX_MESSAGE_SIZE = 64 * 1024 * 1024;
/**
 * HTTP/2 receive windows: Node's 64 KiB default makes a 1 MiB tensor wait for sixteen
 * WINDOW_UPDATE round trips; these let one large request arrive without stopping.
 */
export const DEFAULT_STREAM_WINDOW = 8 * 1024 * 1024;
export const DEFAULT_CONNECTION_WINDOW = 16 * 1024 * 1024;
/** ModelStreamInfer requests of one stream running at once unless --stream-max-pending says otherwise. */
export const DEFAULT_STREAM_MAX_PENDING = 1024;
/** Shared memory per Python model process: a 16 MiB tensor fits four times; pages are used only as written. */
export const DEFAULT_PYTHON_SHM_BYTE_SIZE = 64 * 1024 * 1024;

/**
 * The python engine's options. The engine receives their values as they are named here
 * (PythonEngineArguments, through DataPlaneOptions.pythonEngine and EngineRuntime.pythonEngine):
 * a new one is declared here and read where it is used, with nothing to pass on between.
 */
export const PYTHON_ENGINE_OPTIONS = {
  python: text(
    "--python <path>",
    {
      env: "DYNAMO_PYTHON",
      help: 'the Python interpreter, with numpy, that hosts Python-backend models (backend: "python")',
    },
    "python3",
  ),
  pythonStubTimeoutSecs: duration(
    "--python-stub-timeout-secs <seconds>",
    {
      env: "DYNAMO_PYTHON_STUB_TIMEOUT_SECS",
      help: "a Python model process that answers no health check for this long is killed and restarted (Triton's stub-timeout-seconds)",
    },
    30,
  ),
  pythonShmByteSize: wholeNumber(
    "--python-shm-byte-size <bytes>",
    {
      env: "DYNAMO_PYTHON_SHM_BYTE_SIZE",
      help: "shared memory (/dev/shm) per Python model process, this much for input tensors and as much again for output tensors, of 64 KiB and more; 0: all go through its pipe",
    },
    { min: 0, max: 4 * 1024 * 1024 * 1024 },
    DEFAULT_PYTHON_SHM_BYTE_SIZE,
  ),
};

export type PythonEngineArguments = ValuesOf<typeof PYTHON_ENGINE_OPTIONS>;

/**
 * Model repositories in object storage (s3://, gs://, as://, see lib/storage/locations.ts):
 * where their files are synced to, and how the stores are reached. Credentials come from
 * each cloud's standard chain, or from --storage-secret-dir (a mounted Secret, re-read
 * when it changes, so a rotated key needs no restart).
 */
export const MODEL_STORAGE_OPTIONS = {
  modelCacheDir: text("--model-cache-dir <dir>", {
    env: "DYNAMO_MODEL_CACHE_DIR",
    help: "where models from object storage are synced to and served from (an emptyDir in pods); default: dynamo-kserve-model-cache in the system's temporary folder",
  }),
  modelCacheMaxBytes: wholeNumber(
    "--model-cache-max-bytes <bytes>",
    {
      env: "DYNAMO_MODEL_CACHE_MAX_BYTES",
      help: "the most the model cache may hold; a model whose files would pass it fails to load, saying so; 0: no bound but the disk",
    },
    { min: 0 },
    0,
  ),
  storageSecretDir: text("--storage-secret-dir <dir>", {
    env: "DYNAMO_STORAGE_SECRET_DIR",
    help: "a folder of credential files (a mounted Secret), read again when they change: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (s3); service-account.json (gs); AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN (as); without it, each cloud's standard credential chain",
  }),
  storageCaFile: text("--storage-ca-file <file>", {
    env: "DYNAMO_STORAGE_CA_FILE",
    help: "PEM certificates trusted for https object-storage endpoints, besides the system's (a private S3-compatible store)",
  }),
  s3Endpoint: text("--s3-endpoint <url>", {
    env: "DYNAMO_S3_ENDPOINT",
    help: "the S3 endpoint for s3://bucket/... locations (an S3-compatible store), e.g. https://minio.example:9000; s3://host:port/bucket/... names its own",
  }),
  s3Region: text("--s3-region <region>", {
    env: "DYNAMO_S3_REGION",
    help: "the S3 region; default: the AWS SDK's (AWS_REGION, the shared config file), else us-east-1",
  }),
  s3PathStyle: flag("--s3-path-style", {
    env: "DYNAMO_S3_PATH_STYLE",
    help: "address S3 buckets by path (host/bucket/key) instead of by host name; always so for s3://host:port/... locations",
  }),
  gcsEndpoint: text("--gcs-endpoint <url>", {
    env: "DYNAMO_GCS_ENDPOINT",
    help: "the Cloud Storage endpoint for gs:// locations (an emulator or a private endpoint); default: Google's",
  }),
  azureEndpoint: text("--azure-endpoint <url>", {
    env: "DYNAMO_AZURE_ENDPOINT",
    help: "the Blob service endpoint for as:// locations, the account's name replaced by {account} (e.g. http://127.0.0.1:10000/{account}); default: https://{account}.blob.core.windows.net",
  }),
  modelFiles: repeatable("--model-files <model=location>", {
    env: "DYNAMO_MODEL_FILE_LOCATIONS",
    help: "where one model configured by a single file (--model-config, a ConfigMap's <model>.pbtxt) finds its version folders: <model>=<location>, a folder or an object-storage prefix holding <version>/model.onnx ...; instead of --model-files-root/<model> (repeatable)",
  }),
  modelLoadPath: repeatable("--model-load-path <location>", {
    env: "DYNAMO_MODEL_LOAD_PATH",
    help: "a folder or object-storage prefix under which RepositoryModelLoad's model_path may point, besides the model repositories (repeatable)",
  }),
};

export type ModelStorageArguments = ValuesOf<typeof MODEL_STORAGE_OPTIONS>;

/**
 * The header (gRPC initial metadata, HTTP response header) naming the variant that answered,
 * when the data plane runs with --variant: a client of a canary rollout sees which one it got.
 */
export const VARIANT_HEADER = "dynamo-kserve-variant";

export const DATAPLANE_OPTIONS = {
  modelRepository: repeatable("--model-repository <location>", {
    env: "DYNAMO_MODEL_REPOSITORY",
    help: "Triton-layout model repository (repeatable): a folder, s3://bucket/prefix, s3://host:port/bucket/prefix, gs://bucket/prefix or as://account/container/prefix; default: the bundled examples/model_repository",
  }),
  modelConfig: repeatable("--model-config <file>", {
    env: "DYNAMO_MODEL_CONFIG",
    help: "a single model configuration file, config.pbtxt text or binary ModelConfig (repeatable)",
  }),
  modelFilesRoot: text("--model-files-root <dir>", {
    env: "DYNAMO_MODEL_FILES_ROOT",
    help: "version folders of models configured by a single file: <dir>/<model>/<version>/model.onnx (a volume beside a ConfigMap of configs)",
  }),
  forwardUnsupported: text("--forward-unsupported <host:port>", {
    env: "DYNAMO_FORWARD_UNSUPPORTED",
    help: "forward models this data plane cannot run (pytorch, tensorflow, tensorrt, ..., and ensembles with such a step) to this Triton gRPC endpoint, as migrate does",
  }),
  forwardPython: flag("--forward-python", {
    env: "DYNAMO_FORWARD_PYTHON",
    help: "with --forward-unsupported: forward Python-backend models too, instead of running them with the python engine",
  }),
  allowClientShm: toggle("--allow-client-shm", {
    env: "DYNAMO_ALLOW_CLIENT_SHM",
    help: "let clients register system shared-memory regions (also --allow-client-shm=true, as Triton writes it; off by default, as Triton since 26.04): only when clients share the pod's /dev/shm and the port is not reachable from outside",
  }),
  ...PYTHON_ENGINE_OPTIONS,
  ...MODEL_STORAGE_OPTIONS,
  modelControlMode: choice(
    "--model-control-mode <mode>",
    { env: "DYNAMO_MODEL_CONTROL_MODE", help: "none | poll (follow changes on disk) | explicit (load/unload RPCs)" },
    ["none", "poll", "explicit"] as const,
    "poll",
  ),
  loadModel: repeatable("--load-model <name>", {
    env: "DYNAMO_LOAD_MODEL",
    help: "with explicit control: a model to load at start, '*' for all (repeatable)",
  }),
  modelLoadTimeoutSecs: duration(
    "--model-load-timeout-secs <seconds>",
    {
      env: "DYNAMO_MODEL_LOAD_TIMEOUT_SECS",
      help: "a model whose load takes longer (a Python model's initialize) is stopped, its processes killed, and it is UNAVAILABLE with the reason; other models load meanwhile, and the data plane is ready once its start-up loads are done; 0: no bound (a start-up load that hangs keeps it not ready)",
    },
    600,
  ),
  repositoryPollSecs: duration(
    "--repository-poll-secs <seconds>",
    { env: "DYNAMO_REPOSITORY_POLL_SECS", help: "how often poll mode rereads the repository" },
    5,
  ),
  disableAutoCompleteConfig: flag("--disable-auto-complete-config", {
    env: "DYNAMO_DISABLE_AUTO_COMPLETE_CONFIG",
    help: "do not fill in what config.pbtxt leaves out from the model file (ONNX inputs, outputs, batching) or from a Python model's auto_complete_config, as Triton's flag",
  }),
  host: text("--host <address>", { env: "DYNAMO_HOST", help: "address to listen on" }, "0.0.0.0"),
  grpcPort: wholeNumber(
    "--grpc-port <port>",
    { env: "DYNAMO_GRPC_PORT", help: "gRPC port (0 picks a free one)" },
    { min: 0, max: 65535 },
    8001,
  ),
  httpPort: wholeNumber(
    "--http-port <port>",
    {
      env: "DYNAMO_HTTP_PORT",
      help: "HTTP port: KServe v2 REST (Triton's binary tensor extension, generate) and OpenAI /v1 (0 picks a free one)",
    },
    { min: 0, max: 65535 },
    8000,
  ),
  metricsPort: wholeNumber(
    "--metrics-port <port>",
    {
      env: "DYNAMO_METRICS_PORT",
      help: "HTTP port for /metrics and the /v2/health/* probes, no token needed (0 picks a free one)",
    },
    { min: 0, max: 65535 },
    8002,
  ),
  maxMessageSize: wholeNumber(
    "--max-message-size <bytes>",
    {
      env: "DYNAMO_MAX_MESSAGE_SIZE",
      help: "largest gRPC message or HTTP body accepted or sent, compressed requests by their decompressed size (up to 2 GiB - 1)",
    },
    { min: 1024, max: 2 ** 31 - 1 },
    DEFAULT_MAX_MESSAGE_SIZE,
    "64 MiB",
  ),
  streamMaxPending: wholeNumber(
    "--stream-max-pending <n>",
    {
      env: "DYNAMO_STREAM_MAX_PENDING",
      help: "ModelStreamInfer requests of one stream running at once; at the cap the stream is not read until one finishes (HTTP/2 back-pressure)",
    },
    { min: 1 },
    DEFAULT_STREAM_MAX_PENDING,
  ),
  shutdownGraceSecs: wholeNumber(
    "--shutdown-grace-secs <seconds>",
    { env: "DYNAMO_SHUTDOWN_GRACE_SECS", help: "on SIGTERM, how long in-flight requests may finish" },
    { min: 0 },
    30,
  ),
  grpcWorkers: wholeNumber(
    "--grpc-workers <n>",
    {
      env: "DYNAMO_GRPC_WORKERS",
      help: "serve gRPC from n processes on the same port (one Node process uses one core); 0: one per core the process may use (its CPU affinity, capped by the container's CPU limit)",
    },
    { min: 0, max: 256 },
    1,
  ),
  drainDelaySecs: duration(
    "--drain-delay-secs <seconds>",
    {
      env: "DYNAMO_DRAIN_DELAY_SECS",
      help: "on SIGTERM, keep serving this long with readiness NOT_SERVING before new calls stop (endpoint propagation)",
    },
    0,
  ),
  grpcKeepaliveTimeSecs: duration("--grpc-keepalive-time-secs <seconds>", {
    env: "DYNAMO_GRPC_KEEPALIVE_TIME_SECS",
    help: "ping a client after this long without a ping (grpc.keepalive_time_ms; grpc-js's own default: 2 h)",
  }),
  grpcKeepaliveTimeoutSecs: duration(
    "--grpc-keepalive-timeout-secs <seconds>",
    {
      env: "DYNAMO_GRPC_KEEPALIVE_TIMEOUT_SECS",
      help: "close a connection whose keepalive ping is not answered this fast (grpc.keepalive_timeout_ms)",
    },
    20,
  ),
  grpcMaxConnectionAgeSecs: duration("--grpc-max-connection-age-secs <seconds>", {
    env: "DYNAMO_GRPC_MAX_CONNECTION_AGE_SECS",
    help: "close connections this old (with GOAWAY) so L4 load balancers rebalance",
  }),
  grpcMaxConnectionAgeGraceSecs: duration("--grpc-max-connection-age-grace-secs <seconds>", {
    env: "DYNAMO_GRPC_MAX_CONNECTION_AGE_GRACE_SECS",
    help: "then give their calls this long to finish",
  }),
  grpcMaxConnectionIdleSecs: duration("--grpc-max-connection-idle-secs <seconds>", {
    env: "DYNAMO_GRPC_MAX_CONNECTION_IDLE_SECS",
    help: "close connections idle this long",
  }),
  grpcHttp2MaxPingsWithoutData: wholeNumber(
    "--grpc-http2-max-pings-without-data <n>",
    {
      env: "DYNAMO_GRPC_HTTP2_MAX_PINGS_WITHOUT_DATA",
      help: "keepalive pings the server sends with no call started or finished between them, then it waits for one (grpc.http2.max_pings_without_data); 0: no limit",
    },
    { min: 0 },
    0,
  ),
  grpcHttp2MinTimeBetweenPingsSecs: duration(
    "--grpc-http2-min-time-between-pings-secs <seconds>",
    {
      env: "DYNAMO_GRPC_HTTP2_MIN_TIME_BETWEEN_PINGS_SECS",
      help: "the shortest gap between two keepalive pings the server sends (grpc.http2.min_time_between_pings_ms)",
    },
    0,
  ),
  grpcKeepalivePermitWithoutCalls: flag("--grpc-keepalive-permit-without-calls", {
    env: "DYNAMO_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS",
    help: "let clients ping while no call is open (grpc.keepalive_permit_without_calls); without it an idle connection may ping once per 2 h",
  }),
  grpcHttp2MinPingIntervalWithoutDataSecs: duration(
    "--grpc-http2-min-ping-interval-without-data-secs <seconds>",
    {
      env: "DYNAMO_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_SECS",
      help: "shortest gap between a client's pings while no call is open (grpc.http2.min_ping_interval_without_data_ms); a ping sooner is a strike",
    },
    300,
  ),
  grpcHttp2MaxPingStrikes: wholeNumber(
    "--grpc-http2-max-ping-strikes <n>",
    {
      env: "DYNAMO_GRPC_HTTP2_MAX_PING_STRIKES",
      help: "strikes tolerated; one more and the connection gets GOAWAY too_many_pings (grpc.http2.max_ping_strikes); 0 accepts every ping, as grpc-js",
    },
    { min: 0 },
    0,
  ),
  grpcMaxConcurrentStreams: wholeNumber(
    "--grpc-max-concurrent-streams <n>",
    { env: "DYNAMO_GRPC_MAX_CONCURRENT_STREAMS", help: "HTTP/2 streams (calls) per connection at once" },
    { min: 1 },
  ),
  grpcInitialConnectionWindowSize: wholeNumber(
    "--grpc-initial-connection-window-size <bytes>",
    {
      env: "DYN_GRPC_INITIAL_CONNECTION_WINDOW_SIZE",
      help: "the gRPC server's HTTP/2 receive window per connection: what a client may send before the server reads (NVIDIA Dynamo's frontend's variable)",
    },
    { min: 65535, max: 2 ** 31 - 1 },
    DEFAULT_CONNECTION_WINDOW,
    "16 MiB",
  ),
  grpcInitialStreamWindowSize: wholeNumber(
    "--grpc-initial-stream-window-size <bytes>",
    {
      env: "DYN_GRPC_INITIAL_STREAM_WINDOW_SIZE",
      help: "the gRPC server's HTTP/2 receive window per call (SETTINGS_INITIAL_WINDOW_SIZE; NVIDIA Dynamo's frontend's variable)",
    },
    { min: 65535, max: 2 ** 31 - 1 },
    DEFAULT_STREAM_WINDOW,
    "8 MiB",
  ),
  upstreamFlowControlWindow: wholeNumber(
    "--upstream-flow-control-window <bytes>",
    {
      env: "DYNAMO_UPSTREAM_FLOW_CONTROL_WINDOW",
      help: "HTTP/2 receive window of the kserve-grpc engine's upstream channels (grpc-js has one for a connection and its calls)",
    },
    { min: 65535, max: 2 ** 31 - 1 },
    DEFAULT_STREAM_WINDOW,
    "8 MiB",
  ),
  kserveMode: flag("--kserve-mode", {
    env: "DYNAMO_KSERVE_MODE",
    help: "accepted as NVIDIA Dynamo's KServe frontend's command lines pass it (`--grpc-port 8001 --kserve-mode`): this data plane always serves KServe v2",
  }),
  serverName: text(
    "--server-name <name>",
    {
      env: "DYNAMO_SERVER_NAME",
      help: "the name ServerMetadata and GET /v2 report; clients written for Triton may check it is 'triton'",
    },
    "dynamo-kserve",
  ),
  variant: text("--variant <name>", {
    env: "DYNAMO_KSERVE_VARIANT",
    help: `which variant of its model this pod serves (the operator's stable and canary): every gRPC reply's initial metadata and every HTTP reply carry ${VARIANT_HEADER}: <name>`,
  }),
  useTls: flag("--use-tls", {
    env: "DYNAMO_USE_TLS",
    help: "insist on TLS for gRPC and the HTTP port: refuse to start without --cert-file and --key-file (which turn TLS on by themselves)",
  }),
  certFile: text("--cert-file <pem>", {
    env: "DYNAMO_TLS_CERT",
    help: "the server certificate (chain), PEM, reloaded when it changes; with --key-file, gRPC and the HTTP port serve TLS",
  }),
  keyFile: text("--key-file <pem>", { env: "DYNAMO_TLS_KEY", help: "the server certificate's private key, PEM" }),
  clientCaFile: text("--client-ca-file <pem>", {
    env: "DYNAMO_TLS_CLIENT_CA",
    help: "mTLS: only clients with a certificate signed by this CA may connect",
  }),
  authTokenFile: text("--auth-token-file <file>", {
    env: "DYNAMO_AUTH_TOKEN_FILE",
    help: "accept only gRPC calls and HTTP requests with 'authorization: Bearer <token>' for a token in this file (one per line; health checks need none)",
  }),
  modelControlTokenFile: text("--model-control-token-file <file>", {
    env: "DYNAMO_MODEL_CONTROL_TOKEN_FILE",
    help: "model control (RepositoryModelLoad/Unload, POST /v2/repository/models/*/load|unload) needs 'authorization: Bearer <token>' for a token in this file, and inference tokens do not do; without it model control takes the --auth-token-file tokens",
  }),
  credentialsReloadSecs: duration(
    "--credentials-reload-secs <seconds>",
    {
      env: "DYNAMO_CREDENTIALS_RELOAD_SECS",
      help: "how often certificate and token files are reread (Secret rotation)",
    },
    10,
  ),
  otlpTracesEndpoint: text("--otlp-traces-endpoint <url>", {
    env: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    help: "trace each request with OpenTelemetry, exported over OTLP/HTTP (e.g. http://otel-collector:4318/v1/traces); off when unset",
  }),
  otelServiceName: text(
    "--otel-service-name <name>",
    { env: "OTEL_SERVICE_NAME", help: "service.name of the traces" },
    "dynamo-kserve-dataplane",
  ),
  traceSampleRatio: fraction(
    "--trace-sample-ratio <ratio>",
    {
      env: "DYNAMO_TRACE_SAMPLE_RATIO",
      help: "share of new traces recorded, 0 to 1 (a caller's traceparent decision is followed)",
    },
    1,
  ),
  logLevel,
} as const;

/** What `dynamo-kserve dataplane` is started with, typed. */
export type DataPlaneArguments = ValuesOf<typeof DATAPLANE_OPTIONS>;

/** The python engine's part of a command line: every option of PYTHON_ENGINE_OPTIONS, named as there. */
export function pythonEngineArguments(args: DataPlaneArguments): PythonEngineArguments {
  const names = Object.keys(PYTHON_ENGINE_OPTIONS) as (keyof PythonEngineArguments)[];
  return Object.fromEntries(names.map((name) => [name, args[name]])) as PythonEngineArguments;
}

/** The command-line arguments that start a data plane with `values` (the rest take their defaults). */
export function dataPlaneArguments(values: Partial<DataPlaneArguments>): string[] {
  return argumentsOf(DATAPLANE_OPTIONS, values);
}

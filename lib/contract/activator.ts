import { argumentsOf, duration, logLevel, text, wholeNumber, type ValuesOf } from "./options.js";

/**
 * The activator's command line: every option of `dynamo-kserve activator`, declared once. One
 * activator serves one model while it has no ready data-plane pod: it holds the model's requests
 * until a pod is Ready, then relays them to it. The operator builds its pod's arguments from
 * these (activatorArguments); the option reference is generated from them.
 */
export const ACTIVATOR_OPTIONS = {
  namespace: text("--namespace <name>", {
    env: "DYNAMO_ACTIVATOR_NAMESPACE",
    help: "the namespace of the model's data-plane pods (required)",
  }),
  podSelector: text("--pod-selector <selector>", {
    env: "DYNAMO_ACTIVATOR_POD_SELECTOR",
    help: "a label selector for the model's data-plane pods, e.g. dynamokserve.dev/model=resnet (required); the activator's own pods must not match it",
  }),
  kubeconfig: text("--kubeconfig <file>", {
    env: "KUBECONFIG",
    help: "kubeconfig to use (default: ~/.kube/config, then the pod's service account)",
  }),
  host: text("--host <address>", { env: "DYNAMO_ACTIVATOR_HOST", help: "address to listen on" }, "0.0.0.0"),
  grpcPort: wholeNumber(
    "--grpc-port <port>",
    {
      env: "DYNAMO_ACTIVATOR_GRPC_PORT",
      help: "the model's gRPC port (h2c): served here and relayed to the same port of a ready pod (0 picks a free one)",
    },
    { min: 0, max: 65535 },
    8001,
  ),
  httpPort: wholeNumber(
    "--http-port <port>",
    {
      env: "DYNAMO_ACTIVATOR_HTTP_PORT",
      help: "the model's HTTP port (HTTP/1.1): served here and relayed to the same port of a ready pod (0 picks a free one)",
    },
    { min: 0, max: 65535 },
    8000,
  ),
  metricsPort: wholeNumber(
    "--metrics-port <port>",
    {
      env: "DYNAMO_ACTIVATOR_METRICS_PORT",
      help: "HTTP port for /readyz (200 only while no data-plane pod is ready), /healthz and /metrics (0 picks a free one)",
    },
    { min: 0, max: 65535 },
    8002,
  ),
  scalerPort: wholeNumber(
    "--scaler-port <port>",
    {
      env: "DYNAMO_ACTIVATOR_SCALER_PORT",
      help: "gRPC port of KEDA's external scaler service (external-push: active while a request is held) (0 picks a free one)",
    },
    { min: 0, max: 65535 },
    9090,
  ),
  holdTimeoutSecs: duration(
    "--hold-timeout-secs <seconds>",
    {
      env: "DYNAMO_ACTIVATOR_HOLD_TIMEOUT_SECS",
      help: "the longest a request waits for a ready pod: HTTP requests then get 504; gRPC calls wait for their grpc-timeout, at most this long, then get DEADLINE_EXCEEDED",
    },
    120,
  ),
  maxHeldRequests: wholeNumber(
    "--max-held-requests <n>",
    {
      env: "DYNAMO_ACTIVATOR_MAX_HELD_REQUESTS",
      help: "requests held at once, gRPC and HTTP together; more are refused (RESOURCE_EXHAUSTED / 503)",
    },
    { min: 1, max: 1_000_000 },
    1000,
  ),
  maxConcurrentStreams: wholeNumber(
    "--max-concurrent-streams <n>",
    {
      env: "DYNAMO_ACTIVATOR_MAX_CONCURRENT_STREAMS",
      help: "HTTP/2 streams one gRPC client connection may have open at once",
    },
    { min: 1, max: 2 ** 31 - 1 },
    1000,
  ),
  maxHeaderBytes: wholeNumber(
    "--max-header-bytes <bytes>",
    {
      env: "DYNAMO_ACTIVATOR_MAX_HEADER_BYTES",
      help: "the largest header block a client may send (HTTP/2 and HTTP/1.1)",
    },
    { min: 1024, max: 1024 * 1024 },
    64 * 1024,
  ),
  authTokenFile: text("--auth-token-file <file>", {
    env: "DYNAMO_AUTH_TOKEN_FILE",
    help: "refuse requests without 'authorization: Bearer <token>' for a token in this file (the model's token Secret: one per line), before they are held or wake the model",
  }),
  tlsCertFile: text("--tls-cert-file <pem>", {
    env: "DYNAMO_ACTIVATOR_TLS_CERT",
    help: "the model's serving certificate (chain), PEM, reloaded when it changes; with --tls-key-file both ports serve TLS (gRPC: HTTP/2 by ALPN)",
  }),
  tlsKeyFile: text("--tls-key-file <pem>", {
    env: "DYNAMO_ACTIVATOR_TLS_KEY",
    help: "the serving certificate's private key, PEM",
  }),
  upstreamCaFile: text("--upstream-ca-file <pem>", {
    env: "DYNAMO_ACTIVATOR_UPSTREAM_CA",
    help: "relay to the pods over TLS, trusting only this CA (PEM, reloaded when it changes); without it the pods are reached in plaintext",
  }),
  upstreamServerName: text("--upstream-server-name <name>", {
    env: "DYNAMO_ACTIVATOR_UPSTREAM_SERVER_NAME",
    help: "with --upstream-ca-file: the name the pods' certificate must carry, e.g. the model's Service name (default: the pod's IP)",
  }),
  credentialsReloadSecs: duration(
    "--credentials-reload-secs <seconds>",
    {
      env: "DYNAMO_CREDENTIALS_RELOAD_SECS",
      help: "how often the token, certificate and CA files are reread (Secret rotation)",
    },
    10,
  ),
  shutdownGraceSecs: duration(
    "--shutdown-grace-secs <seconds>",
    {
      env: "DYNAMO_ACTIVATOR_SHUTDOWN_GRACE_SECS",
      help: "on SIGTERM, the longest to wait for held and relayed requests to finish (no new ones are accepted)",
    },
    150,
  ),
  logLevel,
} as const;

/** What `dynamo-kserve activator` is started with, typed. */
export type ActivatorArguments = ValuesOf<typeof ACTIVATOR_OPTIONS>;

/** The command-line arguments that start an activator with `values` (the rest take their defaults). */
export function activatorArguments(values: Partial<ActivatorArguments>): string[] {
  return argumentsOf(ACTIVATOR_OPTIONS, values);
}

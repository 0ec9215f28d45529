import type { Logger } from "pino";
import type { ActivatorArguments } from "../../lib/contract/activator.js";
import { startActivator, type Activator } from "./activator.js";
import { KubePods, kubeConfigFrom } from "./kube-pods.js";

/**
 * `dynamo-kserve activator`'s typed options -> a running activator: the pod watch started (and
 * listed once) first, so /readyz never says "no pod is ready" before it knows.
 */
export async function serveActivator(args: ActivatorArguments, logger: Logger): Promise<Activator> {
  if (args.namespace === undefined || args.namespace === "") throw new Error("--namespace is required");
  if (args.podSelector === undefined || args.podSelector === "") throw new Error("--pod-selector is required");
  const pods = new KubePods(kubeConfigFrom(args.kubeconfig), args.namespace, args.podSelector, logger);
  await pods.start();
  return startActivator({
    host: args.host,
    grpcPort: args.grpcPort,
    httpPort: args.httpPort,
    metricsPort: args.metricsPort,
    scalerPort: args.scalerPort,
    holdTimeoutMs: args.holdTimeoutSecs * 1000,
    maxHeldRequests: args.maxHeldRequests,
    maxConcurrentStreams: args.maxConcurrentStreams,
    maxHeaderBytes: args.maxHeaderBytes,
    authTokenFile: args.authTokenFile,
    tlsCertFile: args.tlsCertFile,
    tlsKeyFile: args.tlsKeyFile,
    upstreamCaFile: args.upstreamCaFile,
    upstreamServerName: args.upstreamServerName,
    credentialsReloadMs: args.credentialsReloadSecs * 1000,
    shutdownGraceMs: args.shutdownGraceSecs * 1000,
    pods,
    logger,
  });
}

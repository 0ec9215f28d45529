import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import {
  createConfiguration,
  KubernetesObjectApi,
  ServerConfiguration,
  type Configuration,
  type KubeConfig,
  type RequestContext,
  type SecurityAuthentication,
} from "@kubernetes/client-node";

const IDLE_SOCKET_MS = 60_000;

/** A generated client-node API class (CoreV1Api, CustomObjectsApi, …). */
export type ApiClass<T> = new (configuration: Configuration) => T;

/**
 * client-node's authentication, with one connection pool per KubeConfig.
 *
 * client-node 1.x gives every request a new https.Agent without keep-alive
 * (kubernetes-client/javascript#2893; 2.x caches one, but needs Node 22), so every API call
 * opened a TCP connection and paid a TLS handshake: in the 1,000-model bench that was 13 %
 * of the API server's CPU and a round trip per write. This delegates everything else to
 * client-node (headers, a token file re-read as it rotates, the TLS options) and swaps only
 * the agent for a keep-alive one built from the same TLS options. Agents client-node makes
 * for a proxy are kept as they are.
 */
class PooledAuthentication implements SecurityAuthentication {
  private pooled: HttpAgent | undefined;

  constructor(private readonly config: KubeConfig) {}

  getName(): string {
    return "pooled";
  }

  async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await this.config.applySecurityAuthentication(context);
    const fresh = context.getAgent();
    const plain =
      fresh !== undefined && [HttpsAgent.prototype, HttpAgent.prototype].includes(Object.getPrototypeOf(fresh));
    if (plain) context.setAgent(this.agentLike(fresh));
  }

  /**
   * The pool, made once from the TLS options of the first agent client-node builds. Idle
   * sockets close after a minute, before the API server's own idle timeout (90 s) could
   * close one under a request that was just sent on it.
   */
  private agentLike(fresh: HttpAgent | HttpsAgent): HttpAgent {
    const pool = { keepAlive: true, timeout: IDLE_SOCKET_MS };
    this.pooled ??= fresh instanceof HttpsAgent ? new HttpsAgent({ ...fresh.options, ...pool }) : new HttpAgent(pool);
    return this.pooled;
  }

  destroy(): void {
    this.pooled?.destroy();
  }
}

const authentications = new WeakMap<KubeConfig, PooledAuthentication>();

function authenticationOf(config: KubeConfig): PooledAuthentication {
  let authentication = authentications.get(config);
  if (authentication === undefined) {
    authentication = new PooledAuthentication(config);
    authentications.set(config, authentication);
  }
  return authentication;
}

/** What `config.makeApiClient(type)` makes, with connections kept alive and shared by every client of `config`. */
export function makeApiClient<T>(config: KubeConfig, type: ApiClass<T>): T {
  const cluster = config.getCurrentCluster();
  if (cluster === null) throw new Error("the kubeconfig names no current cluster");
  return new type(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: authenticationOf(config) },
    }),
  );
}

/** What `KubernetesObjectApi.makeApiClient(config)` makes (the context's namespace as default), with pooled connections. */
export function makeObjectsClient(config: KubeConfig): KubernetesObjectApi {
  return makeApiClient(
    config,
    class extends KubernetesObjectApi {
      constructor(configuration: Configuration) {
        super(configuration);
        this.setDefaultNamespace(config);
      }
    },
  );
}

/** Closes the pooled connections of `config`'s clients (idle keep-alive sockets would hold the process open). */
export function closeApiClients(config: KubeConfig): void {
  authentications.get(config)?.destroy();
}

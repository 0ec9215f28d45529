import { CoreV1Api, type KubeConfig, type V1Secret } from "@kubernetes/client-node";
import { makeApiClient } from "./api-clients.js";

/**
 * Secrets read one by one when a reconcile needs them: they are never listed or watched,
 * so the operator needs no list/watch on Secrets (and holds none in memory).
 */
export class SecretReader {
  private readonly core: CoreV1Api;

  constructor(config: KubeConfig) {
    this.core = makeApiClient(config, CoreV1Api);
  }

  /** The Secret, or undefined when there is none of that name. */
  async get(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.core.readNamespacedSecret({ namespace, name });
    } catch (error) {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    }
  }
}

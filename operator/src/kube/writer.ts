import {
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { GROUP, VERSION } from "../api/v1alpha1.js";
import { OPERATOR_NAME, type Owner, type Transition } from "../api/objects.js";
import { APPLIED_HASH_ANNOTATION, applyIfChanged, canonicalJson, hashOf, type ApplyResult } from "./apply.js";
import type { OperatorMetrics } from "./metrics.js";
import { makeApiClient, makeObjectsClient } from "./api-clients.js";

/** How long a cached object may lag behind an apply we made before it counts as drift. */
const CACHE_LAG_WINDOW_MS = 10_000;

/**
 * Every write the operator makes goes through here: server-side apply of owned objects,
 * status updates and Events, each counted in dynamo_operator_api_writes_total.
 */
export class KubeWriter {
  private readonly recentApplies = new Map<string, { hash: string; at: number; object: KubernetesObject }>();
  private readonly objects: KubernetesObjectApi;
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;

  constructor(
    config: KubeConfig,
    private readonly metrics: OperatorMetrics,
    private readonly logger?: Logger,
  ) {
    this.objects = makeObjectsClient(config);
    this.custom = makeApiClient(config, CustomObjectsApi);
    this.core = makeApiClient(config, CoreV1Api);
  }

  /**
   * Applies an owned object unless it would change nothing. For a short while after an
   * apply, a cached copy that does not carry the applied hash yet is taken as the watch
   * lagging behind our own write (not as drift), so the same apply is not sent twice.
   */
  async apply(desired: KubernetesObject, live: KubernetesObject | undefined): Promise<ApplyResult> {
    const key = `${desired.kind}/${desired.metadata?.namespace}/${desired.metadata?.name}`;
    const hash = hashOf(desired);
    const recent = this.recentApplies.get(key);
    const lagging = live?.metadata?.annotations?.[APPLIED_HASH_ANNOTATION] !== hash;
    if (recent !== undefined && recent.hash === hash && lagging && Date.now() - recent.at < CACHE_LAG_WINDOW_MS) {
      return { changed: false, object: recent.object };
    }
    const result = await applyIfChanged(this.objects, desired, live);
    if (result.changed) {
      this.forgetExpiredApplies();
      // Re-inserted so the map stays in apply order, oldest first.
      this.recentApplies.delete(key);
      if (result.object.metadata !== undefined) delete result.object.metadata.managedFields;
      this.recentApplies.set(key, { hash, at: Date.now(), object: result.object });
      this.metrics.apiWrites.inc({ verb: "apply", resource: desired.kind?.toLowerCase() ?? "" });
    }
    return result;
  }

  /**
   * Deletes an owned object its owner no longer wants (the prune; a 404 means it is already
   * gone). Only the very object seen: `live` comes from a cache, which may still hold an
   * object deleted and made again under that name by somebody else since, so the delete
   * carries its uid as a precondition, and the API server's 409 for another uid leaves the
   * newcomer alone (its event brings the cache, and the owner, up to date).
   */
  async remove(live: KubernetesObject): Promise<void> {
    const uid = live.metadata?.uid;
    const onlyThisOne = uid === undefined ? undefined : { preconditions: { uid } };
    try {
      await this.objects.delete(live, undefined, undefined, undefined, undefined, undefined, onlyThisOne);
    } catch (error) {
      const { code } = error as { code?: number };
      if (code === 409) return;
      if (code !== 404) throw error;
    }
    this.recentApplies.delete(`${live.kind}/${live.metadata?.namespace}/${live.metadata?.name}`);
    this.metrics.apiWrites.inc({ verb: "delete", resource: live.kind?.toLowerCase() ?? "" });
  }

  /**
   * Drops applies older than the lag window: past it the cache speaks for the object.
   * Without this, every object ever applied stayed here (with its managedFields): 16 of
   * the operator's 73 MiB of heap at 1,000 models.
   */
  private forgetExpiredApplies(): void {
    const expired = Date.now() - CACHE_LAG_WINDOW_MS;
    for (const [key, { at }] of this.recentApplies) {
      if (at >= expired) break;
      this.recentApplies.delete(key);
    }
  }

  /** Forgets every apply of a kind (its CRD was removed, and its objects with it). */
  forgetKind(kind: string): void {
    for (const key of this.recentApplies.keys()) if (key.startsWith(`${kind}/`)) this.recentApplies.delete(key);
  }

  /** Forgets what was applied for objects of a deleted model. */
  forget(namespace: string, names: readonly string[]): void {
    for (const key of this.recentApplies.keys()) {
      const [, keyNamespace, keyName] = key.split("/");
      if (keyNamespace === namespace && names.includes(keyName ?? "")) this.recentApplies.delete(key);
    }
  }

  /**
   * Applies the status of one of our objects (`plural` names its kind's resource; our field
   * manager owns the whole status) when it differs from what is there.
   */
  async status<S extends object>(owner: Owner & { readonly status?: S }, plural: string, status: S): Promise<boolean> {
    if (canonicalJson(owner.status ?? {}) === canonicalJson(status)) return false;
    const { name, namespace } = owner.metadata;
    this.logger?.debug({ [owner.kind]: name, before: owner.status, after: status }, "status changed");
    await this.custom.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        namespace,
        plural,
        name,
        body: { apiVersion: owner.apiVersion, kind: owner.kind, metadata: { name }, status },
        fieldManager: OPERATOR_NAME,
        force: true,
      },
      setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply),
    );
    this.metrics.apiWrites.inc({ verb: "apply", resource: `${plural}/status` });
    return true;
  }

  /** Records a Kubernetes Event on one of our objects (what `kubectl describe` shows). */
  async event(
    model: Owner & { readonly metadata: { readonly resourceVersion?: string } },
    transition: Transition,
    now: Date,
  ): Promise<void> {
    await this.core.createNamespacedEvent({
      namespace: model.metadata.namespace,
      body: {
        metadata: { generateName: `${model.metadata.name}.`, namespace: model.metadata.namespace },
        involvedObject: {
          apiVersion: model.apiVersion,
          kind: model.kind,
          name: model.metadata.name,
          namespace: model.metadata.namespace,
          uid: model.metadata.uid,
          resourceVersion: model.metadata.resourceVersion,
        },
        type: transition.type,
        reason: transition.reason,
        message: transition.message,
        source: { component: OPERATOR_NAME },
        reportingComponent: OPERATOR_NAME,
        reportingInstance: OPERATOR_NAME,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
    this.metrics.apiWrites.inc({ verb: "create", resource: "events" });
  }
}

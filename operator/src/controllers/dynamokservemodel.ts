import type { KubernetesObject, V1ConfigMap, V1Deployment, V1Service } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../dataplane/src/errors.js";
import type { DynamoKserveModel, DynamoKserveModelStatus } from "../api/v1alpha1.js";
import type { WatchedObjects } from "../kube/informer.js";
import type { KubeWriter } from "../kube/writer.js";
import { checkModelConfig } from "../resources/model-config.js";
import { MODEL_LABEL, objectNames, ownedNames } from "../resources/names.js";
import { desiredConfigMap, desiredDeployment, desiredService, type BuildSettings } from "../resources/objects.js";
import { desiredStatus, type MonitoringOutcome, type PoolOutcome } from "../resources/status.js";
import { desiredServiceMonitor, type ServiceMonitor } from "../resources/service-monitor.js";
import { desiredInferencePool, H2C, poolServiceName, type InferencePool } from "../resources/inference-pool.js";
import type { OptionalKind } from "../kube/optional-kind.js";

/** The caches the controller reads (all kept current by watches). */
export interface ModelCaches {
  readonly models: WatchedObjects<DynamoKserveModel & KubernetesObject>;
  readonly deployments: WatchedObjects<V1Deployment & KubernetesObject>;
  readonly services: WatchedObjects<V1Service & KubernetesObject>;
  readonly configMaps: WatchedObjects<V1ConfigMap & KubernetesObject>;
  /** InferencePools, while their CRD is installed. */
  readonly pools: OptionalKind<InferencePool>;
  /** ServiceMonitors, while their CRD is installed. */
  readonly monitors: OptionalKind<ServiceMonitor>;
}

/** `namespace/name`, the work-queue key of a model. */
export const keyOf = (namespace: string, name: string): string => `${namespace}/${name}`;

/** RFC 3339 to the second, as Kubernetes writes timestamps. */
const timestamp = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * Reconciles one DynamoKserveModel: observe (caches) -> desired (pure builders) -> apply
 * (server-side, skipped when nothing would change) -> status and Events.
 */
export class DynamoKserveModelController {
  constructor(
    private readonly caches: ModelCaches,
    private readonly writer: KubeWriter,
    private readonly settings: BuildSettings,
    private readonly logger: Logger,
  ) {}

  /** The status this controller last wrote per model: the cache may not show it yet. */
  private readonly writtenStatus = new Map<string, DynamoKserveModelStatus>();

  /** Keys of the models an event on an object of `kind` concerns. */
  keysFor(kind: string, object: KubernetesObject): string[] {
    const namespace = object.metadata?.namespace ?? "";
    if (kind === "DynamoKserveModel") return [keyOf(namespace, object.metadata?.name ?? "")];
    const owner = object.metadata?.labels?.[MODEL_LABEL];
    const keys = owner !== undefined ? [keyOf(namespace, owner)] : [];
    if (kind === "InferencePool" && owner === undefined) {
      // A user's pool taking (or freeing) a model's pool name.
      const model = this.caches.models.get(namespace, object.metadata?.name ?? "");
      if (model?.spec.inferencePool !== undefined) keys.push(keyOf(namespace, model.metadata.name));
    }
    if (kind === "ConfigMap") {
      // A user's ConfigMap: every model whose configMapRef names it.
      for (const model of this.caches.models.list(namespace)) {
        if (model.spec.modelConfig.configMapRef?.name === object.metadata?.name) {
          keys.push(keyOf(namespace, model.metadata.name));
        }
      }
    }
    return keys;
  }

  async reconcile(key: string): Promise<void> {
    const [namespace, name] = key.split("/") as [string, string];
    const cached = this.caches.models.get(namespace, name);
    if (cached === undefined || cached.metadata.deletionTimestamp !== undefined) {
      // Owned objects go with the model (owner references); forget what we wrote for it.
      this.writtenStatus.delete(key);
      this.writer.forget(namespace, Object.values(ownedNames(name)));
      return;
    }
    // Judge changes against the status we last wrote, which the cache may not show yet.
    const written = this.writtenStatus.get(key);
    const model: DynamoKserveModel = written !== undefined ? { ...cached, status: written } : cached;
    const names = objectNames(model);
    const ref = model.spec.modelConfig.configMapRef;
    const config = checkModelConfig(
      model,
      ref === undefined ? undefined : this.caches.configMaps.get(namespace, ref.name),
    );

    await this.writer.apply(desiredService(model), this.caches.services.get(namespace, names.service));
    let deployment = this.caches.deployments.get(namespace, names.deployment);
    if (config.valid) {
      await this.writer.apply(desiredConfigMap(model, config), this.caches.configMaps.get(namespace, names.configMap));
      const applied = await this.writer.apply(desiredDeployment(model, this.settings), deployment);
      deployment = applied.object as V1Deployment & KubernetesObject;
    } else {
      // A bad config leaves the running Deployment and its ConfigMap as they are: pods keep
      // serving the last valid config, and the status says why the new one was refused.
      this.logger.warn({ model: key, reason: config.reason, err: config.message }, "model config rejected");
    }

    const inferencePool = await this.reconcilePool(model);
    const monitoring = await this.reconcileMonitoring(model);
    const { status, transitions } = desiredStatus(
      model,
      { config, deployment, inferencePool, monitoring },
      timestamp(),
    );
    await this.writer.status(model, status);
    this.writtenStatus.set(key, status);
    for (const transition of transitions) {
      await this.writer
        .event(model, transition)
        .catch((error: unknown) =>
          this.logger.warn({ model: key, err: errorMessage(error) }, "could not record an event"),
        );
    }
  }

  /** Creates, updates or removes the model's InferencePool; undefined when it asks for none. */
  private async reconcilePool(model: DynamoKserveModel): Promise<PoolOutcome | undefined> {
    const { namespace, name } = model.metadata;
    const live = this.caches.pools.objects()?.get(namespace, name);
    const ours = live !== undefined && live.metadata.labels?.[MODEL_LABEL] === name;
    if (model.spec.inferencePool === undefined) {
      if (ours) await this.writer.remove(live);
      return undefined;
    }
    if (this.caches.pools.crd() === undefined) return { state: "CRDNotInstalled" };
    if (live !== undefined && !ours) return { state: "NameTaken", name };
    const appProtocolSupported = this.caches.pools.specHasField("appProtocol");
    await this.writer.apply(desiredInferencePool(model, { appProtocolSupported }), live);
    const service = poolServiceName(name);
    return appProtocolSupported
      ? { state: "Created", name, appProtocol: H2C, service }
      : { state: "CreatedWithoutAppProtocol", name, service };
  }

  /** Creates, updates or removes the model's ServiceMonitor; undefined when it asks for none. */
  private async reconcileMonitoring(model: DynamoKserveModel): Promise<MonitoringOutcome | undefined> {
    const { namespace, name } = model.metadata;
    const live = this.caches.monitors.objects()?.get(namespace, objectNames(model).service);
    if (model.spec.monitoring === undefined) {
      if (live !== undefined && live.metadata.labels?.[MODEL_LABEL] === name) await this.writer.remove(live);
      return undefined;
    }
    if (this.caches.monitors.crd() === undefined) return { state: "CRDNotInstalled" };
    const desired = desiredServiceMonitor(model);
    await this.writer.apply(desired, live);
    return { state: "Created", name: desired.metadata.name };
  }
}

import type {
  KubernetesObject,
  V1ConfigMap,
  V1Deployment,
  V1PodDisruptionBudget,
  V1Service,
  V2HorizontalPodAutoscaler,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import { parseTokenFile } from "../../../lib/contract/layout.js";
import { KIND, PLURAL, type DynamoKserveModel, type DynamoKserveModelStatus } from "../api/v1alpha1.js";
import { keyOf, mapped, ownedByLabel, type Controller, type Reconciled, type Watch } from "../kube/controller.js";
import type { SecretReader } from "../kube/secrets.js";
import { NameTakenError } from "../kube/apply.js";
import type { WatchedObjects } from "../kube/informer.js";
import type { KubeWriter } from "../kube/writer.js";
import { checkModelConfig } from "../resources/model-config.js";
import { MODEL_LABEL, objectNames, ownedNames } from "../resources/names.js";
import type { BuildSettings } from "../resources/dataplane-pods.js";
import {
  desiredAutoscaler,
  desiredConfigMap,
  desiredDeployment,
  desiredDisruptionBudget,
  desiredService,
} from "../resources/model.js";
import { desiredStatus, type CredentialsOutcome, type PoolOutcome } from "../resources/status.js";
import { issueCa, issueLeaf, needsIssuing, notAfter, type KeyPairPem } from "../resources/certificates.js";
import {
  desiredCaSecret,
  desiredTlsSecret,
  secretText,
  serviceDnsNames,
  tlsMode,
  tokenKey,
} from "../resources/credentials.js";
import { desiredCertificate, type Certificate } from "../resources/certificate-request.js";
import type { ServiceMonitor } from "../resources/service-monitor.js";
import { earliest, nameTakenBy, reconcileServiceMonitor, timestamp } from "./owned-objects.js";
import { desiredInferencePool, poolServiceName, poolTarget, type InferencePool } from "../resources/inference-pool.js";
import type { OptionalKind } from "../kube/optional-kind.js";
import type { ModelFilesChecking } from "../probes/model-files.js";
import { modelFilesRecheck, observeModelFiles } from "./model-files.js";

/** The caches the controller reads (all kept current by watches). */
export interface ModelCaches {
  readonly models: WatchedObjects<DynamoKserveModel & KubernetesObject>;
  readonly deployments: WatchedObjects<V1Deployment & KubernetesObject>;
  readonly services: WatchedObjects<V1Service & KubernetesObject>;
  readonly configMaps: WatchedObjects<V1ConfigMap & KubernetesObject>;
  readonly budgets: WatchedObjects<V1PodDisruptionBudget & KubernetesObject>;
  readonly autoscalers: WatchedObjects<V2HorizontalPodAutoscaler & KubernetesObject>;
  /** InferencePools, while their CRD is installed. */
  readonly pools: OptionalKind<InferencePool>;
  /** ServiceMonitors, while their CRD is installed. */
  readonly monitors: OptionalKind<ServiceMonitor>;
  /** cert-manager Certificates, while their CRD is installed. */
  readonly certificates: OptionalKind<Certificate>;
}

/** How the controller issues tls.mode SelfSigned certificates. */
export interface CertificateSettings {
  readonly validityMs: number;
  readonly renewBeforeMs: number;
}

/** A credentials step that found a Secret or Certificate name taken by somebody else. */
function nameTaken(error: unknown): { ready: false; reason: string; message: string } {
  if (error instanceof NameTakenError) return { ready: false, reason: "NameTaken", message: error.message };
  throw error;
}

/** While a Secret the model needs is missing, look again this often. */
const MISSING_SECRET_RETRY_MS = 10_000;

/**
 * Reconciles one DynamoKserveModel: observe (caches) -> desired (pure builders) -> apply
 * (server-side, skipped when nothing would change) -> the status and its condition
 * changes, which the runtime writes and records as Events.
 */
export class DynamoKserveModelController implements Controller<DynamoKserveModel, DynamoKserveModelStatus> {
  readonly name = "dynamokservemodel";
  readonly kind = KIND;
  readonly statusPlural = PLURAL;
  readonly watches: readonly Watch[] = [
    ownedByLabel(
      MODEL_LABEL,
      "Deployment",
      "Service",
      "ConfigMap",
      "PodDisruptionBudget",
      "HorizontalPodAutoscaler",
      "InferencePool",
      "ServiceMonitor",
      "Certificate",
    ),
    // A user's ConfigMap: every model whose configMapRef (or storage.caBundle) names it.
    mapped(["ConfigMap"], (configMap) =>
      this.caches.models
        .list(configMap.metadata?.namespace)
        .filter(
          (model) =>
            model.spec.modelConfig.configMapRef?.name === configMap.metadata?.name ||
            model.spec.storage?.caBundle?.configMapName === configMap.metadata?.name,
        )
        .map((model) => keyOf(model.metadata.namespace, model.metadata.name)),
    ),
    // A user's InferencePool taking (or freeing) a model's pool name.
    mapped(["InferencePool"], (pool) => {
      if (pool.metadata?.labels?.[MODEL_LABEL] !== undefined) return [];
      const model = this.caches.models.get(pool.metadata?.namespace ?? "", pool.metadata?.name ?? "");
      return model?.spec.inferencePool !== undefined ? [keyOf(model.metadata.namespace, model.metadata.name)] : [];
    }),
  ];

  constructor(
    private readonly caches: ModelCaches,
    /** Secrets are read when needed, not watched (the operator needs no list/watch on Secrets). */
    private readonly secrets: SecretReader,
    private readonly writer: KubeWriter,
    private readonly settings: BuildSettings,
    private readonly certificates: CertificateSettings,
    /** The operator's own look at modelFiles.storageUri. */
    private readonly modelFilesChecker: ModelFilesChecking,
    private readonly logger: Logger,
  ) {}

  objects(): WatchedObjects<DynamoKserveModel & KubernetesObject> {
    return this.caches.models;
  }

  ownedNames(name: string): readonly string[] {
    return Object.values(ownedNames(name));
  }

  async reconcile(model: DynamoKserveModel): Promise<Reconciled<DynamoKserveModelStatus>> {
    const { namespace } = model.metadata;
    const names = objectNames(model);
    const ref = model.spec.modelConfig.configMapRef;
    const config = checkModelConfig(
      model,
      ref === undefined ? undefined : this.caches.configMaps.get(namespace, ref.name),
    );

    const { outcome: credentials, requeueAfterMs: credentialsRequeue } = await this.reconcileCredentials(model);
    const storageUri = model.spec.modelFiles?.storageUri;
    const modelFiles =
      storageUri === undefined
        ? undefined
        : await observeModelFiles(model, storageUri, "model", model.spec.storage, {
            secrets: this.secrets,
            checker: this.modelFilesChecker,
            configMaps: this.caches.configMaps,
          });
    const requeueAfterMs = earliest(credentialsRequeue, modelFilesRecheck(modelFiles, this.modelFilesChecker));
    let deployment = this.caches.deployments.get(namespace, names.deployment);
    const nameTaken = await nameTakenBy(async () => {
      await this.writer.apply(desiredService(model), this.caches.services.get(namespace, names.service));
      if (config.valid) {
        await this.writer.apply(
          desiredConfigMap(model, config),
          this.caches.configMaps.get(namespace, names.configMap),
        );
        const applied = await this.writer.apply(desiredDeployment(model, this.settings), deployment);
        deployment = applied.object as V1Deployment & KubernetesObject;
        await this.writer.applyOrRemove(
          desiredDisruptionBudget(model),
          this.caches.budgets.get(namespace, names.deployment),
        );
        await this.writer.applyOrRemove(
          desiredAutoscaler(model),
          this.caches.autoscalers.get(namespace, names.deployment),
        );
      } else {
        // A bad config leaves the running Deployment and its ConfigMap as they are: pods keep
        // serving the last valid config, and the status says why the new one was refused.
        this.logger.warn(
          { model: `${namespace}/${model.metadata.name}`, reason: config.reason, err: config.message },
          "model config rejected",
        );
      }
    });

    const inferencePool = await this.reconcilePool(model);
    const monitoring = await reconcileServiceMonitor(model, names.service, this.caches.monitors, this.writer);
    const { status, transitions } = desiredStatus(
      model,
      {
        config,
        // Somebody else's Deployment of that name is not this model's.
        deployment: nameTaken === undefined ? deployment : undefined,
        inferencePool,
        monitoring,
        credentials,
        ...(nameTaken !== undefined ? { nameTaken } : {}),
        ...(modelFiles !== undefined ? { modelFiles } : {}),
      },
      timestamp(),
    );
    return { status, transitions, ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {}) };
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
    const { appProtocol } = poolTarget(model);
    return appProtocolSupported
      ? { state: "Created", name, appProtocol, service }
      : { state: "CreatedWithoutAppProtocol", name, appProtocol, service };
  }

  /**
   * The certificate and token Secrets: for SelfSigned, a CA and a serving certificate for
   * the Service's names, re-issued when due (the reconcile asks to run again then); for
   * Secret mode and tokens, the user's Secrets must be there with their keys.
   */
  private async reconcileCredentials(
    model: DynamoKserveModel,
  ): Promise<{ outcome: CredentialsOutcome | undefined; requeueAfterMs?: number }> {
    const { namespace } = model.metadata;
    const mode = tlsMode(model);
    if (mode === "Disabled" && model.spec.auth === undefined) return { outcome: undefined };
    const missing = (reason: string, message: string) => ({
      outcome: { ready: false as const, reason, message },
      requeueAfterMs: MISSING_SECRET_RETRY_MS,
    });
    let tlsSecret: string | undefined;
    let notAfterTime: string | undefined;
    let requeueAfterMs: number | undefined;
    if (mode === "Secret") {
      tlsSecret = model.spec.tls!.secretName!;
      const secret = await this.secrets.get(namespace, tlsSecret);
      const certificate = secretText(secret, "tls.crt");
      if (secret === undefined) return missing("SecretNotFound", `TLS Secret ${tlsSecret} does not exist`);
      if (certificate === undefined || secretText(secret, "tls.key") === undefined) {
        return missing("SecretInvalid", `TLS Secret ${tlsSecret} needs the keys tls.crt and tls.key`);
      }
      try {
        notAfterTime = notAfter(certificate);
      } catch (error) {
        return missing(
          "SecretInvalid",
          `TLS Secret ${tlsSecret}: tls.crt is not a PEM certificate (${errorMessage(error)})`,
        );
      }
    } else if (mode === "CertManager") {
      const issued = await this.requestCertificate(model).catch(nameTaken);
      if (!issued.ready) return missing(issued.reason, issued.message);
      tlsSecret = issued.secret;
      notAfterTime = issued.notAfter;
    } else if (mode === "SelfSigned") {
      const issued = await this.issueSelfSigned(model).catch(nameTaken);
      if (!issued.ready) return missing(issued.reason, issued.message);
      tlsSecret = issued.secret;
      notAfterTime = issued.notAfter;
      requeueAfterMs = issued.renewInMs;
    }
    if (model.spec.auth !== undefined) {
      const { name } = model.spec.auth.tokenSecretRef;
      const secret = await this.secrets.get(namespace, name);
      if (secret === undefined) return missing("TokenSecretNotFound", `token Secret ${name} does not exist`);
      const tokens = secretText(secret, tokenKey(model));
      // Checked as the data plane reads the file, so a Secret it would refuse is not Ready.
      if (tokens === undefined || parseTokenFile(tokens).length === 0) {
        return missing("TokenSecretInvalid", `token Secret ${name} has no tokens under key ${tokenKey(model)}`);
      }
    }
    const parts = [
      ...(tlsSecret !== undefined
        ? [`TLS certificate from Secret ${tlsSecret}${notAfterTime ? ` (expires ${notAfterTime})` : ""}`]
        : []),
      ...(model.spec.auth !== undefined ? [`bearer tokens from Secret ${model.spec.auth.tokenSecretRef.name}`] : []),
    ];
    return {
      outcome: {
        ready: true,
        message: parts.join("; "),
        ...(tlsSecret !== undefined ? { tlsSecret } : {}),
        ...(notAfterTime !== undefined ? { notAfter: notAfterTime } : {}),
      },
      ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {}),
    };
  }

  /** Keeps the model's CA and serving certificate Secrets current; says when to look again. */
  private async issueSelfSigned(
    model: DynamoKserveModel,
  ): Promise<{ ready: true; secret: string; notAfter: string; renewInMs: number }> {
    const { namespace, name } = model.metadata;
    const names = objectNames(model);
    const caLive = await this.secrets.get(namespace, names.caSecret);
    let ca: KeyPairPem | undefined;
    const caCertificate = secretText(caLive, "ca.crt");
    const caKey = secretText(caLive, "ca.key");
    if (caCertificate !== undefined && caKey !== undefined) ca = { certificate: caCertificate, privateKey: caKey };
    if (ca === undefined) {
      ca = await issueCa(`${name}.${namespace} dynamo-kserve CA`);
      await this.writer.apply(desiredCaSecret(model, ca), caLive);
      this.logger.info({ model: `${namespace}/${name}` }, "issued a CA");
    }
    const tlsLive = await this.secrets.get(namespace, names.tlsSecret);
    const current = secretText(tlsLive, "tls.crt");
    const currentKey = secretText(tlsLive, "tls.key");
    let serving =
      current !== undefined && currentKey !== undefined ? { certificate: current, privateKey: currentKey } : undefined;
    const dnsNames = serviceDnsNames(model);
    const why = needsIssuing(serving, ca.certificate, dnsNames, this.certificates.renewBeforeMs);
    if (why !== undefined || secretText(tlsLive, "ca.crt") !== ca.certificate) {
      serving = await issueLeaf(ca, dnsNames[2]!, { dnsNames, validityMs: this.certificates.validityMs });
      await this.writer.apply(desiredTlsSecret(model, serving, ca.certificate), tlsLive);
      this.logger.info({ model: `${namespace}/${name}`, why: why ?? "the CA changed" }, "issued a serving certificate");
    }
    const expires = notAfter(serving!.certificate);
    const renewInMs = Math.max(1000, new Date(expires).getTime() - this.certificates.renewBeforeMs - Date.now());
    return { ready: true, secret: names.tlsSecret, notAfter: expires, renewInMs };
  }

  /** Keeps the model's cert-manager Certificate applied; ready once cert-manager has filled its Secret. */
  private async requestCertificate(
    model: DynamoKserveModel,
  ): Promise<{ ready: true; secret: string; notAfter: string } | { ready: false; reason: string; message: string }> {
    const { namespace } = model.metadata;
    if (this.caches.certificates.crd() === undefined) {
      return {
        ready: false,
        reason: "CertManagerNotInstalled",
        message:
          "tls.mode CertManager needs cert-manager (certificates.cert-manager.io, v1); it is used once installed, without a restart",
      };
    }
    const desired = desiredCertificate(model);
    await this.writer.apply(desired, this.caches.certificates.objects()?.get(namespace, desired.metadata.name));
    const secret = await this.secrets.get(namespace, desired.spec.secretName);
    const certificate = secretText(secret, "tls.crt");
    if (certificate === undefined || secretText(secret, "tls.key") === undefined) {
      return {
        ready: false,
        reason: "CertificatePending",
        message: `waiting for cert-manager to issue Certificate ${desired.metadata.name} into Secret ${desired.spec.secretName}`,
      };
    }
    return { ready: true, secret: desired.spec.secretName, notAfter: notAfter(certificate) };
  }
}

import type { KubernetesObject, V1ConfigMap, V1Deployment, V1Secret } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import { parseTokenFile } from "../../../lib/contract/layout.js";
import { KIND, PLURAL, type DynamoKserveModel, type DynamoKserveModelStatus } from "../api/v1alpha1.js";
import { namesakePoolWatch } from "./inferencepool.js";
import { keyOf, mapped, type Controller, type Planned, type Watch } from "../kube/controller.js";
import type { SecretReader } from "../kube/secrets.js";
import { NameTakenError } from "../kube/apply.js";
import type { WatchedObjects } from "../kube/informer.js";
import type { KubeWriter } from "../kube/writer.js";
import {
  objectLeftRunning,
  uniqueKinds,
  type OwnedKind,
  type PlanGroup,
  type PlanOutcomes,
  type Stopped,
} from "../kube/owned.js";
import type { OwnedCaches } from "../kube/owned-caches.js";
import { checkModelConfig, type ConfigCheck } from "../resources/model-config.js";
import { MODEL_LABEL, objectNames, ownedNames, servedModelName } from "../resources/names.js";
import { DEPLOYMENT_KIND, SERVICE_KIND, scalesToZero, type BuildSettings } from "../resources/dataplane-pods.js";
import { CONFIG_MAP_KIND, desiredConfigMap, desiredDeployment } from "../resources/model.js";
import { DATAPLANE_OWNS, dataplanePlan, monitoringOutcome, type DataplanePlan } from "../resources/dataplane.js";
import { autoscalingInputs, autoscalingObserved } from "./autoscaling.js";
import { activatorName } from "../resources/activator.js";
import { desiredStatus, type CredentialsOutcome, type Observed } from "../resources/status.js";
import { issueCa, issueLeaf, needsIssuing, notAfter, type KeyPairPem } from "../resources/certificates.js";
import {
  desiredCaSecret,
  desiredTlsSecret,
  secretText,
  serviceDnsNames,
  tlsMode,
  tlsSecretName,
  tokenKey,
} from "../resources/credentials.js";
import { CERTIFICATE_KIND, desiredCertificate } from "../resources/certificate-request.js";
import { SERVICE_MONITOR_KIND } from "../resources/service-monitor.js";
import { earliest, timestamp } from "./timing.js";
import { INFERENCE_POOL_KIND } from "../resources/inference-pool.js";
import { POOL_PLAN_OWNS, poolOutcome, poolPlan } from "../resources/pool-plan.js";
import { endpointPickerName } from "../resources/endpoint-picker.js";
import {
  GATEWAY_KIND,
  GRPC_ROUTE_KIND,
  HTTP_ROUTE_KIND,
  gatewayOf,
  ROUTES_OWNS,
  routesOutcome,
  routesPlan,
  type Route,
} from "../resources/routes.js";
import {
  canaryPlan,
  canaryRecheckMs,
  canaryStateOf,
  canaryView,
  canaryWeight,
  type CanaryOutcome,
  type CanaryState,
} from "../resources/canary.js";
import type { ModelFilesChecking } from "../probes/model-files.js";
import { modelFilesRecheck, observeModelFiles } from "./model-files.js";

/** The caches the controller reads besides what it owns (which the manager caches from `owns`). */
export interface ModelCaches {
  readonly models: WatchedObjects<DynamoKserveModel & KubernetesObject>;
  /** Every ConfigMap: a model may name any of its namespace (configMapRef, storage.caBundle). */
  readonly configMaps: WatchedObjects<V1ConfigMap & KubernetesObject>;
  /**
   * Whether the Gateway `namespace/name` exists (spec.routes' parent); undefined when the
   * operator cannot tell (the Gateway CRD is not installed, or it does not watch that namespace).
   */
  readonly gatewayExists: (namespace: string, name: string) => boolean | undefined;
}

/** What a DynamoKserveModel makes objects of. */
export const MODEL_OWNS: readonly OwnedKind[] = uniqueKinds([
  ...DATAPLANE_OWNS,
  CONFIG_MAP_KIND,
  ...POOL_PLAN_OWNS,
  ...ROUTES_OWNS,
  CERTIFICATE_KIND,
]);

/** A model's plan, group by group (applied in this order: certificate, data plane, canary, pool, routes, monitoring). */
interface ModelPlan {
  readonly certificate: PlanGroup;
  readonly dataplane: PlanGroup;
  /** spec.canary's objects (a group of its own: the canary's trouble stops nothing of the stable's). */
  readonly canary: PlanGroup;
  readonly canaryState: CanaryState;
  readonly pool: PlanGroup;
  readonly routes: PlanGroup;
  /**
   * Set when the model's Service is somebody else's (another model's canary may hold the name):
   * no route is written, or the routes would send this model's clients to it.
   */
  readonly routesBlocked?: Stopped;
  readonly monitoring: PlanGroup;
  /** The data plane's plan, for its autoscaling groups and what they planned. */
  readonly dataplanePlan: DataplanePlan;
  /** Whether the installed InferencePool CRD knows appProtocol (the pool was built with it then). */
  readonly appProtocolSupported: boolean;
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
  readonly owns = MODEL_OWNS;
  readonly ownerLabel = MODEL_LABEL;
  readonly watches: readonly Watch[] = [
    // A user's ConfigMap: every model whose configMapRef (or storage.caBundle) names it.
    mapped(["ConfigMap"], (configMap) =>
      this.caches.models
        .list(configMap.metadata?.namespace)
        .filter(
          (model) =>
            model.spec.modelConfig.configMapRef?.name === configMap.metadata?.name ||
            model.spec.canary?.modelConfig?.configMapRef?.name === configMap.metadata?.name ||
            model.spec.storage?.caBundle?.configMapName === configMap.metadata?.name,
        )
        .map((model) => keyOf(model.metadata.namespace, model.metadata.name)),
    ),
    namesakePoolWatch(MODEL_LABEL, (namespace, name) => this.caches.models.get(namespace, name)),
    // A Gateway coming or going: every model whose routes attach to it (RoutesReady says
    // GatewayNotFound). Only then: each route attaching updates the Gateway's status, and
    // N models reconciled on each of N updates would be N² reconciles.
    mapped([GATEWAY_KIND.kind], (gateway) => {
      const namespace = gateway.metadata?.namespace ?? "";
      const name = gateway.metadata?.name ?? "";
      const key = keyOf(namespace, name);
      // The cache holds the event's outcome already (a deleted Gateway is gone from it).
      const exists = this.caches.gatewayExists(namespace, name) === true;
      if (exists === this.knownGateways.has(key)) return [];
      if (exists) this.knownGateways.add(key);
      else this.knownGateways.delete(key);
      return this.caches.models
        .list()
        .filter((model) => {
          if (model.spec.routes === undefined) return false;
          const parent = gatewayOf(model);
          return parent.namespace === namespace && parent.name === name;
        })
        .map((model) => keyOf(model.metadata.namespace, model.metadata.name));
    }),
  ];
  /** The Gateways the watch above has seen exist (`namespace/name`). */
  private readonly knownGateways = new Set<string>();

  constructor(
    private readonly caches: ModelCaches,
    /** Which optional kinds are installed, and what their CRDs know. */
    private readonly owned: Pick<OwnedCaches, "installed" | "specHasField" | "get" | "takenByAnother">,
    /**
     * Secrets are read when needed, never watched: the operator has no list/watch on
     * Secrets, so they are no owned kind; the credentials step applies the CA and TLS
     * Secrets of tls.mode SelfSigned itself (they go with the model by garbage collection).
     */
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
    return [
      ...new Set([
        ...Object.values(ownedNames(name)),
        ...Object.values(ownedNames(name, "canary")),
        activatorName(ownedNames(name).deployment),
        endpointPickerName(name),
      ]),
    ];
  }

  async reconcile(model: DynamoKserveModel): Promise<Planned<DynamoKserveModelStatus>> {
    const { namespace } = model.metadata;
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
    if (!config.valid) {
      this.logger.warn(
        { model: `${namespace}/${model.metadata.name}`, reason: config.reason, err: config.message },
        "model config rejected",
      );
    }
    const groups = this.planOf(model, config);
    return {
      plan: [
        groups.certificate,
        groups.dataplane,
        groups.canary,
        groups.pool,
        groups.routes,
        groups.monitoring,
        groups.dataplanePlan.autoscaling,
        groups.dataplanePlan.activation,
      ],
      settle: (outcomes) => {
        const certificateStopped = outcomes.stopped(groups.certificate);
        // A Certificate of that name that is somebody else's: the Secret it fills is not ours to trust.
        const credentialsNow: CredentialsOutcome | undefined =
          certificateStopped !== undefined ? { ready: false, ...certificateStopped } : credentials;
        const retry = earliest(
          certificateStopped !== undefined ? earliest(requeueAfterMs, MISSING_SECRET_RETRY_MS) : requeueAfterMs,
          canaryRecheckMs(groups.canaryState, Date.now()),
        );
        const observed = { config, credentials: credentialsNow, modelFiles };
        const { status, transitions } = this.statusOf(model, observed, groups, outcomes);
        return { status, transitions, ...(retry !== undefined ? { requeueAfterMs: retry } : {}) };
      },
    };
  }

  /** The objects the model wants now, in the groups a NameTaken stops. */
  private planOf(model: DynamoKserveModel, config: ConfigCheck): ModelPlan {
    const names = objectNames(model);
    const tlsSecret = tlsSecretName(model);
    const planned = dataplanePlan(
      {
        owner: model,
        name: names.deployment,
        tls: tlsSecret !== undefined,
        autoscaling: autoscalingInputs(model, names.deployment, {
          owned: this.owned,
          settings: this.settings,
          model: servedModelName(model),
          activator: {
            ...(model.spec.auth !== undefined
              ? { tokens: { secretName: model.spec.auth.tokenSecretRef.name, key: tokenKey(model) } }
              : {}),
            ...(tlsSecret !== undefined
              ? { tls: { secretName: tlsSecret, serverName: serviceDnsNames(model)[2]! } }
              : {}),
          },
        }),
      },
      // A bad config leaves the running Deployment and its ConfigMap as they are: pods keep
      // serving the last valid config, and the status says why the new one was refused.
      config.valid
        ? { configMaps: [desiredConfigMap(model, config)], deployment: desiredDeployment(model, this.settings) }
        : { keep: { configMaps: [names.configMap] } },
    );
    const appProtocolSupported = this.owned.specHasField(INFERENCE_POOL_KIND, "appProtocol");
    const canaryState = this.canaryState(model);
    const weight = canaryWeight(model, canaryState);
    return {
      certificate: tlsMode(model) === "CertManager" ? [{ apply: desiredCertificate(model) }] : [],
      dataplane: planned.dataplane,
      canary: canaryPlan(model, canaryState, this.settings),
      canaryState,
      dataplanePlan: planned,
      pool: poolPlan(model, {
        installed: this.owned.installed(INFERENCE_POOL_KIND),
        poolTakenByAnother: this.owned.takenByAnother(
          INFERENCE_POOL_KIND,
          model.metadata.namespace,
          model.metadata.name,
          model.metadata.uid,
        ),
        appProtocolSupported,
        settings: this.settings,
      }),
      ...this.routesOf(model, weight),
      monitoring: planned.monitoring,
      appProtocolSupported,
    };
  }

  /** The routes' group, empty while the model's Service (their backend) is somebody else's. */
  private routesOf(model: DynamoKserveModel, canary: number | undefined): Pick<ModelPlan, "routes" | "routesBlocked"> {
    const { namespace, uid } = model.metadata;
    const service = objectNames(model).service;
    if (model.spec.routes === undefined || !this.owned.takenByAnother(SERVICE_KIND, namespace, service, uid)) {
      return { routes: routesPlan(model, canary) };
    }
    return {
      routes: [],
      routesBlocked: {
        reason: "NameTaken",
        message: `the model's Service ${service} belongs to somebody else: no route is written to it`,
      },
    };
  }

  /** The canary's phase, from the canary's Deployment, config and the model's routes as cached. */
  private canaryState(model: DynamoKserveModel): CanaryState {
    const { namespace, name } = model.metadata;
    const now = Date.now();
    return canaryStateOf(model, {
      deployment: this.owned.get<V1Deployment & KubernetesObject>(
        DEPLOYMENT_KIND,
        namespace,
        objectNames(model, "canary").deployment,
      ),
      config: () => {
        const view = canaryView(model);
        const ref = view.spec.modelConfig.configMapRef;
        return checkModelConfig(view, ref === undefined ? undefined : this.caches.configMaps.get(namespace, ref.name));
      },
      routes: [GRPC_ROUTE_KIND, HTTP_ROUTE_KIND].map((kind) => this.owned.get<Route>(kind, namespace, name)),
      now,
      nowText: timestamp(),
    });
  }

  /** The status from what was observed and what became of the plan. */
  private statusOf(
    model: DynamoKserveModel,
    observed: Pick<Observed, "config" | "credentials" | "modelFiles">,
    groups: ModelPlan,
    outcomes: PlanOutcomes,
  ): ReturnType<typeof desiredStatus> {
    const names = objectNames(model);
    const stopped = outcomes.stopped(groups.dataplane);
    const autoscaling = autoscalingObserved(model, names.deployment, groups.dataplanePlan, outcomes);
    return desiredStatus(
      model,
      {
        config: observed.config,
        deployment: objectLeftRunning(
          outcomes,
          groups.dataplane,
          { kind: DEPLOYMENT_KIND, name: names.deployment },
          () =>
            this.owned.get<V1Deployment & KubernetesObject>(
              DEPLOYMENT_KIND,
              model.metadata.namespace,
              names.deployment,
            ),
        ),
        inferencePool: poolOutcome(model, groups.pool, outcomes, groups.appProtocolSupported),
        routes:
          groups.routesBlocked !== undefined
            ? { state: groups.routesBlocked.reason, message: groups.routesBlocked.message }
            : routesOutcome(model, groups.routes, outcomes, this.gatewayFound(model)),
        ...(groups.canaryState.phase !== "None" ? { canary: canaryOutcome(model, groups, outcomes) } : {}),
        monitoring: monitoringOutcome(outcomes.of(SERVICE_MONITOR_KIND, names.service)),
        credentials: observed.credentials,
        ...(stopped !== undefined ? { stopped } : {}),
        ...(observed.modelFiles !== undefined ? { modelFiles: observed.modelFiles } : {}),
        ...(autoscaling !== undefined ? { autoscaling } : {}),
      },
      timestamp(),
    );
  }

  /** Whether the Gateway of spec.routes exists (undefined: the model has no routes, or the operator cannot tell). */
  private gatewayFound(model: DynamoKserveModel): boolean | undefined {
    if (model.spec.routes === undefined) return undefined;
    const { namespace, name } = gatewayOf(model);
    return this.caches.gatewayExists(namespace, name);
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
    /** The serving Secret as read, when somebody else wrote it (the user, cert-manager). */
    let servingSecret: V1Secret | undefined;
    let notAfterTime: string | undefined;
    let requeueAfterMs: number | undefined;
    if (mode === "Secret") {
      tlsSecret = model.spec.tls!.secretName!;
      servingSecret = await this.secrets.get(namespace, tlsSecret);
      const certificate = secretText(servingSecret, "tls.crt");
      if (servingSecret === undefined) return missing("SecretNotFound", `TLS Secret ${tlsSecret} does not exist`);
      if (certificate === undefined || secretText(servingSecret, "tls.key") === undefined) {
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
      const issued = await this.certificateIssued(model);
      if (!issued.ready) return missing(issued.reason, issued.message);
      tlsSecret = issued.secret;
      servingSecret = issued.object;
      notAfterTime = issued.notAfter;
    } else if (mode === "SelfSigned") {
      const issued = await this.issueSelfSigned(model).catch(nameTaken);
      if (!issued.ready) return missing(issued.reason, issued.message);
      tlsSecret = issued.secret;
      notAfterTime = issued.notAfter;
      requeueAfterMs = issued.renewInMs;
    }
    // The activator reaches the pods over TLS and checks their certificate against ca.crt:
    // without it, it cannot start, and a model at zero has nothing to answer its Service. A
    // user's Secret may lack it, and so may cert-manager's (ACME issuers put none there).
    if (servingSecret !== undefined && scalesToZero(model.spec) && secretText(servingSecret, "ca.crt") === undefined) {
      return missing(
        "SecretInvalid",
        `TLS Secret ${tlsSecret} needs the key ca.crt (the CA that issued tls.crt) with autoscaling.minReplicas 0: the activator checks the pods' certificate against it${mode === "CertManager" ? "; the Certificate's issuer put none there (use an issuer that does, such as a CA issuer)" : ""}`,
      );
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

  /** Whether cert-manager has filled the Secret of the model's Certificate (which the plan applies). */
  private async certificateIssued(
    model: DynamoKserveModel,
  ): Promise<
    | { ready: true; secret: string; object: V1Secret; notAfter: string }
    | { ready: false; reason: string; message: string }
  > {
    const { namespace } = model.metadata;
    if (!this.owned.installed(CERTIFICATE_KIND)) {
      return {
        ready: false,
        reason: "CertManagerNotInstalled",
        message:
          "tls.mode CertManager needs cert-manager (certificates.cert-manager.io, v1); it is used once installed, without a restart",
      };
    }
    const desired = desiredCertificate(model);
    const secret = await this.secrets.get(namespace, desired.spec.secretName);
    const certificate = secretText(secret, "tls.crt");
    if (secret === undefined || certificate === undefined || secretText(secret, "tls.key") === undefined) {
      return {
        ready: false,
        reason: "CertificatePending",
        message: `waiting for cert-manager to issue Certificate ${desired.metadata.name} into Secret ${desired.spec.secretName}`,
      };
    }
    return { ready: true, secret: desired.spec.secretName, object: secret, notAfter: notAfter(certificate) };
  }
}

/** What became of the canary's objects. */
function canaryOutcome(model: DynamoKserveModel, groups: ModelPlan, outcomes: PlanOutcomes): CanaryOutcome {
  const { canaryState: state } = groups;
  const stopped = outcomes.stopped(groups.canary);
  return {
    state,
    weight: canaryWeight(model, state) ?? 0,
    deployment: objectLeftRunning(
      outcomes,
      groups.canary,
      { kind: DEPLOYMENT_KIND, name: objectNames(model, "canary").deployment },
      () => (state.phase === "None" ? undefined : state.deployment),
    ),
    ...(stopped !== undefined ? { stopped } : {}),
  };
}

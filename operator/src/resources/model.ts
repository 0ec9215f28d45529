import type {
  V1ConfigMap,
  V1Deployment,
  V1PodDisruptionBudget,
  V1Service,
  V1Volume,
  V2HorizontalPodAutoscaler,
} from "@kubernetes/client-node";
import { modelFilesArgument, modelFilesFolder } from "../../../lib/contract/layout.js";
import type { DynamoKserveModel } from "../api/v1alpha1.js";
import { AUTH_MOUNT, TLS_MOUNT, tlsSecretName, tokenKey } from "./credentials.js";
import {
  dataplaneAutoscaler,
  dataplaneDeployment,
  dataplaneDisruptionBudget,
  dataplaneService,
  secretVolume,
  type BuildSettings,
  type MountedVolume,
} from "./dataplane-pods.js";
import type { OwnedKind } from "../kube/owned.js";
import type { ValidConfig } from "./model-config.js";
import {
  MODEL_FILES_ROOT,
  MODEL_REPOSITORY_PATH,
  objectNames,
  ownedMetadata,
  servedModelName,
  type Variant,
} from "./names.js";
import { objectStoragePods } from "./storage.js";

/**
 * A DynamoKserveModel's own objects: the ConfigMap with its config, its Service and its
 * data-plane Deployment (its Secrets and model files mounted). Pure desired-state builders:
 * the model (plus what was observed) in, the objects out; the controller applies them.
 */

export const CONFIG_MAP_KIND: OwnedKind = { apiVersion: "v1", kind: "ConfigMap", plural: "configmaps" };

/** The ConfigMap mounted as the data plane's model repository: one file, the model's config. */
export function desiredConfigMap(
  model: DynamoKserveModel,
  config: ValidConfig,
  variant: Variant = "stable",
): V1ConfigMap {
  return {
    apiVersion: CONFIG_MAP_KIND.apiVersion,
    kind: CONFIG_MAP_KIND.kind,
    metadata: ownedMetadata(model, objectNames(model, variant).configMap),
    ...(config.text !== undefined ? { data: { [config.fileName]: config.text } } : {}),
    ...(config.binaryBase64 !== undefined ? { binaryData: { [config.fileName]: config.binaryBase64 } } : {}),
  };
}

/** The model's Service. */
export function desiredService(model: DynamoKserveModel): V1Service {
  return dataplaneService(model, model.spec, objectNames(model).service, tlsSecretName(model) !== undefined);
}

/** The model's PodDisruptionBudget, named like its Deployment (none for a single replica). */
export function desiredDisruptionBudget(model: DynamoKserveModel): V1PodDisruptionBudget | undefined {
  return dataplaneDisruptionBudget(model, model.spec, objectNames(model).deployment);
}

/** The model's HorizontalPodAutoscaler, named like its Deployment (none without spec.autoscaling). */
export function desiredAutoscaler(model: DynamoKserveModel): V2HorizontalPodAutoscaler | undefined {
  return dataplaneAutoscaler(model, model.spec, objectNames(model).deployment);
}

/**
 * A variant of the model's data-plane Deployment (the stable one, or spec.canary's, built from
 * canaryView): its ConfigMap as the repository, the model's Secrets and files.
 */
export function desiredDeployment(
  model: DynamoKserveModel,
  settings: BuildSettings,
  variant: Variant = "stable",
): V1Deployment {
  const { spec } = model;
  const names = objectNames(model, variant);
  const tlsSecret = tlsSecretName(model);
  const secretVolumes: MountedVolume[] = [
    ...(tlsSecret !== undefined ? [secretVolume("tls", tlsSecret, TLS_MOUNT)] : []),
    ...(spec.auth !== undefined ? [secretVolume("auth", spec.auth.tokenSecretRef.name, AUTH_MOUNT)] : []),
  ];
  const modelFiles = modelFilesVolume(model);
  // Files in object storage: synced by the data plane into its cache, from where --model-files names.
  const storageUri = spec.modelFiles?.storageUri;
  const storage = storageUri !== undefined ? objectStoragePods(spec.storage) : undefined;
  return dataplaneDeployment(
    model,
    spec,
    names.deployment,
    {
      variant,
      arguments: {
        modelRepository: [MODEL_REPOSITORY_PATH],
        ...(spec.auth !== undefined ? { authTokenFile: `${AUTH_MOUNT}/${tokenKey(model)}` } : {}),
        ...(modelFiles !== undefined ? { modelFilesRoot: MODEL_FILES_ROOT } : {}),
        ...(storageUri !== undefined
          ? { modelFiles: [modelFilesArgument({ model: servedModelName(model), location: storageUri })] }
          : {}),
        ...storage?.arguments,
      },
      sourceVolumes: [
        {
          volume: { name: "model-config", configMap: { name: names.configMap } },
          mount: { name: "model-config", mountPath: MODEL_REPOSITORY_PATH, readOnly: true },
        },
      ],
      ...(tlsSecret !== undefined ? { tlsSecret } : {}),
      extraVolumes: [...secretVolumes, ...(modelFiles !== undefined ? [modelFiles] : []), ...(storage?.volumes ?? [])],
    },
    settings,
  );
}

/**
 * spec.modelFiles as a volume mounted at /model-files/<model name> (the data plane's
 * --model-files-root), so the model's version folders sit where it looks for them; none
 * for files in object storage.
 */
function modelFilesVolume(model: DynamoKserveModel): MountedVolume | undefined {
  const files = model.spec.modelFiles;
  if (files === undefined || files.storageUri !== undefined) return undefined;
  const name = "model-files";
  const source: Omit<V1Volume, "name"> =
    files.persistentVolumeClaim !== undefined
      ? { persistentVolumeClaim: { claimName: files.persistentVolumeClaim.claimName, readOnly: true } }
      : files.image !== undefined
        ? {
            image: {
              reference: files.image.reference,
              ...(files.image.pullPolicy !== undefined ? { pullPolicy: files.image.pullPolicy } : {}),
            },
          }
        : {
            configMap: {
              name: files.configMap!.name,
              items: files.configMap!.items.map(({ key, path }) => ({ key, path })),
            },
          };
  return {
    volume: { name, ...source },
    mount: {
      name,
      mountPath: modelFilesFolder(MODEL_FILES_ROOT, servedModelName(model)),
      readOnly: true,
      ...(files.subPath !== undefined ? { subPath: files.subPath } : {}),
    },
  };
}

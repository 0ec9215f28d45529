import type { V1Secret } from "@kubernetes/client-node";
import type { DataPlaneArguments } from "../../../lib/contract/dataplane.js";
import {
  parseStorageLocation,
  StorageLocationError,
  type RemoteLocation,
  type RemoteScheme,
} from "../../../lib/storage/locations.js";
import { CREDENTIAL_KEYS, type ObjectStoreOptions } from "../../../lib/storage/store.js";
import { quantityValue } from "../api/quantity.js";
import { SPEC_DEFAULTS, type Condition, type DynamoKserveModelSpec } from "../api/v1alpha1.js";
import { secretVolume, type MountedVolume } from "./dataplane-pods.js";

/**
 * Models in object storage, as both kinds ask for them (a DynamoKserveRepository's
 * storageUri, a DynamoKserveModel's modelFiles.storageUri) with spec.storage: what the
 * data-plane pods carry (a size-bounded cache, the credentials Secret and CA bundle as
 * files, the storage options), and what the operator's own look at the location found
 * (the ModelFilesReady condition). Pure.
 */

/** spec.storage; the two kinds declare the same schema. */
export type StorageSpec = NonNullable<DynamoKserveModelSpec["storage"]>;

/** Where the data plane keeps what it synced (an emptyDir of storage.cacheSize). */
export const MODEL_CACHE_PATH = "/model-cache";
/** Where storage.secretName's keys appear as files (--storage-secret-dir). */
export const STORAGE_SECRET_MOUNT = "/etc/dynamo-kserve/storage-credentials";
/** Where storage.caBundle's key appears as ca.crt (--storage-ca-file). */
export const STORAGE_CA_MOUNT = "/etc/dynamo-kserve/storage-ca";
const CA_FILE = "ca.crt";

/** The cache's bound in bytes (storage.cacheSize, 10Gi by default); 0 for none. */
export function cacheBytes(storage: StorageSpec | undefined): number {
  const size = quantityValue(String(storage?.cacheSize ?? SPEC_DEFAULTS.storage.cacheSize));
  return size === undefined || size <= 0 ? 0 : Math.floor(size);
}

/**
 * What a data plane reading object storage adds to its pod: the cache emptyDir (its
 * sizeLimit the cache's bound, so the data plane refuses a model before the kubelet would
 * evict the pod), the Secret mounted read-only as files (a rotated Secret reaches running
 * pods without a restart, and no value is ever in the pod spec), the CA bundle, and the
 * options that say where each is.
 */
export function objectStoragePods(storage: StorageSpec | undefined): {
  arguments: Partial<DataPlaneArguments>;
  volumes: MountedVolume[];
} {
  const bytes = cacheBytes(storage);
  const cache: MountedVolume = {
    volume: {
      name: "model-cache",
      emptyDir: bytes > 0 ? { sizeLimit: String(storage?.cacheSize ?? SPEC_DEFAULTS.storage.cacheSize) } : {},
    },
    mount: { name: "model-cache", mountPath: MODEL_CACHE_PATH },
  };
  const ca = storage?.caBundle;
  const volumes: MountedVolume[] = [
    cache,
    ...(storage?.secretName !== undefined
      ? [secretVolume("storage-credentials", storage.secretName, STORAGE_SECRET_MOUNT)]
      : []),
    ...(ca !== undefined
      ? [
          {
            volume: {
              name: "storage-ca",
              configMap: {
                name: ca.configMapName,
                items: [{ key: ca.key ?? SPEC_DEFAULTS.storage.caBundle.key, path: CA_FILE }],
              },
            },
            mount: { name: "storage-ca", mountPath: STORAGE_CA_MOUNT, readOnly: true },
          },
        ]
      : []),
  ];
  return {
    arguments: {
      modelCacheDir: MODEL_CACHE_PATH,
      ...(bytes > 0 ? { modelCacheMaxBytes: bytes } : {}),
      ...(storage?.secretName !== undefined ? { storageSecretDir: STORAGE_SECRET_MOUNT } : {}),
      ...(ca !== undefined ? { storageCaFile: `${STORAGE_CA_MOUNT}/${CA_FILE}` } : {}),
      ...storeSettings(storage),
      ...(storage?.pollSeconds !== undefined ? { repositoryPollSecs: storage.pollSeconds } : {}),
    },
    volumes,
  };
}

/** A storageUri as a remote location, or why it is not one. */
export function remoteLocationOf(uri: string): RemoteLocation | { readonly invalid: string } {
  try {
    const location = parseStorageLocation(uri);
    if (location.scheme === "file") return { invalid: `'${uri}' is not an s3://, gs:// or as:// location` };
    return location;
  } catch (error) {
    if (error instanceof StorageLocationError) return { invalid: error.message };
    throw error;
  }
}

/** The Secret's credential keys for the location's scheme, decoded; nothing else is read. */
export function credentialValues(secret: V1Secret, scheme: RemoteScheme): Record<string, string> {
  return Object.fromEntries(
    CREDENTIAL_KEYS[scheme].flatMap((key) => {
      const value = secret.data?.[key];
      return value === undefined ? [] : [[key, Buffer.from(value, "base64").toString("utf8")]];
    }),
  );
}

/** Why the Secret's keys cannot sign in to the scheme's store (names keys, never values). */
export function missingCredentials(values: Readonly<Record<string, string>>, scheme: RemoteScheme): string | undefined {
  const has = (key: string) => (values[key] ?? "") !== "";
  switch (scheme) {
    case "s3":
      return has("AWS_ACCESS_KEY_ID") && has("AWS_SECRET_ACCESS_KEY")
        ? undefined
        : "needs the keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials)";
    case "gs":
      return has("service-account.json")
        ? undefined
        : "needs the key service-account.json (a service account's JSON key)";
    case "as":
      return CREDENTIAL_KEYS.as.some(has)
        ? undefined
        : "needs one of the keys AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_ACCOUNT_KEY and AZURE_STORAGE_SAS_TOKEN";
  }
}

/** How the operator's check reaches the store: the CR's settings and the Secret's values. */
export function checkStoreOptions(
  storage: StorageSpec | undefined,
  secretValues: Readonly<Record<string, string>>,
): Omit<ObjectStoreOptions, "caFile"> {
  return { secretValues, ...storeSettings(storage) };
}

/** Endpoints, region and addressing: named alike as the data plane's options and the stores' options. */
function storeSettings(
  storage: StorageSpec | undefined,
): Pick<ObjectStoreOptions, "s3Endpoint" | "s3Region" | "s3PathStyle" | "gcsEndpoint" | "azureEndpoint"> {
  return {
    ...(storage?.s3?.endpoint !== undefined ? { s3Endpoint: storage.s3.endpoint } : {}),
    ...(storage?.s3?.region !== undefined ? { s3Region: storage.s3.region } : {}),
    ...(storage?.s3?.pathStyle === true ? { s3PathStyle: true } : {}),
    ...(storage?.gcs?.endpoint !== undefined ? { gcsEndpoint: storage.gcs.endpoint } : {}),
    ...(storage?.azure?.endpoint !== undefined ? { azureEndpoint: storage.azure.endpoint } : {}),
  };
}

/**
 * What a listing of the location shows, by what the location should hold: a repository's
 * models (`<model>/config.pbtxt`, `<model>/<version>/...`, or a single-file `<model>.pbtxt`),
 * or one model's version folders (`<version>/...`). `keys` are relative to the location.
 */
export function foundUnder(keys: readonly string[], holds: "repository" | "model"): string[] {
  const found = new Set<string>();
  for (const key of keys) {
    const [first, second, third] = key.split("/");
    if (first === undefined || first === "") continue;
    if (holds === "model") {
      if (/^\d+$/.test(first) && second !== undefined && second !== "") found.add(first);
    } else if (second === undefined) {
      if (first.endsWith(".pbtxt")) found.add(first.slice(0, -".pbtxt".length));
    } else if (second === "config.pbtxt" || (/^\d+$/.test(second) && third !== undefined && third !== "")) {
      found.add(first);
    }
  }
  return [...found].sort((a, b) => (holds === "model" ? Number(a) - Number(b) : a.localeCompare(b)));
}

/** What the operator's look at a location came to. */
export type ModelFilesOutcome =
  | {
      readonly state: "Found";
      readonly location: string;
      readonly holds: "repository" | "model";
      readonly found: readonly string[];
    }
  | {
      readonly state: "CheckedByPods";
      readonly location: string;
      /** Why the operator leaves it to the pods; default: no Secret to act with. */
      readonly why?: string;
    }
  | { readonly state: "Failed"; readonly reason: ModelFilesFailure; readonly message: string };

export type ModelFilesFailure =
  | "InvalidStorageUri"
  | "SecretMissing"
  | "SecretInvalid"
  | "CaBundleMissing"
  | "AccessDenied"
  | "NoSuchBucket"
  | "EndpointUnreachable"
  | "NoModelsFound"
  | "CheckFailed";

/** The most names a Ready message lists. */
const NAMES_IN_MESSAGE = 10;

/** ModelFilesReady from the check's outcome. Messages name locations, Secrets and keys, never values. */
export function modelFilesCondition(outcome: ModelFilesOutcome): Pick<Condition, "status" | "reason" | "message"> {
  switch (outcome.state) {
    case "Found": {
      const names = outcome.found.slice(0, NAMES_IN_MESSAGE).join(", ");
      const more =
        outcome.found.length > NAMES_IN_MESSAGE ? `, and ${outcome.found.length - NAMES_IN_MESSAGE} more` : "";
      const what = outcome.holds === "repository" ? "models" : "version folders";
      return { status: "True", reason: "Ready", message: `${outcome.location} holds ${what} ${names}${more}` };
    }
    case "CheckedByPods":
      return {
        status: "Unknown",
        reason: "CheckedByPods",
        message: `${outcome.why ?? "no storage.secretName"}: the pods read ${outcome.location} with their own identity (workload identity through pod.serviceAccountName, or the cloud's credential chain), which the operator cannot act as; the pods' model states say whether it loads`,
      };
    case "Failed":
      return { status: "False", reason: outcome.reason, message: outcome.message };
  }
}

import type { KubernetesObject, V1ConfigMap } from "@kubernetes/client-node";
import type { Owner } from "../api/objects.js";
import type { WatchedObjects } from "../kube/informer.js";
import type { SecretReader } from "../kube/secrets.js";
import type { ModelFilesChecking } from "../probes/model-files.js";
import {
  checkStoreOptions,
  credentialValues,
  missingCredentials,
  remoteLocationOf,
  type ModelFilesOutcome,
  type StorageSpec,
} from "../resources/storage.js";
import { SPEC_DEFAULTS } from "../api/v1alpha1.js";
import { formatStorageLocation } from "../../../lib/storage/locations.js";

/** What both controllers need to look at a CR's object storage. */
export interface ModelFilesObserving {
  readonly secrets: SecretReader;
  readonly checker: ModelFilesChecking;
  readonly configMaps: WatchedObjects<V1ConfigMap & KubernetesObject>;
}

/**
 * ModelFilesReady's input for a CR whose models are in object storage: the URI parsed, the
 * CA bundle and the Secret looked up (what pods cannot start without), then the operator's
 * own bounded listing with the Secret's values (cached by the checker). Without a Secret
 * the pods' own identity reads the bucket, which the operator cannot act as.
 */
export async function observeModelFiles(
  owner: Owner & { readonly metadata: { readonly generation?: number } },
  uri: string,
  holds: "repository" | "model",
  storage: StorageSpec | undefined,
  observing: ModelFilesObserving,
): Promise<ModelFilesOutcome> {
  const { namespace } = owner.metadata;
  const location = remoteLocationOf(uri);
  if ("invalid" in location) return { state: "Failed", reason: "InvalidStorageUri", message: location.invalid };
  const ca = storage?.caBundle;
  let caPem: string | undefined;
  let caVersion = "";
  if (ca !== undefined) {
    const key = ca.key ?? SPEC_DEFAULTS.storage.caBundle.key;
    const configMap = observing.configMaps.get(namespace, ca.configMapName);
    caPem = configMap?.data?.[key];
    if (caPem === undefined) {
      return {
        state: "Failed",
        reason: "CaBundleMissing",
        message: `ConfigMap ${ca.configMapName} (storage.caBundle) ${configMap === undefined ? "does not exist" : `has no key ${key}`}; pods cannot start without it`,
      };
    }
    caVersion = configMap?.metadata?.resourceVersion ?? "";
  }
  const secretName = storage?.secretName;
  if (secretName === undefined) return { state: "CheckedByPods", location: formatStorageLocation(location) };
  if (location.scheme === "gs" && caPem !== undefined) {
    // The Cloud Storage SDK trusts a CA only process-wide (lib/storage/gcs.ts): in the
    // operator, one CR's CA would then be trusted for every other CR's connections.
    const why =
      "the operator does not trust a storage.caBundle for gs:// (the Cloud Storage SDK can only trust it process-wide)";
    return { state: "CheckedByPods", location: formatStorageLocation(location), why };
  }
  const secret = await observing.secrets.get(namespace, secretName);
  if (secret === undefined) {
    return {
      state: "Failed",
      reason: "SecretMissing",
      message: `Secret ${secretName} (storage.secretName) does not exist in namespace ${namespace}; pods cannot start until it does`,
    };
  }
  const secretValues = credentialValues(secret, location.scheme);
  const missing = missingCredentials(secretValues, location.scheme);
  if (missing !== undefined) {
    return {
      state: "Failed",
      reason: "SecretInvalid",
      message: `Secret ${secretName} (storage.secretName) ${missing}`,
    };
  }
  return observing.checker.check({
    owner: `${owner.kind}/${namespace}/${owner.metadata.name}`,
    fingerprint: `${owner.metadata.uid}/${owner.metadata.generation ?? 0}/${secret.metadata?.resourceVersion ?? ""}/${caVersion}`,
    location,
    holds,
    options: checkStoreOptions(storage, secretValues),
    ...(caPem !== undefined ? { caPem } : {}),
    secretName,
  });
}

/** A location found wanting is looked at again soon (the user is likely fixing it); else not before a resync. */
export function modelFilesRecheck(
  outcome: ModelFilesOutcome | undefined,
  checker: ModelFilesChecking,
): number | undefined {
  return outcome?.state === "Failed" ? checker.recheckAfterMs(outcome) : undefined;
}

import type { V1Secret } from "@kubernetes/client-node";
import { SPEC_DEFAULTS, type DynamoKserveModel } from "../api/v1alpha1.js";
import type { KeyPairPem } from "./certificates.js";
import { objectNames, ownedMetadata } from "./names.js";

/**
 * What a model's TLS and token settings mean for its objects: which Secret holds the
 * serving certificate, the DNS names it must carry, and the Secrets tls.mode SelfSigned
 * makes. Pure builders.
 */

/** Where the data plane finds its certificate and tokens. */
export const TLS_MOUNT = "/etc/dynamo-kserve/tls";
export const AUTH_MOUNT = "/etc/dynamo-kserve/auth";

export type TlsMode = "Disabled" | "Secret" | "SelfSigned" | "CertManager";

export const tlsMode = (model: DynamoKserveModel): TlsMode => model.spec.tls?.mode ?? SPEC_DEFAULTS.tls.mode;

/** The kubernetes.io/tls Secret mounted into the data plane, or undefined without TLS. */
export function tlsSecretName(model: DynamoKserveModel): string | undefined {
  switch (tlsMode(model)) {
    case "Secret":
      return model.spec.tls?.secretName;
    case "SelfSigned":
    case "CertManager":
      return objectNames(model).tlsSecret;
    default:
      return undefined;
  }
}

/** The token file's key in the auth Secret. */
export const tokenKey = (model: DynamoKserveModel): string =>
  model.spec.auth?.tokenSecretRef.key ?? SPEC_DEFAULTS.auth.tokenSecretRef.key;

/** The names clients reach the model's Service by, which its certificate must carry. */
export function serviceDnsNames(model: DynamoKserveModel): string[] {
  const service = objectNames(model).service;
  const namespace = model.metadata.namespace;
  return [
    service,
    `${service}.${namespace}`,
    `${service}.${namespace}.svc`,
    `${service}.${namespace}.svc.cluster.local`,
  ];
}

const base64 = (text: string): string => Buffer.from(text).toString("base64");

function ownedSecret(model: DynamoKserveModel, name: string, type: string, data: Record<string, string>): V1Secret {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: ownedMetadata(model, name),
    type,
    data: Object.fromEntries(Object.entries(data).map(([key, value]) => [key, base64(value)])),
  };
}

export const desiredCaSecret = (model: DynamoKserveModel, ca: KeyPairPem): V1Secret =>
  ownedSecret(model, objectNames(model).caSecret, "Opaque", { "ca.crt": ca.certificate, "ca.key": ca.privateKey });

/** The serving certificate as a kubernetes.io/tls Secret, with the CA clients should trust. */
export const desiredTlsSecret = (model: DynamoKserveModel, serving: KeyPairPem, caCertificate: string): V1Secret =>
  ownedSecret(model, objectNames(model).tlsSecret, "kubernetes.io/tls", {
    "tls.crt": serving.certificate,
    "tls.key": serving.privateKey,
    "ca.crt": caCertificate,
  });

/** A key of a Secret read from the API server, as text. */
export const secretText = (secret: V1Secret | undefined, key: string): string | undefined => {
  const value = secret?.data?.[key];
  return value === undefined ? undefined : Buffer.from(value, "base64").toString("utf8");
};

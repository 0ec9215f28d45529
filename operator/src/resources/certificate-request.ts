import type { KubernetesObject, V1ObjectMeta } from "@kubernetes/client-node";
import { SPEC_DEFAULTS, type DynamoKserveModel } from "../api/v1alpha1.js";
import type { OwnedKind } from "../kube/owned.js";
import { serviceDnsNames } from "./credentials.js";
import { objectNames, ownedMetadata } from "./names.js";

/** tls.mode CertManager: the cert-manager Certificate for the model's Service names. Pure builder. */

export const CERTIFICATE_KIND = {
  apiVersion: "cert-manager.io/v1",
  kind: "Certificate",
  plural: "certificates",
  optional: true,
} as const satisfies OwnedKind;

export interface Certificate extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: {
    secretName: string;
    dnsNames: string[];
    issuerRef: { name: string; kind: string; group: string };
    privateKey: { algorithm: string; size: number; rotationPolicy: string };
    usages: string[];
  };
}

/** cert-manager writes the certificate into `<model>-tls`, the Secret the data plane mounts. */
export function desiredCertificate(model: DynamoKserveModel): Certificate {
  const issuer = model.spec.tls!.issuerRef!;
  const defaults = SPEC_DEFAULTS.tls.issuerRef;
  return {
    apiVersion: CERTIFICATE_KIND.apiVersion,
    kind: CERTIFICATE_KIND.kind,
    metadata: ownedMetadata(model, objectNames(model).tlsSecret),
    spec: {
      secretName: objectNames(model).tlsSecret,
      dnsNames: serviceDnsNames(model),
      issuerRef: { name: issuer.name, kind: issuer.kind ?? defaults.kind, group: issuer.group ?? defaults.group },
      // A new key with every renewal, as the SelfSigned mode does.
      privateKey: { algorithm: "ECDSA", size: 256, rotationPolicy: "Always" },
      usages: ["server auth", "digital signature"],
    },
  };
}

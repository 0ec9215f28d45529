import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { X509Certificate } from "node:crypto";
import { webcrypto } from "node:crypto";

/**
 * The certificates of tls.mode SelfSigned: a CA per model and a serving certificate for
 * its Service's DNS names, signed by it. ECDSA P-256 (small, fast, what Node and gRPC
 * accept everywhere). Issuing is the only impure part (keys are random); whether a
 * certificate must be re-issued is decided by `needsIssuing` from what is in the Secret.
 */

const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 86_400_000;
export const CA_VALIDITY_DAYS = 3650;
/** Serving certificates live 90 days and are re-issued when fewer than 30 are left (defaults). */
export const SERVING_VALIDITY_MS = 90 * DAY_MS;
export const RENEW_BEFORE_MS = 30 * DAY_MS;

export interface KeyPairPem {
  readonly certificate: string;
  readonly privateKey: string;
}

export async function issueCa(commonName: string, now = new Date()): Promise<KeyPairPem> {
  const keys = await generateKeys();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${escapeDn(commonName)}`,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + CA_VALIDITY_DAYS * DAY_MS),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  return { certificate: certificate.toString("pem"), privateKey: await privateKeyPem(keys.privateKey) };
}

export interface LeafOptions {
  readonly dnsNames?: readonly string[];
  readonly ipAddresses?: readonly string[];
  /** serverAuth (default) or clientAuth (mTLS clients). */
  readonly usage?: "server" | "client";
  readonly validityMs?: number;
  readonly now?: Date;
}

/** A certificate signed by `ca`: a serving certificate for DNS/IP names, or a client certificate. */
export async function issueLeaf(ca: KeyPairPem, commonName: string, options: LeafOptions = {}): Promise<KeyPairPem> {
  const { dnsNames = [], ipAddresses = [], usage = "server", validityMs = SERVING_VALIDITY_MS } = options;
  const now = options.now ?? new Date();
  const names: x509.JsonGeneralName[] = [
    ...dnsNames.map((value) => ({ type: "dns" as const, value })),
    ...ipAddresses.map((value) => ({ type: "ip" as const, value })),
  ];
  const caCertificate = new x509.X509Certificate(ca.certificate);
  const caKey = await webcrypto.subtle.importKey("pkcs8", pemBody(ca.privateKey), ALGORITHM, false, ["sign"]);
  const keys = await generateKeys();
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${escapeDn(commonName)}`,
    issuer: caCertificate.subject,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + validityMs),
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([
        usage === "client" ? x509.ExtendedKeyUsage.clientAuth : x509.ExtendedKeyUsage.serverAuth,
      ]),
      ...(names.length > 0 ? [new x509.SubjectAlternativeNameExtension(names)] : []),
    ],
  });
  return { certificate: certificate.toString("pem"), privateKey: await privateKeyPem(keys.privateKey) };
}

/**
 * Why a serving certificate must be (re-)issued, or undefined if it can stay: missing or
 * unreadable, not signed by the CA, names that differ from the wanted ones, or less than
 * `renewBeforeMs` of validity left.
 */
export function needsIssuing(
  serving: KeyPairPem | undefined,
  caCertificate: string,
  dnsNames: readonly string[],
  renewBeforeMs = RENEW_BEFORE_MS,
  now = new Date(),
): string | undefined {
  if (serving === undefined) return "no serving certificate yet";
  let certificate: X509Certificate;
  let ca: X509Certificate;
  try {
    certificate = new X509Certificate(serving.certificate);
    ca = new X509Certificate(caCertificate);
  } catch {
    return "the serving certificate cannot be read";
  }
  if (!certificate.verify(ca.publicKey)) return "the serving certificate is not signed by the model's CA";
  const names = (certificate.subjectAltName ?? "")
    .split(", ")
    .filter((entry) => entry.startsWith("DNS:"))
    .map((entry) => entry.slice(4))
    .sort();
  if (names.join(",") !== [...dnsNames].sort().join(",")) return "the Service's DNS names changed";
  const left = new Date(certificate.validTo).getTime() - now.getTime();
  if (left < renewBeforeMs) return `it expires ${certificate.validTo}: renewing`;
  return undefined;
}

/** When a certificate expires (RFC 3339). */
export function notAfter(certificate: string): string {
  return new Date(new X509Certificate(certificate).validTo).toISOString();
}

const generateKeys = (): Promise<webcrypto.CryptoKeyPair> =>
  webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"]) as Promise<webcrypto.CryptoKeyPair>;

const serial = (): string => {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = bytes[0]! & 0x7f; // a positive serial number
  return Buffer.from(bytes).toString("hex");
};

const escapeDn = (value: string): string => value.replace(/([,+"\\<>;=])/g, "\\$1");

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

function pemBody(pem: string): ArrayBuffer {
  const bytes = Buffer.from(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, ""), "base64");
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
}

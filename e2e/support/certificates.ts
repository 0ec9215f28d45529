import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { webcrypto } from "node:crypto";

/**
 * Certificates made in the test (no files checked in, nothing from the network): a CA,
 * and server or client certificates it signs. PEM strings, ready to write as files.
 */

const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 86_400_000;

export interface Pem {
  readonly certificate: string;
  readonly privateKey: string;
}

export interface TestCa extends Pem {
  /** Signs a certificate for `commonName`; a server certificate gets DNS/IP names as SANs. */
  issue(commonName: string, options?: { dns?: string[]; ips?: string[]; client?: boolean }): Promise<Pem>;
}

export async function createTestCa(name = "dynamo-kserve test CA"): Promise<TestCa> {
  const keys = await generateKeys();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${name}`,
    notBefore: new Date(Date.now() - DAY_MS),
    notAfter: new Date(Date.now() + DAY_MS),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  return {
    certificate: certificate.toString("pem"),
    privateKey: await privateKeyPem(keys.privateKey),
    async issue(commonName, options = {}) {
      const leafKeys = await generateKeys();
      const names: x509.JsonGeneralName[] = [
        ...(options.dns ?? []).map((value) => ({ type: "dns" as const, value })),
        ...(options.ips ?? []).map((value) => ({ type: "ip" as const, value })),
      ];
      const usage = options.client === true ? x509.ExtendedKeyUsage.clientAuth : x509.ExtendedKeyUsage.serverAuth;
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: serial(),
        subject: `CN=${commonName}`,
        issuer: certificate.subject,
        notBefore: new Date(Date.now() - DAY_MS),
        notAfter: new Date(Date.now() + DAY_MS),
        publicKey: leafKeys.publicKey,
        signingKey: keys.privateKey,
        signingAlgorithm: ALGORITHM,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.ExtendedKeyUsageExtension([usage]),
          ...(names.length > 0 ? [new x509.SubjectAlternativeNameExtension(names)] : []),
        ],
      });
      return { certificate: leaf.toString("pem"), privateKey: await privateKeyPem(leafKeys.privateKey) };
    },
  };
}

const generateKeys = (): Promise<webcrypto.CryptoKeyPair> =>
  webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"]) as Promise<webcrypto.CryptoKeyPair>;

const serial = (): string => Buffer.from(webcrypto.getRandomValues(new Uint8Array(8))).toString("hex");

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

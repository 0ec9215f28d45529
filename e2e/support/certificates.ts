import { issueCa, issueLeaf, type KeyPairPem } from "../../operator/src/resources/certificates.js";

/**
 * Certificates made in the test (no files checked in, nothing from the network), with the
 * operator's own issuer: a CA, and server or client certificates it signs.
 */

export type Pem = KeyPairPem;

export interface TestCa extends Pem {
  /** Signs a certificate for `commonName`; a server certificate gets DNS/IP names as SANs. */
  issue(commonName: string, options?: { dns?: string[]; ips?: string[]; client?: boolean }): Promise<Pem>;
}

export async function createTestCa(name = "dynamo-kserve test CA"): Promise<TestCa> {
  const ca = await issueCa(name);
  return {
    ...ca,
    issue: (commonName, options = {}) =>
      issueLeaf(ca, commonName, {
        dnsNames: options.dns ?? [],
        ipAddresses: options.ips ?? [],
        usage: options.client === true ? "client" : "server",
      }),
  };
}

import assert from "node:assert/strict";
import { resolveAddresses, type HostLookup } from "../../src/engines/kserve-grpc/endpoints.js";

describe("kserve-grpc upstream addresses", () => {
  // A headless Service's name resolves to one record per ready pod; /etc/hosts here
  // cannot say that, so these records stand in for the cluster DNS.
  const records: Record<string, { address: string; family: number }[]> = {
    "triton.models.svc.cluster.local": [
      { address: "10.0.0.7", family: 4 },
      { address: "10.0.0.8", family: 4 },
      { address: "fd00::9", family: 6 },
    ],
  };
  const clusterDns: HostLookup = async (host) => {
    const found = records[host];
    if (found === undefined) throw new Error(`ENOTFOUND ${host}`);
    return found;
  };

  it("expands a DNS name into one address per record, IPv6 bracketed", async () => {
    assert.deepEqual(await resolveAddresses(["triton.models.svc.cluster.local:8001"], clusterDns), [
      "10.0.0.7:8001",
      "10.0.0.8:8001",
      "[fd00::9]:8001",
    ]);
  });

  it("keeps IP addresses as they are, drops duplicates, and keeps a name that does not resolve (so errors name it)", async () => {
    assert.deepEqual(
      await resolveAddresses(["10.0.0.7:8001", "[::1]:9000", "nowhere.invalid:1", "10.0.0.7:8001"], clusterDns),
      ["10.0.0.7:8001", "[::1]:9000", "nowhere.invalid:1"],
    );
  });

  it("uses the system resolver by default", async () => {
    const addresses = await resolveAddresses(["localhost:8001"]);
    assert.ok(addresses.length > 0);
    for (const address of addresses) assert.ok(["127.0.0.1:8001", "[::1]:8001"].includes(address), address);
  });
});

import assert from "node:assert/strict";
import pino from "pino";
import { Endpoint, resolveAddresses, type HostLookup } from "../../src/engines/kserve-grpc/endpoints.js";
import { eventually } from "../fixtures/server.js";

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
    const target = "triton.models.svc.cluster.local:8001";
    assert.deepEqual(await resolveAddresses([target], clusterDns), [
      { address: "10.0.0.7:8001", target },
      { address: "10.0.0.8:8001", target },
      { address: "[fd00::9]:8001", target },
    ]);
  });

  it("keeps IP addresses as they are, drops duplicates, and keeps a name that does not resolve (so errors name it)", async () => {
    const resolved = await resolveAddresses(
      ["10.0.0.7:8001", "[::1]:9000", "nowhere.invalid:1", "10.0.0.7:8001"],
      clusterDns,
    );
    assert.deepEqual(
      resolved.map(({ address }) => address),
      ["10.0.0.7:8001", "[::1]:9000", "nowhere.invalid:1"],
    );
  });

  it("keeps a name's last addresses when looking it up fails for a moment (a DNS blip does not fold a Service's pods into one name)", async () => {
    const target = "triton.models.svc.cluster.local:8001";
    const before = await resolveAddresses([target], clusterDns);
    const failing: HostLookup = async (host) => {
      throw new Error(`EAI_AGAIN ${host}`);
    };
    assert.deepEqual(await resolveAddresses([target, "10.0.0.1:1"], failing, before), [
      ...before,
      { address: "10.0.0.1:1", target: "10.0.0.1:1" },
    ]);
    assert.deepEqual(await resolveAddresses([target], failing), [{ address: target, target }], "none known: the name");
  });

  it("uses the system resolver by default", async () => {
    const addresses = await resolveAddresses(["localhost:8001"]);
    assert.ok(addresses.length > 0);
    for (const { address, target } of addresses) {
      assert.ok(["127.0.0.1:8001", "[::1]:8001"].includes(address), address);
      assert.equal(target, "localhost:8001");
    }
  });
});

describe("kserve-grpc endpoint health after close", () => {
  const runtime = {
    maxMessageSize: 1024,
    pythonEngine: { python: "python3", pythonStubTimeoutSecs: 30, pythonShmByteSize: 1 },
    logger: pino({ level: "silent" }),
    inference: () => undefined,
  };

  it("stops probing once closed, even when a probe was in flight (an unloaded model leaves no timer behind)", async () => {
    const endpoint = new Endpoint("127.0.0.1:1", { runtime });
    let probes = 0;
    let answer: ((live: boolean) => void) | undefined;
    const probe = (): Promise<boolean> => {
      probes++;
      return new Promise((resolve) => (answer = resolve));
    };
    endpoint.markFailed("connection refused", probe);
    await eventually(() => assert.equal(probes, 1));
    endpoint.close();
    answer!(false);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(probes, 1, "probed again after close");
  });
});

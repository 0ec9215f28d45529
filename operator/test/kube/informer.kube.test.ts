import assert from "node:assert/strict";
import type { KubernetesObject, V1ConfigMap } from "@kubernetes/client-node";
import { pino } from "pino";
import { testCluster } from "../../../e2e/cluster/mocha-global.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { WatchedObjects } from "../../src/kube/informer.js";
import { KubeTestClient } from "../fixtures/kube.js";

describe("the operator's watch caches (real API server)", function () {
  this.timeout(30_000);

  it("hold objects without managedFields, listed or watched, and stay current", async function () {
    const cluster = testCluster(this);
    const kube = new KubeTestClient(cluster.adminConfig());
    const namespace = await kube.createNamespace("cache");
    const configMap = (data: Record<string, string>, name = "listed") => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, namespace },
      data,
    });
    await kube.create(configMap({ a: "1" }));
    // The API server does keep them: what the cache drops is real.
    assert.ok((await kube.read<V1ConfigMap>("v1", "ConfigMap", namespace, "listed")).metadata?.managedFields?.length);
    const cache = new WatchedObjects<V1ConfigMap & KubernetesObject>(
      cluster.adminConfig(),
      kube.api,
      { apiVersion: "v1", kind: "ConfigMap", plural: "configmaps" },
      { namespaces: [namespace], logger: pino({ level: "silent" }), onEvent: () => undefined },
    );
    try {
      await cache.start();
      assert.equal(cache.get(namespace, "listed")?.metadata?.managedFields, undefined);
      await kube.mergePatch(configMap({ a: "2" }));
      await kube.create(configMap({ b: "1" }, "watched"));
      await eventually(() => {
        assert.equal(cache.get(namespace, "listed")?.data?.["a"], "2");
        assert.ok(cache.get(namespace, "watched"));
      });
      for (const name of ["listed", "watched"]) {
        assert.equal(cache.get(namespace, name)?.metadata?.managedFields, undefined, name);
      }
    } finally {
      await cache.stop();
    }
  });
});

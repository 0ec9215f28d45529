import assert from "node:assert/strict";
import { upstreamCrdFile, type TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import type { ServiceMonitor } from "../../src/resources/service-monitor.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject } from "../fixtures/kube.js";
import { useOperator, type OperatorProcess } from "../fixtures/operator.js";

const MONITOR_API = "monitoring.coreos.com/v1";
const MONITOR_CRD = "servicemonitors.monitoring.coreos.com";

describe("ServiceMonitor (upstream Prometheus Operator CRD, real API server)", function () {
  this.timeout(120_000);
  const suite = useOperator("monitor");
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let namespace: string;
  let operator: OperatorProcess;
  before(() => ({ cluster, kube, namespace, operator } = suite));
  after(async () => {
    if (!(await cluster.hasCrd(MONITOR_CRD))) await cluster.installCrdFile(upstreamCrdFile("servicemonitors"));
  });

  const model = () =>
    kube.read<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace, "scraped");
  const monitor = () => kube.read<ServiceMonitor>(MONITOR_API, "ServiceMonitor", namespace, "scraped");

  it("creates a ServiceMonitor for the model's Service metrics port, with the interval and extra labels", async () => {
    await kube.create(
      modelObject(namespace, "scraped", {
        replicas: 1,
        modelConfig: { inline: IDENTITY_CONFIG },
        monitoring: { interval: "15s", labels: { release: "prometheus" } },
      }),
    );
    await eventually(async () => assert.equal(conditionOf(await model(), "MonitoringReady")?.status, "True"), 30_000);
    const created = await monitor();
    assert.deepEqual(created.spec, {
      selector: {
        matchLabels: { "dynamokserve.dev/model": "scraped", "app.kubernetes.io/name": "dynamo-kserve-dataplane" },
      },
      // The pods' variant (stable, canary) kept on their series.
      podTargetLabels: ["dynamokserve.dev/variant"],
      endpoints: [{ port: "metrics", path: "/metrics", interval: "15s", scheme: "http" }],
    });
    assert.equal(created.metadata.labels?.["release"], "prometheus");
    // The selector picks the model's Service, whose metrics port is named as the endpoint says.
    const service = await kube.read<{
      metadata: { labels: Record<string, string> };
      spec: { ports: { name: string }[] };
    }>("v1", "Service", namespace, "scraped");
    for (const [key, value] of Object.entries(created.spec.selector.matchLabels))
      assert.equal(service.metadata.labels[key], value);
    assert.ok(service.spec.ports.some((port) => port.name === "metrics"));
  });

  it("says CRDNotInstalled without the CRD, and creates the ServiceMonitor when it is installed, without a restart", async () => {
    await cluster.deleteCrd(MONITOR_CRD);
    await eventually(
      async () => assert.equal(conditionOf(await model(), "MonitoringReady")?.reason, "CRDNotInstalled"),
      30_000,
    );
    await cluster.installCrdFile(upstreamCrdFile("servicemonitors"));
    await eventually(async () => {
      assert.equal(conditionOf(await model(), "MonitoringReady")?.status, "True");
      assert.equal((await monitor()).spec.endpoints[0]?.interval, "15s");
    }, 60_000);
    assert.equal(operator.process.exitCode, null);
  });
});

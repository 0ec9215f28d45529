import assert from "node:assert/strict";
import type { V1Lease } from "@kubernetes/client-node";
import { testCluster } from "../../../e2e/cluster/mocha-global.js";
import type { TestCluster } from "../../../e2e/cluster/cluster.js";
import { eventually } from "../../../e2e/support/eventually.js";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import type { DynamoKserveModel } from "../../src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject } from "../fixtures/kube.js";
import { startOperatorProcess, type OperatorProcess } from "../fixtures/operator.js";

const LEASE = "dynamo-kserve-operator";
const LEASE_SECONDS = 3;

describe("leader election: two operator processes, one Lease (real API server)", function () {
  this.timeout(120_000);
  let cluster: TestCluster;
  let kube: KubeTestClient;
  let namespace: string;
  let operators: OperatorProcess[] = [];

  before(async function () {
    cluster = testCluster(this);
    kube = new KubeTestClient(cluster.adminConfig());
    namespace = await kube.createNamespace("leader");
    const args = [
      "--namespace",
      namespace,
      "--leader-elect",
      "--leader-election-namespace",
      namespace,
      "--leader-election-lease-duration-secs",
      String(LEASE_SECONDS),
      "--leader-election-renew-deadline-secs",
      "2",
      "--leader-election-retry-period-secs",
      "0.5",
    ];
    operators = await Promise.all([
      startOperatorProcess(cluster.operatorKubeconfig, args),
      startOperatorProcess(cluster.operatorKubeconfig, args),
    ]);
  });
  after(async () => {
    for (const operator of operators) await operator.stop();
  });

  const leads = (operator: OperatorProcess): boolean => operator.logs.some((entry) => entry["msg"] === "became leader");
  const identityOf = (operator: OperatorProcess): string =>
    operator.logs.find((entry) => entry["msg"] === "operator ready")?.["leaderElection"] as string;
  const lease = () => kube.read<V1Lease>("coordination.k8s.io/v1", "Lease", namespace, LEASE);
  const writesOf = async (operator: OperatorProcess): Promise<number> =>
    (await scrape(`http://127.0.0.1:${operator.httpPort}/metrics`))
      .filter((sample) => sample.name === "dynamo_operator_api_writes_total")
      .reduce((sum, sample) => sum + sample.value, 0);
  const readyModel = async (name: string): Promise<void> => {
    await kube.create(modelObject(namespace, name, { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG } }));
    await eventually(async () => {
      const model = await kube.read<DynamoKserveModel>(
        "dynamokserve.dev/v1alpha1",
        "DynamoKserveModel",
        namespace,
        name,
      );
      assert.equal(conditionOf(model, "Ready")?.status, "True");
    }, 60_000);
  };

  it("lets exactly one replica lead and write; the other stays warm and writes nothing", async () => {
    await eventually(() => assert.equal(operators.filter(leads).length, 1), 20_000);
    const leader = operators.find(leads)!;
    const follower = operators.find((operator) => !leads(operator))!;
    assert.equal((await lease()).spec?.holderIdentity, identityOf(leader));
    await readyModel("a");
    assert.ok((await writesOf(leader)) > 0);
    assert.equal(await writesOf(follower), 0, "the follower never writes");
    const status = async (operator: OperatorProcess) =>
      valueOf(await scrape(`http://127.0.0.1:${operator.httpPort}/metrics`), "leader_election_master_status", {
        name: LEASE,
      });
    assert.equal(await status(leader), 1);
    assert.equal(await status(follower), 0);
  });

  it("fails over within the lease duration when the leader dies, and the new leader reconciles", async () => {
    const leader = operators.find(leads)!;
    const follower = operators.find((operator) => !leads(operator))!;
    const killedAt = Date.now();
    leader.process.kill("SIGKILL");
    await eventually(() => assert.ok(leads(follower)), 20_000, 50).catch((error: unknown) => {
      console.log(JSON.stringify(follower.logs.slice(-8)));
      throw error;
    });
    const tookOverAt = follower.logs.find((entry) => entry["msg"] === "became leader")!["time"] as number;
    const failover = tookOverAt - killedAt;
    console.log(`      leader killed -> follower leads: ${failover} ms (lease ${LEASE_SECONDS} s)`);
    // Within the lease and what its last renewal's retry tick, a GET and a PUT of the Lease take
    // on a busy API server: a follower that never took over, or waited a lease more, fails.
    assert.ok(failover <= LEASE_SECONDS * 1000 + 5_000, `${failover} ms`);
    const taken = await lease();
    assert.equal(taken.spec?.holderIdentity, identityOf(follower));
    assert.equal(taken.spec?.leaseTransitions, 1);
    await readyModel("b");
  });

  it("gives the Lease up when stopped, so a successor need not wait", async () => {
    const running = operators.filter(
      (operator) => operator.process.exitCode === null && operator.process.signalCode === null,
    );
    assert.equal(running.length, 1, `running: ${running.map((operator) => operator.process.pid).join(", ")}`);
    const follower = running[0]!;
    assert.ok(leads(follower), "the survivor is the leader");
    assert.equal(await follower.stop(), 0);
    assert.equal((await lease()).spec?.holderIdentity, "");
  });
});

/**
 * `npm run bench:operator [-- N]`: the operator at scale on the real test cluster (API
 * server, controller manager, scheduler, kwok nodes). Creates N DynamoKserveModels
 * (1,000 by default) and reports: time until the operator has acted on all of them (every
 * model has its Deployment and a status: the operator's own throughput), time until all
 * are Ready (that also waits for the cluster's controllers and kwok to make the pods
 * Ready), reconciles per second, API writes per model (from the API server's audit log),
 * the operator's resident memory, and the writes made in a steady state with frequent
 * resyncs (should be 0). Writes
 * bench/results/operator-scale-<date>.json and prints a Markdown line.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cpus } from "node:os";
import { TestCluster } from "../../e2e/cluster/cluster.js";
import { parseMetrics, valueOf } from "../../e2e/support/prometheus.js";
import { REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import type { DynamoKserveModel } from "../../operator/src/api/v1alpha1.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject } from "../../operator/test/fixtures/kube.js";
import { startOperatorProcess } from "../../operator/test/fixtures/operator.js";

const COUNT = Number(process.argv[2] ?? 1000);
const RESYNC_SECS = 30;

const cluster = await TestCluster.start();
const kube = new KubeTestClient(cluster.adminConfig());
const namespace = await kube.createNamespace("bench");
const operator = await startOperatorProcess(cluster.operatorKubeconfig, [
  "--namespace",
  namespace,
  "--resync-secs",
  String(RESYNC_SECS),
]);
const scrape = async () => parseMetrics(await (await fetch(`http://127.0.0.1:${operator.httpPort}/metrics`)).text());
const reconciles = (samples: ReturnType<typeof parseMetrics>) =>
  valueOf(samples, "controller_runtime_reconcile_total", { controller: "dynamokservemodel", result: "success" });

try {
  const started = Date.now();
  const mark = cluster.auditMark();
  const before = reconciles(await scrape());
  for (let i = 0; i < COUNT; i++) {
    await kube.create(modelObject(namespace, `m${i}`, { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG } }));
  }
  const created = Date.now();
  let ready = 0;
  let actedOn: number | undefined;
  while (ready < COUNT) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const list = await kube.api.list<DynamoKserveModel>("dynamokserve.dev/v1alpha1", "DynamoKserveModel", namespace);
    ready = list.items.filter((model) => conditionOf(model, "Ready")?.status === "True").length;
    const valid = list.items.filter((model) => conditionOf(model, "ConfigValid")?.status === "True").length;
    if (actedOn === undefined && valid === COUNT) actedOn = Date.now();
    process.stderr.write(
      `\r${valid}/${COUNT} acted on, ${ready}/${COUNT} Ready after ${((Date.now() - started) / 1000).toFixed(0)} s`,
    );
    if (Date.now() - started > 30 * 60_000) throw new Error(`only ${ready}/${COUNT} Ready after 30 minutes`);
  }
  const allReady = Date.now();
  process.stderr.write("\n");
  const atReady = await scrape();
  const writes = cluster.operatorWrites(mark).filter((event) => event.objectRef?.namespace === namespace).length;
  // Steady state: two full resyncs with nothing changed.
  const steadyMark = cluster.auditMark();
  await new Promise((resolve) => setTimeout(resolve, 2 * RESYNC_SECS * 1000 + 5000));
  const steadyWrites = cluster.operatorWrites(steadyMark).length;
  const after = await scrape();
  const result = {
    date: new Date().toISOString(),
    cores: cpus().length,
    models: COUNT,
    createSeconds: (created - started) / 1000,
    actedOnSeconds: ((actedOn ?? allReady) - started) / 1000,
    allReadySeconds: (allReady - started) / 1000,
    reconcilesUntilReady: reconciles(atReady) - before,
    reconcilesPerSecond: (reconciles(atReady) - before) / ((allReady - started) / 1000),
    writesPerModel: writes / COUNT,
    operatorRssMiB: valueOf(after, "process_resident_memory_bytes") / 2 ** 20,
    // Where that memory is: V8's heap in use (the caches, the queue) and outside it (buffers).
    operatorHeapUsedMiB: valueOf(after, "nodejs_heap_size_used_bytes") / 2 ** 20,
    operatorHeapTotalMiB: valueOf(after, "nodejs_heap_size_total_bytes") / 2 ** 20,
    operatorExternalMiB: valueOf(after, "nodejs_external_memory_bytes") / 2 ** 20,
    steadyStateSeconds: 2 * RESYNC_SECS + 5,
    steadyStateReconciles: reconciles(after) - reconciles(atReady),
    steadyStateWrites: steadyWrites,
  };
  const dir = join(REPO_ROOT, "bench", "results");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `operator-scale-${result.date.slice(0, 10)}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(JSON.stringify(result, null, 2));
  console.log(
    `| ${COUNT} models | all acted on ${result.actedOnSeconds.toFixed(1)} s | all Ready ${result.allReadySeconds.toFixed(1)} s | ${result.reconcilesPerSecond.toFixed(1)} reconciles/s | ` +
      `${result.writesPerModel.toFixed(2)} writes/model | RSS ${result.operatorRssMiB.toFixed(0)} MiB | ` +
      `steady state: ${result.steadyStateReconciles} reconciles, ${result.steadyStateWrites} writes |`,
  );
  console.log(`wrote ${file}`);
} finally {
  await operator.stop();
  await cluster.stop();
}

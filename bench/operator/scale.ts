/**
 * `npm run bench:operator [-- N]`: the operator at scale on the real test cluster (API
 * server, controller manager, scheduler, kwok nodes), against a ceiling measured in the
 * same run. Two fresh clusters, one after the other:
 *
 * - **ceiling**: the bench itself writes, for N models, the Service, ConfigMap and
 *   Deployment the operator would build (server-side apply, no operator; as many models at
 *   once as the operator has workers), and waits until every Deployment is available: what
 *   the cluster alone needs to start N data-plane Deployments on this machine.
 * - **operator**: the bench creates N DynamoKserveModels in turn (1,000 by default) and
 *   reports the time until the operator has acted on all of them (every model has its
 *   Deployment and a status), until all are Ready, reconciles per second, API writes per
 *   model (from the API server's audit log, once the operator's Events are all out), the
 *   operator's memory (started with the chart's environment), and the writes of a steady
 *   state with resyncs every 30 s (should be 0).
 *
 * Status is read from watches, never by listing N objects every second: the bench must not
 * load the API server it measures. `BENCH_WORKERS` sets the operator's `--workers` (16).
 * Writes bench/results/operator-scale-<date>.json and prints a Markdown line.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cpus } from "node:os";
import type { KubernetesObject, V1Deployment } from "@kubernetes/client-node";
import { pino } from "pino";
import { TestCluster } from "../../e2e/cluster/cluster.js";
import { parseMetrics, valueOf, type Sample } from "../../e2e/support/prometheus.js";
import { REPO_ROOT } from "../../dataplane/test/fixtures/paths.js";
import type { DynamoKserveModel } from "../../operator/src/api/v1alpha1.js";
import { makeObjectsClient } from "../../operator/src/kube/api-clients.js";
import { applyIfChanged } from "../../operator/src/kube/apply.js";
import { WatchedObjects, type WatchedKind } from "../../operator/src/kube/informer.js";
import { checkModelConfig } from "../../operator/src/resources/model-config.js";
import { desiredConfigMap, desiredDeployment, desiredService } from "../../operator/src/resources/model.js";
import { conditionOf, IDENTITY_CONFIG, KubeTestClient, modelObject } from "../../operator/test/fixtures/kube.js";
import { chartOperatorEnv, startOperatorProcess, TEST_DATAPLANE_IMAGE } from "../../operator/test/fixtures/operator.js";

const COUNT = Number(process.argv[2] ?? 1000);
const RESYNC_SECS = 30;
/** The operator's --workers (its default unless BENCH_WORKERS says otherwise), and the ceiling's writers. */
const WORKERS = Number(process.env["BENCH_WORKERS"] ?? 16);
const silent = pino({ level: "warn" });
const seconds = (from: number, to: number) => (to - from) / 1000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A watch-fed cache of one kind in `namespace`, read by the bench instead of listing. */
async function watchKind<T extends KubernetesObject>(cluster: TestCluster, namespace: string, kind: WatchedKind) {
  const config = cluster.adminConfig();
  const cache = new WatchedObjects<T>(config, makeObjectsClient(config), kind, {
    namespaces: [namespace],
    logger: silent,
    onEvent: () => undefined,
  });
  await cache.start();
  return cache;
}

/** Polls `count` once a second, printing progress, until it reaches COUNT. */
async function waitForAll(
  started: number,
  what: string,
  count: () => { done: number; note?: string },
): Promise<number> {
  for (;;) {
    await sleep(1000);
    const { done, note } = count();
    process.stderr.write(`\r${note ?? ""}${done}/${COUNT} ${what} after ${seconds(started, Date.now()).toFixed(0)} s`);
    if (done >= COUNT) break;
    if (Date.now() - started > 30 * 60_000) throw new Error(`only ${done}/${COUNT} ${what} after 30 minutes`);
  }
  process.stderr.write("\n");
  return Date.now();
}

/** The ceiling: the cluster starting the operator's objects for COUNT models written directly. */
async function ceiling(): Promise<{ createSeconds: number; allReadySeconds: number }> {
  const cluster = await TestCluster.start();
  try {
    const namespace = await new KubeTestClient(cluster.adminConfig()).createNamespace("ceiling");
    const api = makeObjectsClient(cluster.adminConfig());
    const deployments = await watchKind<V1Deployment & KubernetesObject>(cluster, namespace, {
      apiVersion: "apps/v1",
      kind: "Deployment",
      plural: "deployments",
    });
    const settings = { dataplaneImage: TEST_DATAPLANE_IMAGE };
    const started = Date.now();
    // As many models in flight as the operator has workers, each model's objects in order.
    let next = 0;
    const writer = async () => {
      for (let i = next++; i < COUNT; i = next++) {
        const model = modelObject(namespace, `m${i}`, { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG } });
        const config = checkModelConfig(model, undefined);
        if (!config.valid) throw new Error(config.message);
        // No owner: the garbage collector would delete objects whose owner does not exist.
        for (const object of [
          desiredService(model),
          desiredConfigMap(model, config),
          desiredDeployment(model, settings),
        ]) {
          delete object.metadata?.ownerReferences;
          await applyIfChanged(api, object, undefined);
        }
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, writer));
    const created = Date.now();
    const allReady = await waitForAll(started, "Deployments available (ceiling)", () => ({
      done: deployments.list(namespace).filter((deployment) => (deployment.status?.availableReplicas ?? 0) >= 1).length,
    }));
    await deployments.stop();
    return { createSeconds: seconds(started, created), allReadySeconds: seconds(started, allReady) };
  } finally {
    await cluster.stop();
  }
}

const operatorWrites = (samples: Sample[]) =>
  samples
    .filter((sample) => sample.name === "dynamo_operator_api_writes_total")
    .reduce((sum, { value }) => sum + value, 0);
const reconciles = (samples: Sample[]) =>
  valueOf(samples, "controller_runtime_reconcile_total", { controller: "dynamokservemodel", result: "success" });

/** When the operator's write count last moved, once it has stood still for 5 s. */
async function writesSettled(scrape: () => Promise<Sample[]>): Promise<number> {
  let last = operatorWrites(await scrape());
  let since = Date.now();
  while (Date.now() - since < 5000) {
    await sleep(500);
    const now = operatorWrites(await scrape());
    if (now !== last) [last, since] = [now, Date.now()];
  }
  return since;
}

async function withOperator() {
  const cluster = await TestCluster.start();
  const kube = new KubeTestClient(cluster.adminConfig());
  const namespace = await kube.createNamespace("bench");
  const operator = await startOperatorProcess(
    cluster.operatorKubeconfig,
    ["--namespace", namespace, "--resync-secs", String(RESYNC_SECS), "--workers", String(WORKERS)],
    chartOperatorEnv(),
  );
  const models = await watchKind<DynamoKserveModel & KubernetesObject>(cluster, namespace, {
    apiVersion: "dynamokserve.dev/v1alpha1",
    kind: "DynamoKserveModel",
    plural: "dynamokservemodels",
  });
  const scrape = async () => parseMetrics(await (await fetch(`http://127.0.0.1:${operator.httpPort}/metrics`)).text());
  try {
    const started = Date.now();
    const mark = cluster.auditMark();
    const before = reconciles(await scrape());
    for (let i = 0; i < COUNT; i++) {
      await kube.create(modelObject(namespace, `m${i}`, { replicas: 1, modelConfig: { inline: IDENTITY_CONFIG } }));
    }
    const created = Date.now();
    let actedOn: number | undefined;
    const allReady = await waitForAll(started, "Ready", () => {
      const items = models.list(namespace);
      const valid = items.filter((model) => conditionOf(model, "ConfigValid")?.status === "True").length;
      if (actedOn === undefined && valid === COUNT) actedOn = Date.now();
      return {
        done: items.filter((model) => conditionOf(model, "Ready")?.status === "True").length,
        note: `${valid}/${COUNT} acted on, `,
      };
    });
    const atReady = await scrape();
    // Events go out after the reconciles that record them: count every write of the burst.
    const drained = await writesSettled(scrape);
    const writes = cluster.operatorWrites(mark).filter((event) => event.objectRef?.namespace === namespace).length;
    // Steady state: two full resyncs with nothing changed.
    const steadyMark = cluster.auditMark();
    await sleep(2 * RESYNC_SECS * 1000 + 5000);
    const steadyWrites = cluster.operatorWrites(steadyMark).length;
    const after = await scrape();
    return {
      createSeconds: seconds(started, created),
      actedOnSeconds: seconds(started, actedOn ?? allReady),
      allReadySeconds: seconds(started, allReady),
      writesDrainedSeconds: seconds(started, drained),
      reconcilesUntilReady: reconciles(atReady) - before,
      reconcilesPerSecond: (reconciles(atReady) - before) / seconds(started, allReady),
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
  } finally {
    await models.stop();
    await operator.stop();
    await cluster.stop();
  }
}

const ceilingResult = await ceiling();
const operatorResult = await withOperator();
const result = {
  date: new Date().toISOString(),
  cores: cpus().length,
  models: COUNT,
  workers: WORKERS,
  ceiling: ceilingResult,
  ...operatorResult,
  readyVsCeiling: operatorResult.allReadySeconds / ceilingResult.allReadySeconds,
};
const dir = join(REPO_ROOT, "bench", "results");
mkdirSync(dir, { recursive: true });
const file = join(dir, `operator-scale-${result.date.slice(0, 10)}.json`);
writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
console.log(JSON.stringify(result, null, 2));
console.log(
  `| ${COUNT} models | ceiling (objects written directly) ${ceilingResult.allReadySeconds.toFixed(1)} s | ` +
    `all acted on ${result.actedOnSeconds.toFixed(1)} s | all Ready ${result.allReadySeconds.toFixed(1)} s ` +
    `(${result.readyVsCeiling.toFixed(2)}× the ceiling) | ${result.reconcilesPerSecond.toFixed(1)} reconciles/s | ` +
    `${result.writesPerModel.toFixed(2)} writes/model | RSS ${result.operatorRssMiB.toFixed(0)} MiB | ` +
    `steady state: ${result.steadyStateReconciles} reconciles, ${result.steadyStateWrites} writes |`,
);
console.log(`wrote ${file}`);

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Server, ServerCredentials, status, type ServerWritableStream } from "@grpc/grpc-js";
import {
  ExternalScalerService,
  type ExternalScalerServer,
  type IsActiveResponse,
  type ScaledObjectRef,
} from "../../proto/gen/ts/keda/externalscaler.js";
import type { TestCluster } from "../cluster/cluster.js";
import { testCluster } from "../cluster/mocha-global.js";
import { eventually } from "../support/eventually.js";
import { Keda, type KedaCondition } from "../support/keda.js";
import { requirePlatform } from "../support/platform.js";
import { freePort } from "../support/ports.js";

/**
 * The real KEDA on the Kubernetes tier's cluster (real API server, the controller manager's
 * HPA controller, kwok pods): a ScaledObject with minReplicaCount 0 scales a Deployment to
 * zero after its cooldown, back to one the moment its external-push scaler says "active",
 * and on through the HPA KEDA made, which reads the scaler's metric through
 * external.metrics.k8s.io; a trigger that cannot reach its Prometheus gets KEDA's condition.
 */

/** The metric the scripted scaler reports (KEDA names it s0-<this> for the first trigger). */
const METRIC = "held-requests";
/** The per-pod target of that metric (an AverageValue target): a value of 2 means 2 pods. */
const TARGET_PER_POD = 1;
/** Long enough to tell "after the cooldown" from "at once", short for a test. */
const COOLDOWN_SECONDS = 10;
/** KEDA's poll (IsActive and GetMetrics): how soon it sees idleness; a push does not wait for it. */
const POLLING_SECONDS = 5;

describe("KEDA built from its Go module: scale to and from zero, external metrics, a failing trigger (real HPA controller, kwok pods)", function () {
  this.timeout(300_000);
  let cluster: TestCluster;
  let keda: Keda | undefined;
  let scaler: ScriptedExternalScaler | undefined;
  let namespace: string | undefined;

  before(async function () {
    cluster = testCluster(this);
    await requirePlatform(this, "keda");
    keda = await Keda.start(cluster);
    scaler = await ScriptedExternalScaler.start();
    namespace = `keda-${randomBytes(3).toString("hex")}`;
    cluster.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } });
  });

  after(async () => {
    // ScaledObjects go while KEDA runs: it removes its finalizer from each.
    if (namespace !== undefined && keda !== undefined) {
      cluster.kubectl("delete", "scaledobjects.keda.sh", "--all", "-n", namespace, "--wait=true", "--timeout=60s");
    }
    await keda?.stop();
    await scaler?.stop();
    if (namespace !== undefined) cluster.kubectl("delete", "namespace", namespace, "--wait=false");
  });

  const replicas = (name: string): { spec: number; ready: number } => {
    const deployment = cluster.kubectlGet<{ spec: { replicas: number }; status: { readyReplicas?: number } }>(
      "deployment",
      name,
      "-n",
      namespace!,
    );
    return { spec: deployment.spec.replicas, ready: deployment.status.readyReplicas ?? 0 };
  };

  /** The metadata of the HPA KEDA made for a ScaledObject (read quietly: it may not exist yet). */
  const hpaMetadata = async (name: string): Promise<HpaMetadata> => {
    const { status, body } = await cluster.request(
      "GET",
      `/apis/autoscaling/v2/namespaces/${namespace}/horizontalpodautoscalers/keda-hpa-${name}`,
    );
    assert.equal(status, 200, `no HPA keda-hpa-${name} yet: ${body}`);
    return (JSON.parse(body) as { metadata: HpaMetadata }).metadata;
  };

  const condition = async (name: string, type: string): Promise<KedaCondition> => {
    const found = await keda!.condition(namespace!, name, type);
    assert.ok(found !== undefined, `ScaledObject ${name} has no ${type} condition yet`);
    return found;
  };

  it("goes 1 -> 0 after its cooldown when idle, 0 -> 1 on the scaler's push, 1 -> 2 as the HPA reads the metric", async () => {
    const name = "pushed";
    scaler!.pollAnswer = true;
    scaler!.metricValue = 1;
    cluster.apply(
      deployment(namespace!, name),
      scaledObject(namespace!, name, {
        minReplicaCount: 0,
        maxReplicaCount: 3,
        triggers: [{ type: "external-push", metadata: { scalerAddress: `127.0.0.1:${scaler!.port}` } }],
      }),
    );
    const status = await eventually(async () => {
      const current = await keda!.scaledObjectStatus(namespace!, name);
      assert.equal(current.conditions?.find((c) => c.type === "Ready")?.status, "True");
      assert.equal(current.conditions?.find((c) => c.type === "Active")?.status, "True");
      assert.equal(current.externalMetricNames?.length, 1);
      return current;
    }, 60_000);
    assert.equal(status.hpaName, `keda-hpa-${name}`);
    const metricName = status.externalMetricNames![0]!;
    assert.equal(metricName, `s0-${METRIC}`);
    await eventually(() => assert.equal(scaler!.openStreams, 1), 30_000);
    assert.deepEqual(scaler!.streamedFor, { name, namespace });

    // Idle: the next poll sees it; the Deployment goes to zero, not before the cooldown.
    scaler!.pollAnswer = false;
    scaler!.metricValue = 0;
    await eventually(() => assert.equal(replicas(name).spec, 0), 120_000, 250);
    const wentToZero = Date.now();
    const lastActive = Date.parse((await keda!.scaledObjectStatus(namespace!, name)).lastActiveTime!);
    assert.ok(
      wentToZero >= lastActive + COOLDOWN_SECONDS * 1000,
      `scaled to zero ${wentToZero - lastActive} ms after the trigger was last active, before the ${COOLDOWN_SECONDS} s cooldown`,
    );
    assert.equal((await condition(name, "Active")).status, "False");

    // Woken by the push alone: the poll still answers "not active".
    const pushed = Date.now();
    scaler!.push(true);
    await eventually(() => assert.ok(replicas(name).spec >= 1), 30_000, 50);
    const scaledUp = Date.now();
    scaler!.pollAnswer = true;
    await eventually(() => assert.equal(replicas(name).ready, 1), 60_000, 100);
    console.log(
      `      KEDA: 0 -> 1 replicas ${((scaledUp - pushed) / 1000).toFixed(2)} s after the push, ` +
        `1 ready pod (kwok) ${((Date.now() - pushed) / 1000).toFixed(2)} s after it`,
    );

    // Load: the HPA KEDA made reads the metric through external.metrics.k8s.io and adds a pod.
    scaler!.metricValue = 2 * TARGET_PER_POD;
    await eventually(
      async () => assert.deepEqual(await keda!.externalMetric(namespace!, name, metricName), [2]),
      30_000,
    );
    await eventually(() => assert.equal(replicas(name).spec, 2), 120_000, 250);
    // KEDA copies its HPA's ScalingActive into HPAActive on its own next reconcile.
    await eventually(async () => assert.equal((await condition(name, "HPAActive")).status, "True"), 30_000, 250);
  });

  it("names its HPA keda-hpa-<name>, controlled by the ScaledObject, and copies the ScaledObject's labels onto it (managed-by too) unless its hpa-excluded-labels annotation lists them", async () => {
    // The labels the operator puts on what it owns: an HPA carrying them would look like its own.
    const ownerLabels = (name: string) => ({
      "app.kubernetes.io/managed-by": "dynamo-kserve-operator",
      "dynamokserve.dev/model": name,
    });
    // Read when the HPA is written: an annotation added later waits for KEDA's next reconcile.
    const excluded = { "scaledobject.keda.sh/hpa-excluded-labels": Object.keys(ownerLabels("")).join(",") };
    scaler!.pollAnswer = true;
    for (const [name, annotations] of [
      ["labelled", {}],
      ["excluded", excluded],
    ] as const) {
      cluster.apply(deployment(namespace!, name), {
        ...scaledObject(namespace!, name, {
          minReplicaCount: 1,
          maxReplicaCount: 2,
          triggers: [{ type: "external-push", metadata: { scalerAddress: `127.0.0.1:${scaler!.port}` } }],
        }),
        metadata: { name, namespace, labels: ownerLabels(name), annotations },
      });
    }
    const labelled = await eventually(() => hpaMetadata("labelled"), 60_000);
    assert.deepEqual(
      labelled.ownerReferences.map(({ kind, name, controller }) => ({ kind, name, controller })),
      [{ kind: "ScaledObject", name: "labelled", controller: true }],
    );
    assert.equal(labelled.labels["app.kubernetes.io/managed-by"], "dynamo-kserve-operator");
    assert.equal(labelled.labels["dynamokserve.dev/model"], "labelled");
    const { labels } = await eventually(() => hpaMetadata("excluded"), 60_000);
    assert.equal(labels["app.kubernetes.io/managed-by"], "keda-operator");
    assert.equal(labels["dynamokserve.dev/model"], undefined);
  });

  it("reopens the push stream after its scaler restarts, and a push still wakes the Deployment from zero", async () => {
    const name = "restarted";
    let own = await ScriptedExternalScaler.start();
    const port = own.port;
    try {
      cluster.apply(
        deployment(namespace!, name),
        scaledObject(namespace!, name, {
          minReplicaCount: 0,
          maxReplicaCount: 1,
          triggers: [{ type: "external-push", metadata: { scalerAddress: `127.0.0.1:${port}` } }],
        }),
      );
      // Never active: KEDA takes it to zero at its first poll (no cooldown without a last active time).
      await eventually(() => assert.equal(replicas(name).spec, 0), 120_000, 250);
      await eventually(() => assert.equal(own.openStreams, 1), 30_000);

      // A restart that ends its streams cleanly (as a pod's graceful shutdown would).
      await own.stop();
      const restarted = Date.now();
      own = await ScriptedExternalScaler.start(port);
      await eventually(() => assert.equal(own.openStreams, 1), 120_000, 100);
      const reopened = Date.now();
      own.push(true);
      await eventually(() => assert.equal(replicas(name).spec, 1), 30_000, 50);
      console.log(
        `      KEDA reopened the push stream ${((reopened - restarted) / 1000).toFixed(1)} s after the scaler restarted`,
      );
    } finally {
      own.pollAnswer = true;
      cluster.kubectl("delete", "scaledobject.keda.sh", name, "-n", namespace!, "--wait=true", "--timeout=60s");
      await own.stop();
    }
  });

  it("a prometheus trigger nobody answers: Ready False with KEDA's reason, and KEDAScalerFailed events naming the cause", async () => {
    const name = "unreachable";
    const nobody = await freePort();
    cluster.apply(
      deployment(namespace!, name),
      scaledObject(namespace!, name, {
        minReplicaCount: 0,
        maxReplicaCount: 3,
        pollingInterval: 1,
        cooldownPeriod: 1,
        triggers: [
          {
            type: "prometheus",
            metadata: { serverAddress: `http://127.0.0.1:${nobody}`, query: "sum(up)", threshold: "1" },
          },
        ],
      }),
    );
    const ready = await eventually(async () => {
      const found = await condition(name, "Ready");
      assert.equal(found.status, "False");
      return found;
    }, 60_000);
    assert.equal(ready.reason, "TriggerError");
    // Several failed polls later (KEDA's Warning events count them). KEDA means to keep the
    // replicas while a trigger fails (RequestScale's TriggerError case), but v2.21 cannot promise
    // it: a poll that finds its scalers cache closed mid-read (the metrics server's request
    // rebuilt it after the last failure cleared it) counts the trigger as neither failing nor
    // active, and an idle ScaledObject at minReplicaCount 0 is scaled to zero. Seen once in CI;
    // the product does not lean on it (the activator's push wakes a model at zero), so the test
    // says what KEDA did rather than asserting it.
    const failures = await eventually(() => {
      const events = scalerFailures(cluster, namespace!, name);
      assert.ok(events.count >= 3, `${events.count} KEDAScalerFailed events so far`);
      assert.match(events.message, new RegExp(`127\\.0\\.0\\.1:${nobody}`));
      return events;
    }, 60_000);
    const kept = replicas(name).spec;
    const hpaActive = await eventually(() => condition(name, "HPAActive"), 60_000).catch(() => undefined);
    console.log(
      `      KEDA on an unreachable Prometheus: Ready ${ready.status} ${ready.reason}: ${ready.message}\n` +
        `      event KEDAScalerFailed: ${failures.message}\n` +
        `      HPAActive: ${hpaActive === undefined ? "(not written)" : `${hpaActive.status} ${hpaActive.reason}: ${hpaActive.message}`}` +
        `\n      replicas after the failed polls: ${kept} (1 unless KEDA's closed-cache race took it to zero)`,
    );
  });
});

interface HpaMetadata {
  readonly labels: Record<string, string>;
  readonly ownerReferences: readonly { kind: string; name: string; controller?: boolean }[];
}

/** A Deployment of pods kwok makes Ready without running them. */
function deployment(namespace: string, name: string): object {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: "main", image: "registry.k8s.io/pause:3.10" }] },
      },
    },
  };
}

/** A ScaledObject on the Deployment of the same name; no HPA stabilization, so each step shows at once. */
function scaledObject(namespace: string, name: string, spec: Record<string, unknown>): object {
  return {
    apiVersion: "keda.sh/v1alpha1",
    kind: "ScaledObject",
    metadata: { name, namespace },
    spec: {
      scaleTargetRef: { name },
      pollingInterval: POLLING_SECONDS,
      cooldownPeriod: COOLDOWN_SECONDS,
      advanced: {
        horizontalPodAutoscalerConfig: {
          behavior: {
            scaleUp: { stabilizationWindowSeconds: 0 },
            scaleDown: { stabilizationWindowSeconds: 0 },
          },
        },
      },
      ...spec,
    },
  };
}

/** KEDA's Warning events for a failing scaler of a ScaledObject: how many, and the last message. */
function scalerFailures(cluster: TestCluster, namespace: string, name: string): { count: number; message: string } {
  const { items } = cluster.kubectlGet<{ items: { reason: string; message: string; count?: number }[] }>(
    "events",
    "-n",
    namespace,
    "--field-selector",
    `involvedObject.kind=ScaledObject,involvedObject.name=${name},reason=KEDAScalerFailed`,
  );
  return {
    count: items.reduce((total, event) => total + (event.count ?? 1), 0),
    message: items.at(-1)?.message ?? "",
  };
}

/**
 * KEDA's external scaler protocol (its externalscaler.proto; the product's generated copy),
 * scripted by the test: StreamIsActive pushes what the test says, IsActive (KEDA's poll)
 * answers `pollAnswer`, GetMetricSpec one metric with a per-pod target, GetMetrics `metricValue`.
 */
class ScriptedExternalScaler {
  pollAnswer = false;
  metricValue = 0;
  /** The ScaledObject the last StreamIsActive named (KEDA sends its name and namespace). */
  streamedFor: Pick<ScaledObjectRef, "name" | "namespace"> | undefined;
  private readonly streams = new Set<ServerWritableStream<ScaledObjectRef, IsActiveResponse>>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** Listens on `port` of loopback (0: any free one). */
  static async start(port = 0): Promise<ScriptedExternalScaler> {
    const server = new Server();
    const bound = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    const scaler = new ScriptedExternalScaler(server, bound);
    server.addService(ExternalScalerService, scaler.handlers());
    return scaler;
  }

  get openStreams(): number {
    return this.streams.size;
  }

  /** Sends `active` on every open StreamIsActive. */
  push(active: boolean): void {
    for (const stream of this.streams) stream.write({ result: active });
  }

  /** Ends the streams cleanly (KEDA then retries after its shortest backoff) and stops. */
  stop(): Promise<void> {
    for (const stream of this.streams) stream.end();
    return new Promise((resolve) => this.server.tryShutdown(() => resolve()));
  }

  private handlers(): ExternalScalerServer {
    const metric = (value: number) => ({ metricName: METRIC, value: BigInt(value) });
    return {
      isActive: (_call, done) => done(null, { result: this.pollAnswer }),
      streamIsActive: (stream) => {
        this.streamedFor = { name: stream.request.name, namespace: stream.request.namespace };
        this.streams.add(stream);
        stream.on("cancelled", () => this.streams.delete(stream));
        stream.on("finish", () => this.streams.delete(stream));
      },
      getMetricSpec: (_call, done) => {
        const { metricName, value } = metric(TARGET_PER_POD);
        done(null, { metricSpecs: [{ metricName, targetSize: value, targetSizeFloat: 0 }] });
      },
      getMetrics: (_call, done) => {
        const { metricName, value } = metric(this.metricValue);
        done(null, { metricValues: [{ metricName, metricValue: value, metricValueFloat: 0 }] });
      },
      streamMetricSpec: (call) => call.emit("error", { code: status.UNIMPLEMENTED, details: "not scripted" }),
    };
  }
}

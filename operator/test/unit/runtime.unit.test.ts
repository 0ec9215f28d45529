import assert from "node:assert/strict";
import { pino } from "pino";
import { contains, hashOf } from "../../src/kube/apply.js";
import { WorkQueue } from "../../src/kube/queue.js";
import { EventRecorder } from "../../src/kube/events.js";

describe("apply: does the live object hold the desired one?", () => {
  it("ignores extra live fields and compares lists element by element", () => {
    const desired = { spec: { ports: [{ name: "grpc", port: 1 }] } };
    assert.ok(
      contains({ spec: { ports: [{ name: "grpc", port: 1, protocol: "TCP" }], clusterIP: "1.2.3.4" } }, desired),
    );
    assert.ok(!contains({ spec: { ports: [{ name: "grpc", port: 2 }] } }, desired));
    assert.ok(
      !contains(
        {
          spec: {
            ports: [
              { name: "grpc", port: 1 },
              { name: "x", port: 3 },
            ],
          },
        },
        desired,
      ),
    );
    assert.ok(!contains({ spec: {} }, desired));
  });

  it("compares resource quantities by value, as the API server rewrites them", () => {
    assert.ok(contains({ resources: { limits: { cpu: "1" } } }, { resources: { limits: { cpu: "1000m" } } }));
    assert.ok(contains({ resources: { limits: { memory: "1Gi" } } }, { resources: { limits: { memory: "1024Mi" } } }));
    assert.ok(!contains({ resources: { limits: { cpu: "2" } } }, { resources: { limits: { cpu: "1000m" } } }));
    assert.ok(!contains({ image: "1" }, { image: "1000m" }), "only resources compare as quantities");
  });

  it("hashes equal objects equally whatever their key order", () => {
    assert.equal(hashOf({ a: 1, b: { c: 2, d: 3 } }), hashOf({ b: { d: 3, c: 2 }, a: 1 }));
    assert.notEqual(hashOf({ a: 1 }), hashOf({ a: 2 }));
  });
});

describe("work queue", () => {
  const logger = pino({ level: "silent" });
  const tick = (ms = 20) => new Promise((resolve) => setTimeout(resolve, ms));

  it("queues a key once and never runs one key on two workers at a time", async () => {
    const running = new Set<string>();
    const runs: string[] = [];
    let overlap = false;
    const queue = new WorkQueue(
      async (key) => {
        if (running.has(key)) overlap = true;
        running.add(key);
        runs.push(key);
        await tick();
        running.delete(key);
        return undefined;
      },
      { name: "t", workers: 4, baseDelayMs: 5, maxDelayMs: 50, logger },
    );
    queue.start();
    queue.add("a");
    queue.add("a");
    queue.add("b");
    await tick(5);
    queue.add("a"); // while "a" runs: runs once more afterwards
    await tick(100);
    await queue.stop();
    assert.equal(overlap, false);
    assert.deepEqual(runs.sort(), ["a", "a", "b"]);
  });

  it("retries a failing key with growing delays until it succeeds", async () => {
    const attempts: number[] = [];
    const queue = new WorkQueue(
      async () => {
        attempts.push(Date.now());
        if (attempts.length < 4) throw new Error("not yet");
        return undefined;
      },
      { name: "t", workers: 1, baseDelayMs: 10, maxDelayMs: 1000, logger },
    );
    queue.start();
    queue.add("k");
    await tick(300);
    await queue.stop();
    assert.equal(attempts.length, 4);
    const gaps = attempts.slice(1).map((at, i) => at - attempts[i]!);
    assert.ok(gaps[2]! >= gaps[0]!, `delays grow: ${gaps.join(", ")}`);
    assert.ok(gaps[0]! >= 9, `first retry waits the base delay: ${gaps[0]}`);
  });

  it("keeps one periodic requeue per key however many events re-run it", async () => {
    let runs = 0;
    // Every reconcile asks to run again in 60 ms, as the repository controller does.
    const queue = new WorkQueue(
      async () => {
        runs++;
        return 60;
      },
      { name: "t", workers: 1, baseDelayMs: 5, maxDelayMs: 50, logger },
    );
    queue.start();
    for (let event = 0; event < 5; event++) {
      queue.add("k"); // five events 10 ms apart: five runs, each asking for a requeue
      await tick(10);
    }
    const afterEvents = runs;
    await tick(45); // until before the next period: the first event's requeue alone runs, not one per event
    await queue.stop();
    assert.equal(afterEvents, 5);
    assert.equal(runs - afterEvents, 1, `runs in the next period: ${runs - afterEvents}`);
  });
});

describe("event recorder", () => {
  const logger = pino({ level: "silent" });
  const owner = (name: string) => ({
    apiVersion: "dynamokserve.dev/v1alpha1",
    kind: "DynamoKserveModel",
    metadata: { name, namespace: "ns", uid: name },
  });
  const transition = (reason: string) => ({ type: "Normal" as const, reason, message: reason });

  it("returns at once while the API server is slow, then sends everything stamped with when it was recorded", async () => {
    const sent: { name: string; reason: string; at: Date }[] = [];
    let inFlight = 0;
    let mostInFlight = 0;
    let release: () => void = () => undefined;
    const slowApiServer = new Promise<void>((resolve) => (release = resolve));
    const sink = {
      event: async (o: { metadata: { name: string } }, t: { reason: string }, at: Date) => {
        mostInFlight = Math.max(mostInFlight, ++inFlight);
        await slowApiServer;
        inFlight--;
        sent.push({ name: o.metadata.name, reason: t.reason, at });
      },
    };
    const recorder = new EventRecorder(sink, logger);
    for (let i = 0; i < 6; i++) recorder.record(owner(`m${i}`), transition("Ready"));
    // record() returned six times while the API server had answered nothing.
    const recordedBy = Date.now();
    assert.equal(sent.length, 0);
    await new Promise((resolve) => setTimeout(resolve, 20));
    release();
    await recorder.flush(5_000);
    assert.deepEqual(sent.map((event) => event.name).sort(), ["m0", "m1", "m2", "m3", "m4", "m5"]);
    assert.ok(
      sent.every((event) => event.at.getTime() <= recordedBy),
      "timestamps are the recording time, not the sending time",
    );
    assert.equal(mostInFlight, 2, "two at a time");
  });

  it("logs a failed event and goes on; drops (and counts) what exceeds 1,000 waiting", async () => {
    const sent: string[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const sink = {
      event: async (o: { metadata: { name: string } }) => {
        await gate;
        if (o.metadata.name === "bad") throw new Error("refused");
        sent.push(o.metadata.name);
      },
    };
    let dropped = 0;
    const recorder = new EventRecorder(sink, logger, () => dropped++);
    recorder.record(owner("bad"), transition("x"));
    for (let i = 0; i < 1_050; i++) recorder.record(owner(`m${i}`), transition("x"));
    // Two are in flight, 1,000 wait: the rest are dropped.
    assert.equal(dropped, 1_051 - 2 - 1_000);
    release();
    await recorder.flush(10_000);
    assert.equal(sent.length, 1_001);
    assert.ok(!sent.includes("bad"));
  });

  it("flush gives up after its timeout when the API server never answers", async () => {
    const recorder = new EventRecorder({ event: () => new Promise<void>(() => undefined) }, logger);
    recorder.record(owner("m"), transition("x"));
    const started = Date.now();
    await recorder.flush(100);
    assert.ok(Date.now() - started < 1_000);
  });
});

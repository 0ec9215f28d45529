import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type KubeConfig,
  KubernetesObjectApi,
  type KubernetesObject,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import { OPERATOR_NAME, type Owner } from "../api/objects.js";
import { keyOf, labelledKey, type Controller, type ReconciledObject } from "./controller.js";
import { WatchedObjects, type WatchedKind } from "./informer.js";
import { LeaderElector, type LeaderElectionOptions } from "./leader.js";
import { OperatorMetrics } from "./metrics.js";
import { OptionalKind } from "./optional-kind.js";
import { OwnedCaches, type UnselectedCache } from "./owned-caches.js";
import { kindKey, type OwnedKind } from "./owned.js";
import { WorkQueue } from "./queue.js";
import { KubeWriter } from "./writer.js";
import { closeApiClients, makeObjectsClient } from "./api-clients.js";
import { loadCluster, waitForApiServer, type ClusterConfig } from "./cluster.js";
import { EventRecorder } from "./events.js";

/** How long stopping waits for Events still queued. */
const EVENT_FLUSH_MS = 5_000;

export interface ManagerOptions {
  /** Path of a kubeconfig; undefined loads the default (~/.kube/config, else in-cluster). */
  readonly kubeconfig: string | undefined;
  /** At start, how long to wait for the API server to answer before giving up. */
  readonly clusterWaitSeconds: number;
  /** Namespaces to manage; empty means all. */
  readonly namespaces: readonly string[];
  /** Keys reconciled in parallel, per controller. */
  readonly workers: number;
  readonly httpHost: string;
  readonly httpPort: number;
  /** Every object is reconciled again this often, as a safety net behind the watches. */
  readonly resyncSeconds: number;
  /** With several replicas: only the Lease holder reconciles; undefined runs without election. */
  readonly leaderElection: Omit<LeaderElectionOptions, "logger"> | undefined;
  /** Called if leadership is lost (the CLI exits, so the pod restarts as a candidate). */
  readonly onLostLeadership?: () => void;
  readonly logger: Logger;
}

/** Backoff of a key whose reconcile fails: 200 ms, doubling, at most a minute. */
const BACKOFF = { baseDelayMs: 200, maxDelayMs: 60_000 };

/** A controller as the manager runs it: its queue, and the status it last wrote per key. */
interface Running {
  readonly controller: Controller<ReconciledObject, unknown>;
  readonly queue: WorkQueue;
  readonly writtenStatus: Map<string, unknown>;
}

/**
 * The small controller runtime, after controller-runtime's manager: it owns the caches
 * (watches started and synced before the first reconcile), the CRDs of optional kinds,
 * the writer, the HTTP endpoint (/healthz, /readyz, /metrics), leader election, resync
 * and shutdown, and runs each registered controller's reconciles from its own work queue.
 * From the kinds controllers declare they own, it makes their caches, routes their events
 * to their owners, applies each reconcile's plan and prunes (owned-caches.ts). Events
 * reach only the controllers that own or watch their kind.
 */
export class Manager {
  readonly config: KubeConfig;
  private readonly cluster: ClusterConfig;
  readonly metrics = new OperatorMetrics();
  readonly writer: KubeWriter;
  private readonly events: EventRecorder;
  private readonly objectsApi: KubernetesObjectApi;
  private readonly caches: WatchedObjects<KubernetesObject>[] = [];
  private readonly optionalKinds: OptionalKind<KubernetesObject>[] = [];
  /** Caches of every object of a kind (no selector), by kind: owned kinds reuse them. */
  private readonly unselected = new Map<string, UnselectedCache>();
  /** The caches of owned kinds, and the plan runner. */
  readonly owned: OwnedCaches;
  private readonly running: Running[] = [];
  private readonly crds: WatchedObjects<V1CustomResourceDefinition & KubernetesObject>;
  private resync: NodeJS.Timeout | undefined;
  private elector: LeaderElector | undefined;
  private http: Server | undefined;
  private ready = false;

  constructor(private readonly options: ManagerOptions) {
    this.cluster = loadCluster(options.kubeconfig);
    this.config = this.cluster.config;
    this.objectsApi = makeObjectsClient(this.config);
    this.writer = new KubeWriter(this.config, this.metrics, options.logger);
    this.owned = new OwnedCaches(this.writer);
    this.events = new EventRecorder(this.writer, options.logger, () => this.metrics.eventsDropped.inc());
    // CRDs are cluster-scoped: watched to notice optional kinds' coming and going.
    this.crds = new WatchedObjects(
      this.config,
      this.objectsApi,
      { apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", plural: "customresourcedefinitions" },
      {
        namespaces: [],
        logger: options.logger,
        onEvent: (_event, crd) =>
          this.optionalKinds.filter((kind) => kind.crdName === crd.metadata?.name).forEach((kind) => kind.crdChanged()),
      },
    );
    this.caches.push(this.crds);
  }

  /** A cache of `kind` in the managed namespaces (only objects matching `labelSelector`), routing its events. */
  watch<T extends KubernetesObject>(kind: WatchedKind, labelSelector?: string): WatchedObjects<T> {
    const cache = this.makeCache<T>(kind, labelSelector);
    this.caches.push(cache);
    if (labelSelector === undefined) this.unselected.set(kindKey(kind), { watched: cache });
    return cache;
  }

  /**
   * A kind whose CRD someone else installs: watched while the CRD is there. When it comes,
   * changes or goes, every object is reconciled again (and what was applied of a removed
   * kind is forgotten, as its objects went with it).
   */
  optional<T extends KubernetesObject>(kind: WatchedKind, labelSelector?: string): OptionalKind<T> {
    const optional = new OptionalKind<T>(
      kind,
      this.crds,
      () => this.makeCache<T>(kind, labelSelector),
      (installed) => {
        if (!installed) this.writer.forgetKind(kind.kind);
        this.enqueueEverything();
      },
      this.options.logger,
    );
    this.optionalKinds.push(optional);
    if (labelSelector === undefined) {
      this.unselected.set(kindKey(kind), { optional });
    }
    return optional;
  }

  /** Runs `controller` once the manager starts (and while it leads). */
  register<T extends ReconciledObject, Status>(controller: Controller<T, Status>): void {
    const erased = controller as unknown as Controller<ReconciledObject, unknown>;
    const running: Running = {
      controller: erased,
      writtenStatus: new Map(),
      queue: new WorkQueue((key) => this.measured(running, key), {
        name: controller.name,
        workers: this.options.workers,
        ...BACKOFF,
        logger: this.options.logger,
        metrics: this.metrics.queue(controller.name),
      }),
    };
    this.running.push(running);
  }

  /**
   * Serves the HTTP endpoint, fills every cache before the first reconcile (so a restart
   * starts from what exists and writes nothing), then leads — at once, or once elected. A
   * candidate that does not lead keeps its caches warm, to take over at once.
   */
  async start(): Promise<{ httpPort: number }> {
    const { logger } = this.options;
    const port = await this.startHttp();
    await waitForApiServer(this.cluster, { timeoutMs: this.options.clusterWaitSeconds * 1000, logger });
    this.declareOwnedKinds();
    await Promise.all(this.caches.map((cache) => cache.start()));
    this.optionalKinds.forEach((kind) => kind.crdChanged());
    await Promise.all(this.optionalKinds.map((kind) => kind.settled()));
    const leaderGauge = this.metrics.leaderStatus(this.options.leaderElection?.name ?? OPERATOR_NAME);
    if (this.options.leaderElection === undefined) {
      leaderGauge.set(1);
      this.lead();
    } else {
      leaderGauge.set(0);
      const elector = new LeaderElector(this.config, { ...this.options.leaderElection, logger });
      this.elector = elector;
      void elector.acquire().then(
        () => {
          leaderGauge.set(1);
          this.lead();
          elector.keepLeading(() => {
            leaderGauge.set(0);
            clearInterval(this.resync);
            void Promise.all(this.running.map(({ queue }) => queue.stop())).then(() =>
              this.options.onLostLeadership?.(),
            );
          });
        },
        (error: unknown) => {
          if (!this.ready) return; // stopped while waiting
          logger.error({ err: errorMessage(error) }, "leader election failed");
          this.options.onLostLeadership?.();
        },
      );
    }
    this.ready = true;
    return { httpPort: port };
  }

  async stop(): Promise<void> {
    this.ready = false;
    clearInterval(this.resync);
    await Promise.all(this.running.map(({ queue }) => queue.stop()));
    await this.events.flush(EVENT_FLUSH_MS);
    await this.elector?.release();
    await Promise.all([...this.caches.map((cache) => cache.stop()), ...this.optionalKinds.map((kind) => kind.stop())]);
    await new Promise<void>((resolve) => (this.http === undefined ? resolve() : this.http.close(() => resolve())));
    closeApiClients(this.config);
  }

  private makeCache<T extends KubernetesObject>(kind: WatchedKind, labelSelector: string | undefined) {
    return new WatchedObjects<T>(this.config, this.objectsApi, kind, {
      namespaces: this.options.namespaces,
      ...(labelSelector !== undefined ? { labelSelector } : {}),
      logger: this.options.logger,
      onEvent: (event, object) => {
        this.owned.observe(kind, event, object);
        this.route(kind.kind, object);
      },
    });
  }

  /** One cache per kind any controller owns (after every watch exists, so whole-kind caches are reused). */
  private declareOwnedKinds(): void {
    const factory = {
      watch: (kind: OwnedKind, selector: string) => this.watch(kind, selector),
      optional: (kind: OwnedKind, selector: string) => this.optional(kind, selector),
    };
    for (const { controller } of this.running) {
      this.owned.declare(controller.owns, factory, (kind) => this.unselected.get(kindKey(kind)));
    }
  }

  private lead(): void {
    this.running.forEach(({ queue }) => queue.start());
    this.enqueueEverything();
    this.resync = setInterval(() => this.enqueueEverything(), this.options.resyncSeconds * 1000);
    this.resync.unref();
  }

  /**
   * An event on an object of `kind`: the keys it concerns, for each controller reconciling,
   * owning (its owner, as the owner label names it) or watching that kind.
   */
  private route(kind: string, object: KubernetesObject): void {
    for (const { controller, queue } of this.running) {
      if (controller.kind === kind) queue.add(keyOf(object.metadata?.namespace ?? "", object.metadata?.name ?? ""));
      if (controller.owns.some((owned) => owned.kind === kind)) {
        labelledKey(controller.ownerLabel, object).forEach((key) => queue.add(key));
      }
      for (const watch of controller.watches) {
        if (watch.kinds.includes(kind)) watch.keys(object).forEach((key) => queue.add(key));
      }
    }
  }

  /** Every object of every controller: at start, on resync, and when a CRD comes or goes. */
  private enqueueEverything(): void {
    for (const { controller, queue } of this.running) {
      for (const object of controller.objects()?.list() ?? []) {
        queue.add(keyOf(object.metadata.namespace, object.metadata.name));
      }
    }
  }

  /** One reconcile, timed and counted with controller-runtime's result labels. */
  private async measured(running: Running, key: string): Promise<number | undefined> {
    const { name } = running.controller;
    const stopTimer = this.metrics.reconcileTime.startTimer({ controller: name });
    try {
      const requeueAfterMs = await this.reconcileKey(running, key);
      this.metrics.reconcileTotal.inc({
        controller: name,
        result: requeueAfterMs === undefined ? "success" : "requeue_after",
      });
      return requeueAfterMs;
    } catch (error) {
      this.metrics.reconcileTotal.inc({ controller: name, result: "error" });
      this.metrics.reconcileErrors.inc({ controller: name });
      throw error;
    } finally {
      stopTimer();
    }
  }

  /**
   * The prologue and epilogue every controller shares: a missing or deleting object is
   * forgotten (what it owned goes by garbage collection); otherwise it is reconciled as
   * of the status last written (the cache may not show it yet), its plan applied (and what
   * it no longer wants pruned), then the status is applied if it changed and the
   * condition changes are recorded as Events.
   */
  private async reconcileKey({ controller, writtenStatus }: Running, key: string): Promise<number | undefined> {
    const [namespace, name] = key.split("/") as [string, string];
    const cached = controller.objects()?.get(namespace, name);
    if (cached === undefined || cached.metadata.deletionTimestamp !== undefined) {
      writtenStatus.delete(key);
      this.writer.forget(namespace, controller.ownedNames?.(name) ?? []);
      return undefined;
    }
    const written = writtenStatus.get(key);
    const object = written === undefined ? cached : { ...cached, status: written };
    const planned = await controller.reconcile(object);
    const outcomes = await this.owned.apply(
      { object, ownerLabel: controller.ownerLabel, owns: controller.owns },
      planned.plan,
    );
    const outcome = await planned.settle(outcomes);
    // Kinds with a status are our own (DynamoKserveModel, DynamoKserveRepository): read
    // from the API server, they carry apiVersion, kind and uid.
    const owner = object as ReconciledObject & Owner;
    if (outcome.status !== undefined && controller.statusPlural !== undefined) {
      await this.writer.status(owner, controller.statusPlural, outcome.status as object);
      writtenStatus.set(key, outcome.status);
    }
    for (const transition of outcome.transitions ?? []) this.events.record(owner, transition);
    return outcome.requeueAfterMs;
  }

  private async startHttp(): Promise<number> {
    const { metrics } = this;
    const server = createServer((request, response) => {
      const path = (request.url ?? "/").split("?")[0];
      if (path === "/healthz") {
        response.writeHead(200).end("ok\n");
      } else if (path === "/readyz") {
        response.writeHead(this.ready ? 200 : 503).end(this.ready ? "ok\n" : "caches not synced\n");
      } else if (path === "/metrics") {
        metrics.registry.metrics().then(
          (text) => response.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
          () => response.writeHead(500).end(),
        );
      } else {
        response.writeHead(404).end(`not found: ${path}\n`);
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.options.httpPort, this.options.httpHost, () => resolve());
    });
    this.http = server;
    return (server.address() as AddressInfo).port;
  }
}

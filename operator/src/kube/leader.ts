import { ApiException, CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import { makeApiClient } from "./api-clients.js";

/**
 * Lease-based leader election (coordination.k8s.io/v1), as client-go's leaderelection
 * does it: a candidate takes the Lease when it is free or its holder has not renewed it
 * for a lease duration *as this candidate observed it* (its own clock, so clock skew
 * between nodes does not matter), the leader renews it every retry period, and a leader
 * that cannot renew within the renew deadline stops leading. Updates carry the Lease's
 * resourceVersion, so two candidates never both win a race.
 */

export interface LeaderElectionOptions {
  readonly namespace: string;
  readonly name: string;
  /** This candidate's identity, written as holderIdentity (unique per process). */
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly logger: Logger;
}

interface ObservedRecord {
  readonly holder: string;
  readonly renewTime: string;
  /** When this candidate saw the record change (its own clock). */
  readonly at: number;
}

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private observed: ObservedRecord | undefined;
  private leading = false;
  private stopped = false;
  private renewTimer: NodeJS.Timeout | undefined;
  /** The renewal in flight, if any: release waits for it, or the two would race on the Lease. */
  private renewing: Promise<void> = Promise.resolve();

  constructor(
    config: KubeConfig,
    private readonly options: LeaderElectionOptions,
  ) {
    this.api = makeApiClient(config, CoordinationV1Api);
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** Resolves once this candidate holds the Lease (retrying every retry period). */
  async acquire(): Promise<void> {
    const { logger, namespace, name } = this.options;
    logger.info({ lease: `${namespace}/${name}`, identity: this.options.identity }, "waiting for leadership");
    while (!this.stopped) {
      if (await this.tryAcquireOrRenew()) {
        this.leading = true;
        logger.info({ lease: `${namespace}/${name}`, identity: this.options.identity }, "became leader");
        return;
      }
      await sleep(this.options.retryPeriodMs);
    }
    throw new Error("leader election stopped before leadership was acquired");
  }

  /** Renews the Lease every retry period; calls `onLost` once if it cannot within the renew deadline. */
  keepLeading(onLost: () => void): void {
    let lastRenewed = Date.now();
    const renew = async (): Promise<void> => {
      if (this.stopped) return;
      if (await this.tryAcquireOrRenew()) {
        lastRenewed = Date.now();
      } else if (Date.now() - lastRenewed > this.options.renewDeadlineMs) {
        this.leading = false;
        this.options.logger.error({ identity: this.options.identity }, "lost leadership: could not renew the lease");
        onLost();
        return;
      }
      this.renewTimer = setTimeout(() => (this.renewing = renew()), this.options.retryPeriodMs);
    };
    this.renewTimer = setTimeout(() => (this.renewing = renew()), this.options.retryPeriodMs);
  }

  /** Stops renewing and, if leading, gives the Lease up so another candidate takes over at once. */
  async release(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.renewTimer);
    await this.renewing;
    if (!this.leading) return;
    this.leading = false;
    const { namespace, name, identity } = this.options;
    try {
      const lease = await this.api.readNamespacedLease({ name, namespace });
      if (lease.spec?.holderIdentity !== identity) return;
      lease.spec = { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: new V1MicroTime() };
      await this.api.replaceNamespacedLease({ name, namespace, body: lease });
      this.options.logger.info({ identity }, "released leadership");
    } catch (error) {
      this.options.logger.warn({ err: errorMessage(error) }, "could not release the lease; it expires on its own");
    }
  }

  /** One attempt to take or renew the Lease; false when another holder has it or a race was lost. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity, leaseDurationMs } = this.options;
    const now = new V1MicroTime();
    const spec = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 0,
    };
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (error) {
      if (!(error instanceof ApiException) || error.code !== 404) return this.failed("read", error);
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name, namespace }, spec },
        });
        return true;
      } catch (createError) {
        return this.failed("create", createError);
      }
    }
    const current = lease.spec ?? {};
    const holder = current.holderIdentity ?? "";
    // client-node hands MicroTime fields over as the API server's strings, not Dates.
    const renewTime = String(current.renewTime ?? "");
    if (this.observed === undefined || this.observed.holder !== holder || this.observed.renewTime !== renewTime) {
      this.observed = { holder, renewTime, at: Date.now() };
    }
    const durationMs = (current.leaseDurationSeconds ?? 0) * 1000;
    const heldByOther = holder !== "" && holder !== identity && this.observed.at + durationMs > Date.now();
    if (heldByOther) return false;
    lease.spec = {
      ...spec,
      acquireTime: holder === identity && current.acquireTime !== undefined ? current.acquireTime : now,
      leaseTransitions: (current.leaseTransitions ?? 0) + (holder === identity ? 0 : 1),
    };
    try {
      await this.api.replaceNamespacedLease({ name, namespace, body: lease });
      return true;
    } catch (error) {
      return this.failed("update", error);
    }
  }

  private failed(what: string, error: unknown): false {
    // A conflict is a lost race, not a failure worth a log line.
    if (!(error instanceof ApiException && error.code === 409)) {
      this.options.logger.warn({ err: errorMessage(error) }, `leader election: could not ${what} the lease`);
    }
    return false;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

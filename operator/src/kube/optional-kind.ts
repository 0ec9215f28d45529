import type { KubernetesObject, V1CustomResourceDefinition } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import type { WatchedKind, WatchedObjects } from "./informer.js";

/**
 * A kind defined by a CRD someone else installs (InferencePool, ServiceMonitor), which
 * may appear, change or go while the operator runs. The CRD is read from the watched
 * CRD cache; while it is established and serves the version we use, the kind itself is
 * watched. `onChange` runs whenever that changes, so models are reconciled again (a pool
 * is created when its CRD shows up, without a restart).
 */
export class OptionalKind<T extends KubernetesObject> {
  private watched: WatchedObjects<T> | undefined;
  private transition: Promise<void> = Promise.resolve();

  constructor(
    readonly kind: WatchedKind,
    private readonly crds: WatchedObjects<V1CustomResourceDefinition & KubernetesObject>,
    private readonly watch: () => WatchedObjects<T>,
    /** Told `installed` after every CRD change (so models are reconciled again). */
    private readonly onChange: (installed: boolean) => void,
    private readonly logger: Logger,
  ) {}

  /** `<plural>.<group>`, the CRD's name. */
  get crdName(): string {
    return `${this.kind.plural}.${this.kind.apiVersion.split("/")[0]}`;
  }

  /** The installed CRD, if it is established and serves our version. */
  crd(): V1CustomResourceDefinition | undefined {
    const crd = this.crds.get("", this.crdName);
    const version = this.kind.apiVersion.split("/")[1];
    const established = crd?.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
    const served = crd?.spec.versions.some((candidate) => candidate.name === version && candidate.served);
    return established === true && served === true ? crd : undefined;
  }

  /** The kind's objects while its CRD is installed (undefined otherwise). */
  objects(): WatchedObjects<T> | undefined {
    return this.watched;
  }

  /** Whether the CRD's schema for our version has `spec.<field>` (e.g. appProtocol, added in a later release). */
  specHasField(field: string): boolean {
    const version = this.kind.apiVersion.split("/")[1];
    const schema = this.crd()?.spec.versions.find((candidate) => candidate.name === version)?.schema?.openAPIV3Schema;
    return schema?.properties?.["spec"]?.properties?.[field] !== undefined;
  }

  /** Called on every CRD event: starts or stops watching the kind to match. */
  crdChanged(): void {
    this.transition = this.transition
      .then(() => this.align())
      .catch((error: unknown) => {
        this.logger.error({ kind: this.kind.kind, err: errorMessage(error) }, "could not follow the CRD");
      });
  }

  /** Resolves once the CRD changes seen so far are acted on. */
  settled(): Promise<void> {
    return this.transition;
  }

  async stop(): Promise<void> {
    await this.transition;
    await this.watched?.stop();
    this.watched = undefined;
  }

  private async align(): Promise<void> {
    const installed = this.crd() !== undefined;
    if (installed && this.watched === undefined) {
      const watched = this.watch();
      await watched.start();
      this.watched = watched;
      this.logger.info({ crd: this.crdName }, "CRD installed; watching its objects");
    } else if (!installed && this.watched !== undefined) {
      const watched = this.watched;
      this.watched = undefined;
      await watched.stop();
      this.logger.info({ crd: this.crdName }, "CRD removed; no longer watching its objects");
    }
    // Also on schema changes (a CRD upgraded in place): the models look again.
    this.onChange(installed);
  }
}

/**
 * The model's data-plane pods as the activator sees them: which are ready to take requests.
 * Behind an interface so tests can script it (kube-pods.ts watches the API server).
 */

/** A data-plane pod that takes requests: Ready, with an IP, not being deleted. */
export interface ReadyPod {
  readonly name: string;
  readonly ip: string;
}

export interface PodWatch {
  /** Whether the watch has listed the pods once: before that, "no ready pod" is not yet known. */
  readonly synced: boolean;
  /** The pods ready now, in a stable order. */
  readyPods(): readonly ReadyPod[];
  /** Called after every change of `synced` or of the ready pods. */
  onChange(listener: () => void): void;
  stop(): Promise<void>;
}

/** A pod watch driven by hand: tests, and the seam a watch of another source would use. */
export class ScriptedPods implements PodWatch {
  private pods: readonly ReadyPod[] = [];
  private listeners: (() => void)[] = [];
  synced = false;

  readyPods(): readonly ReadyPod[] {
    return this.pods;
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Sets the ready pods (and marks the watch synced). */
  set(pods: readonly ReadyPod[]): void {
    this.pods = pods;
    this.synced = true;
    for (const listener of this.listeners) listener();
  }

  async stop(): Promise<void> {
    this.listeners = [];
  }
}

/**
 * Values any number of holders may hold at once: a value is held until each of its holds is
 * released. What the registry's model folders of changes under way and the model cache's
 * snapshots about to be shown use, so that neither is cleaned up meanwhile.
 */
export class Holds<T> {
  private readonly counts = new Map<T, number>();

  /** Holds `value` until the returned function is called (once; calling it again does nothing). */
  hold(value: T): () => void {
    this.counts.set(value, (this.counts.get(value) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const count = (this.counts.get(value) ?? 1) - 1;
      if (count > 0) this.counts.set(value, count);
      else this.counts.delete(value);
    };
  }

  /** The values held now. */
  held(): IterableIterator<T> {
    return this.counts.keys();
  }
}

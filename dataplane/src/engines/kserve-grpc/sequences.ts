/**
 * Which upstream holds each open sequence (Triton's sequence batching keeps a sequence's
 * state on one server), bounded: a sequence idle longer than `idleMs` is forgotten (as
 * Triton drops a sequence idle past max_sequence_idle_microseconds), and past `capacity`
 * the least recently used one goes. A client that never sends sequence_end cannot grow it
 * without bound. Entries are kept in the order of last use, so expiry looks only at the
 * oldest ones.
 */
export class SequenceAffinity<Endpoint> {
  private readonly bound = new Map<string, { endpoint: Endpoint; lastUsed: number }>();

  constructor(
    private readonly idleMs: number,
    private readonly capacity: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The endpoint the sequence is bound to, if it is still open; using it keeps it open. */
  get(sequence: string): Endpoint | undefined {
    this.expire();
    const entry = this.bound.get(sequence);
    if (entry === undefined) return undefined;
    this.touch(sequence, entry.endpoint);
    return entry.endpoint;
  }

  bind(sequence: string, endpoint: Endpoint): void {
    this.expire();
    this.touch(sequence, endpoint);
    if (this.bound.size > this.capacity) this.bound.delete(this.bound.keys().next().value!);
  }

  /** The sequence ended (sequence_end): its binding goes. */
  end(sequence: string): void {
    this.bound.delete(sequence);
  }

  get size(): number {
    return this.bound.size;
  }

  private touch(sequence: string, endpoint: Endpoint): void {
    this.bound.delete(sequence);
    this.bound.set(sequence, { endpoint, lastUsed: this.now() });
  }

  private expire(): void {
    const oldestAllowed = this.now() - this.idleMs;
    for (const [sequence, { lastUsed }] of this.bound) {
      if (lastUsed >= oldestAllowed) break;
      this.bound.delete(sequence);
    }
  }
}
